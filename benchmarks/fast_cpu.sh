#!/usr/bin/env bash
# The CPU evidence of docs/performance.md "Fast training": on each DM Control task of the paper's Table 1, PBAC's
# CPU recipe (`<task>_fast_cpu`) with 5 seeds in one program, then SAC at the same sizes, each run
# alone on the machine (wall-clock is what is measured), then the report: return against env steps
# and wall-clock, and the time to 90 % and 100 % of the paper's PBAC final IQM.
#
#   bash benchmarks/fast_cpu.sh                      # all three tasks, both algorithms (~1 h 45 min on 2 cores)
#   TASKS=reacher_hard ALGOS=pbac bash benchmarks/fast_cpu.sh
#
# Runs go to $RUNS (default runs/fast_cpu/<algo>_<task>); a run that exists is resumed (finished
# ones are left as they are), so the script can be stopped and started again. Their logs (config,
# evaluations, summary) are copied to $LOGS (default docs/fast/cpu_runs) and the report made from
# those goes to $REPORT (default docs/fast/cpu_report).
set -euo pipefail
cd "$(dirname "$0")/.."
TASKS=${TASKS:-"cartpole_swingup_sparse ball_in_cup_catch reacher_hard"}
ALGOS=${ALGOS:-"pbac sac"}
SEEDS=${SEEDS:-5}
RUNS=${RUNS:-runs/fast_cpu}
LOGS=${LOGS:-docs/fast/cpu_runs}
REPORT=${REPORT:-docs/fast/cpu_report}
for task in $TASKS; do
  for algo in $ALGOS; do
    dir=$RUNS/${algo}_$task
    if [ -f "$dir/summary.json" ] && grep -q '"status": "finished"' "$dir/summary.json"; then
      echo "$dir: finished"
    elif [ -f "$dir/config.json" ]; then
      python train.py --resume "$dir"
    else
      python train.py --profile "${task}_fast_cpu" --algo "$algo" --seeds "$SEEDS" --train.run-dir "$dir"
    fi
  done
done
# The runs' logs without checkpoints (what the committed report is made from), then the report.
for dir in "$RUNS"/*/; do
  mkdir -p "$LOGS/$(basename "$dir")"
  cp "$dir"/config.json "$dir"/eval.jsonl "$dir"/summary.json "$LOGS/$(basename "$dir")/"
done
python train.py report "$LOGS"/*/ --out "$REPORT" --x steps wall --score-fraction 0.9 1.0
