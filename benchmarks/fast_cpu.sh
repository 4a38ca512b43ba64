#!/usr/bin/env bash
# The CPU evidence of the wall-clock recipes (docs/recipes.md; docs/evidence/dmc-cpu-recipe.md,
# docs/evidence/hopper-delayed.md): on each task, PBAC's `<task>_fast_cpu` recipe with 5
# seeds in one program, then the other variants at the same sizes (the baselines: `--algo NAME`,
# the profile's [NAME] section: same envs, batch, updates per vector step, width, K, learning
# rates), each run alone on the CPU (wall-clock is what is measured), then the report: return
# against env steps and wall-clock, and the time to 90 % and 100 % of the paper's PBAC final IQM.
# The paper's comparison at the CPU recipes, every algorithm on every recipe task, is one
# `train.py table` command instead (docs/evidence/baselines-cpu.md).
#
#   bash benchmarks/fast_cpu.sh                      # the DM Control tasks, PBAC then SAC (~1 h 45 min on 2 cores)
#   TASKS=reacher_hard VARIANTS=pbac bash benchmarks/fast_cpu.sh
#   TASKS="hopper_delayed hopper" VARIANTS="pbac pbac_raw_obs sac" LOGS=docs/evidence/data/hopper-delayed/runs \
#     REPORT=docs/evidence/data/hopper-delayed/report bash benchmarks/fast_cpu.sh   # docs/evidence/hopper-delayed.md
#   TASKS=hopper_delayed VARIANTS="pbac_ln_plain pbac_ln_none" ... # its LayerNorm ablations, the same way
#
# Variants: pbac (the profile), sac, bootdqn_p, drnd, ben (`--algo NAME`), and ablations of a recipe's options, each PBAC
# with one option set against the Hopper recipes: pbac_raw_obs (observation normalisation off),
# pbac_ln_plain (the paper's LayerNorm without scale and bias), pbac_ln_none (no LayerNorm).
# Runs go to $RUNS (default runs/fast_cpu/<variant>_<task>); a run that exists is resumed
# (finished ones are left as they are), so the script can be stopped and started again. Their
# logs (config, evaluations, summary) are copied to $LOGS (default docs/evidence/data/dmc-cpu-recipe/runs) and the
# report made from those goes to $REPORT (default docs/evidence/data/dmc-cpu-recipe/report), one method per run
# directory (`--by-run True`) when a variant other than an algorithm ran.
set -euo pipefail
cd "$(dirname "$0")/.."
TASKS=${TASKS:-"cartpole_swingup_sparse ball_in_cup_catch reacher_hard"}
VARIANTS=${VARIANTS:-${ALGOS:-"pbac sac"}}  # ALGOS: another name for them, still read
SEEDS=${SEEDS:-5}
RUNS=${RUNS:-runs/fast_cpu}
LOGS=${LOGS:-docs/evidence/data/dmc-cpu-recipe/runs}
REPORT=${REPORT:-docs/evidence/data/dmc-cpu-recipe/report}
BY_RUN=False
options() {  # VARIANT: its train.py options beyond the profile
  case $1 in
    pbac) echo "--algo pbac" ;;
    sac) echo "--algo sac" ;;
    bootdqn_p) echo "--algo bootdqn_p" ;;
    drnd) echo "--algo drnd" ;;
    ben) echo "--algo ben" ;;
    pbac_raw_obs) echo "--algo pbac --train.normalize-observations False" ;;
    pbac_ln_plain) echo "--algo pbac --pbac.layer-norm plain" ;;
    pbac_ln_none) echo "--algo pbac --pbac.layer-norm none" ;;
    *) echo "unknown variant $1 (pbac, sac, bootdqn_p, drnd, ben, pbac_raw_obs, pbac_ln_plain, pbac_ln_none)" >&2; exit 2 ;;
  esac
}
for variant in $VARIANTS; do  # a misspelt variant stops the script here, before anything trains
  options "$variant" >/dev/null
done
for task in $TASKS; do
  for variant in $VARIANTS; do
    case $variant in pbac | sac | bootdqn_p | drnd | ben) ;; *) BY_RUN=True ;; esac  # two runs of PBAC on one task: a method per run
    extra=$(options "$variant")
    dir=$RUNS/${variant}_$task
    if [ -f "$dir/summary.json" ] && grep -q '"status": "finished"' "$dir/summary.json"; then
      echo "$dir: finished"
    elif [ -f "$dir/config.json" ]; then
      python train.py --resume "$dir"
    else
      # shellcheck disable=SC2086  # the variant's options are words
      python train.py --profile "${task}_fast_cpu" $extra --seeds "$SEEDS" --train.run-dir "$dir"
    fi
  done
done
# The runs' logs without checkpoints (what the committed report is made from; the evaluations
# gzip-compressed, which the report reads as they are), then the report.
for dir in "$RUNS"/*/; do
  mkdir -p "$LOGS/$(basename "$dir")"
  cp "$dir"/config.json "$dir"/summary.json "$LOGS/$(basename "$dir")/"
  rm -f "$LOGS/$(basename "$dir")/eval.jsonl"
  gzip -9 -n -c "$dir"/eval.jsonl > "$LOGS/$(basename "$dir")/eval.jsonl.gz"
done
python train.py report "$LOGS"/*/ --by-run "$BY_RUN" --out "$REPORT" --x steps wall --score-fraction 0.9 1.0
