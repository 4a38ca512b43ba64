#!/usr/bin/env bash
# The paper's sequential setting on a lent GPU (issue: a Table 1 row in ten GPU-minutes): where a
# training step's time goes (env step, gradient steps, the rest), before and after the fixed-trip
# solver and the shorter line search, at 1 and 10 seeds, and which XLA settings cut it. One device
# call, about 9 minutes: run from the repo root with `.whl` carried (benchmarks/gpu_setup.sh) and
# timeout_s=600. Every `train.py profile` report is merged into $OUT/profiles.json as soon as it is
# written (a run cut short keeps what it measured); the console output goes to $OUT/log.txt.
set -o pipefail
source "$(dirname "$0")/gpu_setup.sh"
export XLA_PYTHON_CLIENT_PREALLOCATE=false
export JAX_COMPILATION_CACHE_DIR=/tmp/jax_cache JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0
mkdir -p /tmp/prof
START=$(date +%s)
merge() { python3 -c "import json,glob,os; json.dump({os.path.basename(p)[:-5]: json.load(open(p)) for p in sorted(glob.glob('/tmp/prof/*.json'))}, open('$OUT/profiles.json','w'), indent=1)"; }
# p TAG LIMIT_S [XLA_FLAGS] -- profile options
p() {
  local tag=$1 limit=$2 flags=$3; shift 4
  [ $(( $(date +%s) - START )) -gt 540 ] && { echo "skipped $tag (time)" | tee -a "$OUT/log.txt"; return; }
  XLA_FLAGS="$flags" timeout "$limit" python3 train.py profile --out "/tmp/prof/$tag.json" --measure-steps 100 --timed-chunks 3 "$@" 2>&1 \
    | grep -vi warp | tee -a "$OUT/log.txt"
  merge
}
CB="--xla_gpu_enable_command_buffer=+WHILE,+CONDITIONAL"
# 1. The target task (reacher_hard, 100k steps, 10 seeds): after vs before (MJX's while-loop solve,
#    8 line-search iterations) in one process, one seed and ten.
p reacher_1 150 "" -- --profile reacher_hard --evaluate False --baseline solver_loop=while ls_iterations=8
p reacher_10 120 "" -- --profile reacher_hard --seeds 10 --evaluate False
# 2. GPU settings, measured on the 10-seed program: CUDA-graph loops, TF32 matmuls.
p reacher_10_cmdbuf 90 "$CB" -- --profile reacher_hard --seeds 10 --evaluate False --phases False
p reacher_10_tf32 60 "" -- --profile reacher_hard --seeds 10 --evaluate False --phases False --train.matmul-precision tensorfloat32
# 3. The other two paper-setting rows of the issue.
p cartpole_10 90 "" -- --profile cartpole_swingup_sparse --seeds 10 --evaluate False
p ant_delayed_1 150 "" -- --profile ant_delayed --evaluate False --baseline solver_loop=while ls_iterations=8
p ant_delayed_10 120 "" -- --profile ant_delayed --seeds 10 --evaluate False --phases False
echo "done in $(( $(date +%s) - START )) s" | tee -a "$OUT/log.txt"
