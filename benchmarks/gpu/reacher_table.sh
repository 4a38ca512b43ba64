#!/usr/bin/env bash
# The 10-seed paper-budget reacher_hard PBAC run (100,000 env steps, one env per seed, 5 updates
# per step, K = 10, width 256) through `train.py table`, so the result comes with the paper's
# statistics beside 912 [861, 966] / 753 [657, 806] (../shared/gpu/QUEUE.md item 2). The run stays
# on the machine (its checkpoints hold the replay buffers); what comes back, as it goes: log.txt,
# device.txt, and after the run table.json, results.md, eval.jsonl, metrics.jsonl, summary.json.
# If it cannot finish in the device call, how far it got (eval.jsonl, metrics.jsonl: env steps/s).
#
#   COMMIT=<hash> bash benchmarks/gpu/reacher_table.sh   # on a lent GPU, one device call (carry .whl)
#   DRY_RUN=1 bash benchmarks/gpu/reacher_table.sh       # here: the same commands at tiny sizes
set -uo pipefail
cd "$(dirname "$0")/../.."
source benchmarks/gpu/setup.sh
TABLE=${TABLE:-/tmp/reacher_table}
TINY=()
if [ "${DRY_RUN:-0}" = 1 ]; then
  TABLE=$(mktemp -d)/table
  TINY=(--seeds 2 --train.total-steps 60 --train.warmup-steps 20 --train.chunk-steps 20 --train.eval-interval 20
        --train.eval-episodes 2 --train.batch-size 16 --train.buffer-size 400 --train.env-overrides episode_length=20
        --pbac.num-critics 2 --pbac.hidden-sizes 8 8)
fi
TASK=$(dry reacher_hard)
bounded reacher_table $(( $(seconds_left) - 20 )) python3 train.py table --tasks "$TASK" --algos pbac --seeds 10 --out "$TABLE" \
  --train.progress False "${TINY[@]}"
RUN=$TABLE/runs/pbac_$TASK
cp "$TABLE/table.json" "$TABLE/report/results.md" "$OUT/" 2>/dev/null
for f in eval.jsonl metrics.jsonl summary.json; do cp "$RUN/$f" "$OUT/" 2>/dev/null; done
ls -la "$OUT"
