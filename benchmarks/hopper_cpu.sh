#!/usr/bin/env bash
# The CPU evidence of docs/fast_training.md "Delayed locomotion": on hopper_delayed (and dense
# hopper), PBAC's `<task>_fast_cpu` recipe with 5 seeds in one program, the same recipe with each
# recipe option it uses turned off, and SAC at the same sizes, each run alone on the machine
# (wall-clock is what is measured), then the report: return against env steps and wall-clock, and
# the time to 90 % and 100 % of the paper's PBAC final IQM.
#
#   bash benchmarks/hopper_cpu.sh                                   # every variant on both tasks (~6 h on 2 cores)
#   TASKS=hopper_delayed VARIANTS="pbac sac" bash benchmarks/hopper_cpu.sh
#
# Variants: pbac (the profile), pbac_raw_obs (observation normalisation off), sac (`--algo sac`,
# the profile's [sac] section: same envs, batch, updates, width, rates and normalisation).
# Runs go to $RUNS (default runs/hopper_cpu/<variant>_<task>); a run that exists is resumed
# (finished ones are left as they are), so the script can be stopped and started again. Their
# logs (config, evaluations, summary) are copied to $LOGS (default docs/fast/hopper_runs) and the
# report made from those goes to $REPORT (default docs/fast/hopper_report).
set -euo pipefail
cd "$(dirname "$0")/.."
TASKS=${TASKS:-"hopper_delayed hopper"}
VARIANTS=${VARIANTS:-"pbac pbac_raw_obs sac"}
SEEDS=${SEEDS:-5}
RUNS=${RUNS:-runs/hopper_cpu}
LOGS=${LOGS:-docs/fast/hopper_runs}
REPORT=${REPORT:-docs/fast/hopper_report}
options() {  # VARIANT: its train.py options beyond the profile
  case $1 in
    pbac) echo "" ;;
    pbac_raw_obs) echo "--train.normalize-observations False" ;;
    sac) echo "--algo sac" ;;
    *) echo "unknown variant $1 (pbac, pbac_raw_obs, sac)" >&2; exit 2 ;;
  esac
}
for task in $TASKS; do
  for variant in $VARIANTS; do
    extra=$(options "$variant")
    dir=$RUNS/${variant}_$task
    if [ -f "$dir/summary.json" ] && grep -q '"status": "finished"' "$dir/summary.json"; then
      echo "$dir: finished"
    elif [ -f "$dir/config.json" ]; then
      python train.py --resume "$dir"
    else
      # shellcheck disable=SC2086  # the variant's options are words
      python train.py --profile "${task}_fast_cpu" --seeds "$SEEDS" $extra --train.run-dir "$dir"
    fi
  done
done
# The runs' logs without checkpoints (what the committed report is made from), then the report.
for dir in "$RUNS"/*/; do
  mkdir -p "$LOGS/$(basename "$dir")"
  cp "$dir"/config.json "$dir"/eval.jsonl "$dir"/summary.json "$LOGS/$(basename "$dir")/"
done
python train.py report "$LOGS"/*/ --by-run True --out "$REPORT" --x steps wall --score-fraction 0.9 1.0
