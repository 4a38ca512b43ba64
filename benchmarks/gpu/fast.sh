#!/usr/bin/env bash
# PBAC on the MuJoCo tasks for wall-clock: the `<task>_fast` profiles (each a CPU recipe per seed,
# docs/recipes.md), SEEDS seeds in one program per task, return against wall-clock and the time to
# the paper's score (docs/performance.md "Fast training").
#
# On a GPU machine:
#   OUT=<dir> COMMIT=<hash> bash benchmarks/gpu/fast.sh
# On a CPU, the same commands at tiny sizes (tests/test_gpu_scripts.py runs it):
#   DRY_RUN=1 bash benchmarks/gpu/fast.sh
#
# Tasks run one after another in TASKS' order (delayed Ant, Hopper, Humanoid first, then dense
# Hopper) while time is left: the first gets FIRST_SECONDS, each later one TASK_SECONDS,
# none starts with under MIN_SECONDS left (a program compiles for about a minute), and the
# script ends by its LIMIT (setup.sh). Either budget may be `all`: everything left of the LIMIT,
# less RESERVE_SECONDS for the last report. When TASKS names one task, FIRST_SECONDS defaults to
# `all`, so the script spends its whole LIMIT on that task (a 10-minute target needs it):
#   TASKS=ant_delayed ALONE=1 SCORES="ant_delayed=3000" COMMIT=<hash> LIMIT=560 bash benchmarks/gpu/fast.sh   # time to the CPU recipe's level
# A task cut short by its time keeps the evaluations it made (`bounded`'s `timeout --foreground`
# sends one SIGTERM: the run checkpoints after its chunk and exits). Written to $OUT as it goes (a
# few files, quick to copy back): log.txt, device.txt, results.md and time_to_score.json
# (`train.py report --x steps wall`, rewritten after every task and every COPY_SECONDS during
# one), and fast_runs.tgz (each run's config.json, eval.jsonl, metrics.jsonl, visits.jsonl,
# summary.json and the whole report with its figures; no checkpoints). The runs themselves stay
# in $WORK on the machine.
set -uo pipefail
cd "$(dirname "$0")/../.."
source benchmarks/gpu/setup.sh

# ant_delayed_fast trains ant and ant_very_delayed as members of its program, hopper_delayed_fast
# hopper_very_delayed and humanoid_delayed_fast humanoid (docs/recipes.md), so those tasks have no
# program of their own here; ALONE=1 trains each task of TASKS alone (`--train.tasks` empty), for
# the time to score of one task alone.
TASKS=${TASKS:-"ant_delayed hopper_delayed humanoid_delayed hopper"}
ALONE_ARGS=()
[ "${ALONE:-0}" = 1 ] && ALONE_ARGS=(--train.tasks)
SEEDS=${SEEDS:-10}
TASK_SECONDS=${TASK_SECONDS:-150}
MIN_SECONDS=${MIN_SECONDS:-100}
RESERVE_SECONDS=${RESERVE_SECONDS:-20}
COPY_SECONDS=${COPY_SECONDS:-30}
# The time-to-score table's scores, `train.py report --score`'s form (e.g. "ant_delayed=3000
# hopper_delayed=775": a CPU recipe's level); empty: the paper's PBAC final on each task.
read -r -a SCORE_ARGS <<< "${SCORES:-}"
# The runs (checkpoints included) and the report; only a bundle goes to $OUT. A fresh folder each
# time: a machine may still hold an earlier run's /tmp (docs/evidence/h200-20261129b.md).
WORK=${WORK:-$(mktemp -d /tmp/fast.XXXXXX)}
EXTRA=()
if [ "${DRY_RUN:-0}" = 1 ]; then
  # The same commands at tiny sizes: 2 seeds of 2 envs, 2 critics of width 8, three short chunks,
  # on DM Control cartpole (the cheapest MJX program to compile) unless DRY_TASKS names others.
  TASKS=${DRY_TASKS:-cartpole_swingup_sparse}
  SEEDS=2 TASK_SECONDS=300 MIN_SECONDS=1 COPY_SECONDS=60
  WORK=$(mktemp -d)
  EXTRA=("${DRY_TINY[@]}")
fi
read -r -a task_list <<< "$TASKS"
if (( ${#task_list[@]} == 1 )); then FIRST_SECONDS=${FIRST_SECONDS:-all}; else FIRST_SECONDS=${FIRST_SECONDS:-270}; fi
RUNS=$WORK/runs REPORT=$WORK/report
mkdir -p "$RUNS" "$REPORT"
log() { echo "$@" | tee -a "$OUT/log.txt"; }

collect() {  # the report and the bundle, from what the runs wrote so far
  local dirs=()
  for dir in "$RUNS"/*/; do [ -s "$dir/eval.jsonl" ] && dirs+=("${dir%/}"); done
  [ ${#dirs[@]} -gt 0 ] || return 0
  python3 train.py report "${dirs[@]}" --out "$REPORT" --x steps wall ${SCORE_ARGS[@]+--score "${SCORE_ARGS[@]}"} > "$WORK/printed.txt" 2>&1 \
    || { log "report failed:"; tail -3 "$WORK/printed.txt" | tee -a "$OUT/log.txt"; }
  cp "$REPORT/results.md" "$REPORT/time_to_score.json" "$OUT/" 2>/dev/null
  tar -czf "$OUT/fast_runs.tgz.tmp" -C "$WORK" --exclude=checkpoints --exclude=tb --exclude=.lock runs report \
    && mv "$OUT/fast_runs.tgz.tmp" "$OUT/fast_runs.tgz"
}

first=1
for task in "${task_list[@]}"; do
  left=$(seconds_left)
  if (( first )); then asked=$FIRST_SECONDS; else asked=$TASK_SECONDS; fi
  if [ "$asked" = all ]; then budget=$(( left - RESERVE_SECONDS )); else budget=$asked; fi
  (( budget > left - RESERVE_SECONDS )) && budget=$(( left - RESERVE_SECONDS ))
  if (( budget < MIN_SECONDS )); then
    log "$task: skipped, ${left} s left (needs ${MIN_SECONDS})"
    continue
  fi
  first=0
  log "== $task: ${task}_fast, $SEEDS seeds, up to ${budget} s$( [ "$asked" = all ] && echo ', all the run has left') ($(date -u +%H:%M:%S))"
  every "$COPY_SECONDS" collect
  bounded "$task" "$budget" python3 train.py --profile "${task}_fast" --seeds "$SEEDS" --train.run-dir "$RUNS/$task" \
    --train.progress False --train.tensorboard False "${ALONE_ARGS[@]}" "${EXTRA[@]}"
  status=$?
  stop_every
  log "$task: $( [ "$status" = 124 ] && echo 'cut at its time' || echo "its own end (exit $status)")"
  collect
done
collect
log "time to score:"; grep -v '^wrote' "$WORK/printed.txt" 2>/dev/null | tee -a "$OUT/log.txt"
ls -la "$OUT"
