#!/usr/bin/env bash
# Meta-World on the GPU: env steps/s and compile time of every
# mw_* task at 1,024 and 4,096 instances (`train.py bench-env`), with our model settings (body-tree
# barriers on, pyramidal cones) and each undone: barriers off, elliptic cones (Meta-World's files).
# One JSON report per task and setting, merged into $OUT/metaworld.json as it goes (keys TASK_SETTING).
#
#   OUT=<dir> COMMIT=<hash> bash benchmarks/gpu/metaworld.sh   # on a GPU machine
#   DRY_RUN=1 bash benchmarks/gpu/metaworld.sh                 # on a CPU: one task, 2 instances, two settings
set -uo pipefail
cd "$(dirname "$0")/../.."
source benchmarks/gpu/setup.sh
TASKS=${TASKS:-"mw_window_close mw_window_open mw_button_press_topdown mw_drawer_close mw_drawer_open mw_reach mw_door_open"}
SETTINGS=("ours:" "no_barriers:body_tree_barriers=False" "elliptic:cone=elliptic")
SIZES=(--num-envs 1024 4096 --steps-per-call 50 --repeats 3)
if [ "${DRY_RUN:-0}" = 1 ]; then
  TASKS=${DRY_TASKS:-mw_reach}
  SETTINGS=("ours:" "no_barriers:body_tree_barriers=False")  # elliptic cones: ~1 s per step on a CPU
  SIZES=(--num-envs 2 --steps-per-call 2 --repeats 1)
fi
PARTS=$(mktemp -d)
for setting in "${SETTINGS[@]}"; do
  name=${setting%%:*} overrides=${setting#*:}
  for task in $TASKS; do
    bounded "${task}_$name" 120 python3 train.py bench-env --env "$task" "${SIZES[@]}" --gymnasium-steps 0 \
      --out "$PARTS/${task}_$name.json" ${overrides:+--set $overrides}
    merge_json "$PARTS" "$OUT/metaworld.json"
  done
done
ls -la "$OUT"
