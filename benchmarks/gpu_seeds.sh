#!/usr/bin/env bash
# Seeds as a vmapped axis vs sequential runs on a lent GPU machine (repo root there, carrying .whl/).
set -o pipefail
source "$(dirname "$0")/gpu_setup.sh"
# The paper's setting (1 env per seed, 5 updates of batch 256 per step, K = 10, width 256).
timeout "${LIMIT:-280}" python3 train.py bench-seeds --profile ant_delayed --seed-counts ${COUNTS:-1 2 4 10} \
  --measure-steps 20 --timed-chunks 3 --out "$OUT/bench_seeds_ant_delayed.json" 2>&1 | grep -vi warp | tee -a "$OUT/log.txt"
