#!/usr/bin/env bash
# Env throughput (`train.py bench-env`): MJX Ant, Humanoid and Hopper from 1 to 16,384 instances
# beside Gymnasium's C MuJoCo, and Ant with the Euler integrator. One JSON report per env in $OUT.
#
#   OUT=<dir> COMMIT=<hash> bash benchmarks/gpu/env.sh   # on a GPU machine
#   DRY_RUN=1 bash benchmarks/gpu/env.sh                 # on a CPU: the same commands at tiny sizes (Hopper)
set -uo pipefail
cd "$(dirname "$0")/../.."
source benchmarks/gpu/setup.sh
TINY=()
[ "${DRY_RUN:-0}" = 1 ] && TINY=(--num-envs 2 --steps-per-call 5 --repeats 1 --gymnasium-steps 20)
e() {
  local tag=$1 env=$2; shift 2
  [ "${DRY_RUN:-0}" = 1 ] && env=hopper
  local line=(bench-env --env "$env" --out "$OUT/bench_$tag.json" "$@" "${TINY[@]}")
  dry_once "$(dry_key "env_$tag" "${line[@]}")" "env_$tag" "$OUT/bench_$tag.json" || bounded "env_$tag" 150 python3 train.py "${line[@]}"
}
e ant ant --num-envs 1 256 1024 4096 16384 --steps-per-call 50 --gymnasium-steps 2000
e humanoid humanoid --num-envs 256 2048 8192 --steps-per-call 50 --gymnasium-steps 1000
e hopper hopper --num-envs 4096 --steps-per-call 50 --gymnasium-steps 2000
e ant_euler ant --num-envs 4096 --steps-per-call 50 --gymnasium-steps 0 --set integrator=euler
ls -la "$OUT"
