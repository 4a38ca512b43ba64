#!/usr/bin/env bash
# Env throughput on a lent GPU machine (run from the repo root there; see the README).
# It has its own CUDA jax; the other wheels travel in .whl/ (pip download ... -d .whl, README).
# Each measurement is bounded by `timeout` so that a slow one cannot eat the whole lease.
set -o pipefail
source "$(dirname "$0")/gpu_setup.sh"
run() { local tag=$1; shift; timeout "${LIMIT:-150}" python3 train.py bench-env --out "$OUT/bench_$tag.json" "$@" 2>&1 | grep -vi warp | tee -a "$OUT/log.txt"; }
run ant      --env ant      --num-envs 1 256 1024 4096 16384 --steps-per-call 50 --gymnasium-steps 2000
run humanoid --env humanoid --num-envs 256 2048 8192 --steps-per-call 50 --gymnasium-steps 1000
run hopper   --env hopper   --num-envs 4096 --steps-per-call 50 --gymnasium-steps 2000
run ant_euler --env ant     --num-envs 4096 --steps-per-call 50 --gymnasium-steps 0 --set integrator=euler
