#!/usr/bin/env bash
# The 10-seed paper-budget reacher_hard PBAC run (100,000 env steps, one env per seed, 5 updates
# per step, K = 10, width 256) through `train.py table`, so the result comes with the paper's
# statistics beside 912 [861, 966] / 753 [657, 806]. At 10.19 ms per step on an H200
# (docs/evidence/h200-20261128b.md) it needs ~20 min: raise LIMIT, or run the script twice.
#
#   OUT=<dir> COMMIT=<hash> LIMIT=1500 bash benchmarks/gpu/reacher_table.sh   # on a GPU machine
#   DRY_RUN=1 bash benchmarks/gpu/reacher_table.sh                          # on a CPU: the same commands at tiny sizes
#
# Run again with the same TABLE directory (default /tmp/reacher_table), it continues the table:
# `train.py table` skips a finished run and resumes an interrupted one from its newest checkpoint
# (every 20,000 steps, and when `bounded` stops it at the script's LIMIT: one SIGTERM, a checkpoint
# after the chunk). The checkpoints hold 10 seeds' replay buffers and networks, too large to copy
# back with $OUT, so the table stays in TABLE on the machine: a second run continues it only on
# the same machine. Elsewhere the script starts the table again.
#
# What comes back in $OUT, rewritten every COPY_SECONDS (60) and at the end, finished or cut:
# device.txt, log.txt, table.json (the plan and the run's status), summary.json (how the run ended
# and how far it got), results.md and time_to_score.json (`train.py report RUN --x steps wall
# --score-fraction 0.9 1.0` of the run as it is, unfinished runs marked), and reacher_table.tgz
# (the run's config.json, eval.jsonl, metrics.jsonl, visits.jsonl, summary.json and that report
# with its curves; no checkpoints): enough to rebuild the report with `train.py report` here.
set -uo pipefail
cd "$(dirname "$0")/../.."
source benchmarks/gpu/setup.sh
COPY_SECONDS=${COPY_SECONDS:-60}
TINY=()
if [ "${DRY_RUN:-0}" = 1 ]; then
  TABLE=${TABLE:-$(mktemp -d)/table}
  # setup.sh's DRY_TINY, 2 seeds: the training program of fast.sh's dry run (the stand-in's `_fast`
  # profile at these sizes is this program), which the compile cache then serves here.
  TINY=(--seeds 2 "${DRY_TINY[@]}")
else
  TABLE=${TABLE:-/tmp/reacher_table}
fi
TASK=$(dry reacher_hard)
RUN=$TABLE/runs/pbac_$TASK
log() { echo "$@" | tee -a "$OUT/log.txt"; }

collect() {  # what comes back, from the run as it is now
  cp "$TABLE/table.json" "$RUN/summary.json" "$OUT/" 2>/dev/null
  [ -s "$RUN/eval.jsonl" ] || return 0
  if python3 train.py report "$RUN" --out "$TABLE/call_report" --x steps wall --score-fraction 0.9 1.0 > "$TABLE/printed.txt" 2>&1; then
    cp "$TABLE/call_report/results.md" "$TABLE/call_report/time_to_score.json" "$OUT/"
  else
    log "report failed:"; tail -3 "$TABLE/printed.txt" | tee -a "$OUT/log.txt"
  fi
  tar -czf "$OUT/reacher_table.tgz.tmp" -C "$TABLE" --exclude=checkpoints --exclude=tb --exclude=.lock \
    "runs/pbac_$TASK" call_report && mv "$OUT/reacher_table.tgz.tmp" "$OUT/reacher_table.tgz"
}

if [ -s "$TABLE/table.json" ]; then
  log "continuing the table in $TABLE ($(python3 -c "import json,sys; print(', '.join(r['name'] + ': ' + r['status'] for r in json.load(open(sys.argv[1]))['runs']))" "$TABLE/table.json"))"
fi
every "$COPY_SECONDS" collect
bounded reacher_table $(( $(seconds_left) - 20 )) python3 train.py table --tasks "$TASK" --algos pbac --seeds 10 --out "$TABLE" \
  --train.progress False "${TINY[@]}"
stop_every
collect
log "time to score:"; grep -v '^wrote' "$TABLE/printed.txt" 2>/dev/null | tee -a "$OUT/log.txt"
ls -la "$OUT"
