#!/usr/bin/env bash
# Training-loop throughput on a lent GPU machine (run from the repo root there, carrying .whl/;
# see benchmarks/gpu_env.sh and the README). Each `train.py profile` call is bounded by `timeout`
# so that a slow compile cannot eat the whole lease; every report is written as it is measured.
set -o pipefail
source "$(dirname "$0")/gpu_setup.sh"
# evaluation is the same program in every Ant profile below: compile it once
export JAX_COMPILATION_CACHE_DIR=/tmp/jax_cache JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0
p() { local tag=$1; shift; timeout "${LIMIT:-150}" python3 train.py profile --out "$OUT/profile_$tag.json" "$@" 2>&1 | grep -vi warp | tee -a "$OUT/log.txt"; }
# The paper's setting: one env, 5 updates of batch 256 per env step, K = 10, width 256.
p ant_delayed_paper --profile ant_delayed --timed-chunks 3 --measure-steps 100
# Many envs per seed (SPEC 2.6): more data per update, bigger batches.
p ant_delayed_n4096 --profile ant_delayed --train.num-envs 4096 --train.batch-size 4096 --train.updates-per-step 4 --timed-chunks 3 --measure-steps 81920
p ant_delayed_n256 --profile ant_delayed --train.num-envs 256 --train.updates-per-step 5 --timed-chunks 3 --measure-steps 5120
