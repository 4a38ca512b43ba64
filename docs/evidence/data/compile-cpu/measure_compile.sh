#!/usr/bin/env bash
# Compile seconds per program before (d010188: unrolled updates, programs in turn) and after (the
# checkout: updates under a loop; in turn and together), ant_delayed_fast at reduced sizes and
# reacher_hard_fast_cpu (docs/evidence/compile-cpu.md). BEFORE is a worktree of d010188, the commit
# before these changes (`git worktree add /tmp/before d010188`); run from any directory, with the
# project's .venv installed. Writes the JSON reports beside this script.
set -u
REPO=$(cd "$(dirname "$0")/../../../.." && pwd)
BEFORE=${BEFORE:-/tmp/before}
source "$REPO/.venv/bin/activate"
export MJX_PBAC_JAX_CACHE=""
OUTD=$REPO/docs/evidence/data/compile-cpu
mkdir -p $OUTD
ANT=(--profile ant_delayed_fast --seeds 2 --train.num-envs 16 --train.batch-size 256 --measure-steps 64 --timed-chunks 1)
REA=(--profile reacher_hard_fast_cpu --seeds 5 --timed-chunks 1)
cd "$BEFORE" && python train.py profile "${ANT[@]}" --out $OUTD/ant_delayed_fast_before.json 2>&1 | grep -v -i warp | tail -3
cd "$REPO" && python train.py profile "${ANT[@]}" --compile-threads 1 --out $OUTD/ant_delayed_fast_after.json 2>&1 | grep -v -i warp | tail -4
cd "$REPO" && python train.py profile "${ANT[@]}" --compile-threads 0 --train.eval-batch 4 --out $OUTD/ant_delayed_fast_after_together.json 2>&1 | grep -v -i warp | tail -4
cd "$BEFORE" && python train.py profile "${REA[@]}" --out $OUTD/reacher_hard_fast_cpu_before.json 2>&1 | grep -v -i warp | tail -3
cd "$REPO" && python train.py profile "${REA[@]}" --compile-threads 1 --out $OUTD/reacher_hard_fast_cpu_after.json 2>&1 | grep -v -i warp | tail -4
cd "$REPO" && python train.py profile "${REA[@]}" --compile-threads 0 --train.eval-batch 5 --out $OUTD/reacher_hard_fast_cpu_after_together.json 2>&1 | grep -v -i warp | tail -4
