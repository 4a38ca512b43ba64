#!/usr/bin/env bash
# Seeds as a vmapped axis against sequential runs (`train.py bench-seeds`), at the paper's sizes
# (one env per seed, 5 updates of batch 256 per env step, K = 10, width 256): ant_delayed, then
# reacher_hard. One JSON report per task in $OUT.
#
#   OUT=<dir> COMMIT=<hash> bash benchmarks/gpu/seeds.sh   # on a GPU machine
#   DRY_RUN=1 bash benchmarks/gpu/seeds.sh                 # on a CPU: the same commands at tiny sizes
set -uo pipefail
cd "$(dirname "$0")/../.."
source benchmarks/gpu/setup.sh
COUNTS=(${COUNTS:-1 4 16 64})
TINY=()
if [ "${DRY_RUN:-0}" = 1 ]; then
  COUNTS=(1 2)
  TINY=(--train.num-envs 2 --train.batch-size 16 --train.buffer-size 400 --train.warmup-steps 20 --train.chunk-steps 20
        --pbac.num-critics 2 --pbac.hidden-sizes 8 8 --measure-steps 20 --timed-chunks 1)
fi
for task in ant_delayed reacher_hard; do
  dry_once "$(dry "$task" light)" "seeds_$task" "$OUT/bench_seeds_$task.json" \
    || bounded "seeds_$task" 250 python3 train.py bench-seeds --profile "$(dry "$task" light)" --seed-counts "${COUNTS[@]}" \
      --measure-steps 20 --timed-chunks 3 --out "$OUT/bench_seeds_$task.json" "${TINY[@]}"
done
ls -la "$OUT"
