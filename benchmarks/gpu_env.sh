#!/usr/bin/env bash
# Env throughput on a lent GPU machine (run from the repo root there; see the README).
# It has its own CUDA jax; the other wheels travel in .whl/ (pip download ... -d .whl, README).
# Each measurement is bounded by `timeout` so that a slow one cannot eat the whole lease.
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1 OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
run() { local tag=$1; shift; timeout "${LIMIT:-150}" python3 train.py bench-env --out "$OUT/bench_$tag.json" "$@" 2>&1 | grep -vi warp | tee -a "$OUT/log.txt"; }
run ant      --env ant      --num-envs 1 256 1024 4096 16384 --steps-per-call 50 --gymnasium-steps 2000
run humanoid --env humanoid --num-envs 256 2048 8192 --steps-per-call 50 --gymnasium-steps 1000
run hopper   --env hopper   --num-envs 4096 --steps-per-call 50 --gymnasium-steps 2000
run ant_euler --env ant     --num-envs 4096 --steps-per-call 50 --gymnasium-steps 0 --set integrator=euler
