#!/usr/bin/env bash
# Short cold-cache runs before (d010188) and after (the checkout): the compile seconds a run spends,
# its evaluations (docs/evidence/compile-cpu.md). BEFORE is a worktree of d010188, the commit before
# these changes (`git worktree add /tmp/before d010188`); run from any directory, with the project's
# .venv installed. The runs go to /tmp/runs_measure.
set -u
REPO=$(cd "$(dirname "$0")/../../../.." && pwd)
BEFORE=${BEFORE:-/tmp/before}
source "$REPO/.venv/bin/activate"
export MJX_PBAC_JAX_CACHE=""
R=/tmp/runs_measure; rm -rf $R; mkdir -p $R
ANT=(--profile ant_delayed_fast --seeds 2 --train.num-envs 16 --train.batch-size 256 --train.chunk-steps 256 --train.warmup-steps 256 --train.total-steps 1024 --train.eval-interval 512 --train.checkpoint-interval 1024 --train.progress False --train.tensorboard False --train.chunk-seconds 0)
REA=(--profile reacher_hard_fast_cpu --seeds 5 --train.total-steps 81920 --train.eval-interval 16384 --train.checkpoint-interval 81920 --train.progress False --train.tensorboard False --train.chunk-seconds 0)
cd "$BEFORE" && python train.py "${ANT[@]}" --train.run-dir $R/ant_before 2>&1 | grep -v -i warp | tail -2
cd "$REPO" && python train.py "${ANT[@]}" --train.eval-batch 3 --train.run-dir $R/ant_after 2>&1 | grep -v -i warp | tail -4
cd "$BEFORE" && python train.py "${REA[@]}" --train.run-dir $R/rea_before 2>&1 | grep -v -i warp | tail -2
cd "$REPO" && python train.py "${REA[@]}" --train.eval-batch 6 --train.run-dir $R/rea_after 2>&1 | grep -v -i warp | tail -4
for d in $R/*/; do python3 -c "
import json,sys; s=json.load(open('$d/summary.json')); print('$d', {k: round(s.get(k) or 0,1) for k in ('elapsed_s','train_s','compile_s','eval_s')})"; done
