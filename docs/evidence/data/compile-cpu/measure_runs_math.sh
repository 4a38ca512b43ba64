#!/usr/bin/env bash
# Short cold-cache runs of the two `_fast` settings of measure_runs.sh: d010188 (before the compile
# work), the checkout with MJX's own quaternion math (math=mjx) and with the compact math of
# envs/mjx_math.py (math=auto, compact on a CPU) (docs/evidence/compile-cpu.md, "The compact
# math"). BEFORE is a worktree of d010188 (`git worktree add /tmp/before d010188`); run from any
# directory, with the project's .venv installed. The runs go to /tmp/runs_math; their
# summary.json files are copied beside this script.
set -u
REPO=$(cd "$(dirname "$0")/../../../.." && pwd)
BEFORE=${BEFORE:-/tmp/before}
source "$REPO/.venv/bin/activate"
export MJX_PBAC_JAX_CACHE=""
OUTD=$REPO/docs/evidence/data/compile-cpu/math
R=/tmp/runs_math; rm -rf $R; mkdir -p $R $OUTD
ANT=(--profile ant_delayed_fast --seeds 2 --train.num-envs 16 --train.batch-size 256 --train.chunk-steps 256 --train.warmup-steps 256 --train.total-steps 1024 --train.eval-interval 512 --train.checkpoint-interval 1024 --train.progress False --train.tensorboard False --train.chunk-seconds 0)
REA=(--profile reacher_hard_fast_cpu --seeds 5 --train.total-steps 81920 --train.eval-interval 16384 --train.checkpoint-interval 81920 --train.progress False --train.tensorboard False --train.chunk-seconds 0)
cd "$BEFORE" && python train.py "${ANT[@]}" --train.run-dir $R/ant_before 2>&1 | grep -v -i warp | tail -1
cd "$REPO" && python train.py "${ANT[@]}" --train.eval-batch 3 --train.env-overrides math=mjx --train.run-dir $R/ant_mjx 2>&1 | grep -v -i warp | tail -1
cd "$REPO" && python train.py "${ANT[@]}" --train.eval-batch 3 --train.run-dir $R/ant_compact 2>&1 | grep -v -i warp | tail -1
cd "$BEFORE" && python train.py "${REA[@]}" --train.run-dir $R/rea_before 2>&1 | grep -v -i warp | tail -1
cd "$REPO" && python train.py "${REA[@]}" --train.eval-batch 6 --train.env-overrides math=mjx --train.run-dir $R/rea_mjx 2>&1 | grep -v -i warp | tail -1
cd "$REPO" && python train.py "${REA[@]}" --train.eval-batch 6 --train.run-dir $R/rea_compact 2>&1 | grep -v -i warp | tail -1
for d in $R/*/; do
  name=$(basename $d); cp $d/summary.json $OUTD/$name.summary.json
  python3 -c "
import json; s=json.load(open('$d/summary.json')); print('$name', {k: round(s.get(k) or 0, 1) for k in ('elapsed_s', 'train_s', 'compile_s', 'eval_s')}, s.get('compiles'))"
done
