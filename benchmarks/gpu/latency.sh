#!/usr/bin/env bash
# The paper's sequential setting on a GPU: where a training step's time goes (env step, gradient
# steps, the rest), after the fixed-trip solver and the shorter line search against before them
# (`--baseline`), at 1 and 10 seeds, and which XLA settings cut it.
# Every `train.py profile` report is merged into $OUT/profiles.json as soon as it is written (a run
# cut short keeps what it measured); the console output goes to $OUT/log.txt.
#
#   OUT=<dir> COMMIT=<hash> bash benchmarks/gpu/latency.sh   # on a GPU machine
#   DRY_RUN=1 bash benchmarks/gpu/latency.sh                 # on a CPU: the same commands at tiny sizes
set -uo pipefail
cd "$(dirname "$0")/../.."
source benchmarks/gpu/setup.sh
export XLA_PYTHON_CLIENT_PREALLOCATE=false
PROF=$(mktemp -d)
SEEDS=10
TINY=()
if [ "${DRY_RUN:-0}" = 1 ]; then
  SEEDS=2
  TINY=(--train.batch-size 16 --train.buffer-size 400 --train.warmup-steps 20 --train.chunk-steps 20
        --pbac.num-critics 2 --pbac.hidden-sizes 8 8 --measure-steps 20 --timed-chunks 1)
fi
# p TAG SECONDS XLA_FLAGS -- profile options
p() {
  local tag=$1 seconds=$2 flags=$3; shift 4
  dry_once "$flags $*" "$tag" "$PROF/$tag.json" \
    || XLA_FLAGS="$flags" bounded "$tag" "$seconds" python3 train.py profile --out "$PROF/$tag.json" --measure-steps 100 --timed-chunks 3 "$@" "${TINY[@]}"
  merge_json "$PROF" "$OUT/profiles.json"
}
CB="--xla_gpu_enable_command_buffer=+WHILE,+CONDITIONAL"
[ "${DRY_RUN:-0}" = 1 ] && CB=""  # a GPU flag: the CPU's XLA refuses it
# In a dry run the chain probe stands in (`dry ... light`), except on the lines with a --baseline of
# solver options, which need physics (cartpole); nothing evaluates, so no episode is shortened.
REACHER=$(dry reacher_hard light) CARTPOLE=$(dry cartpole_swingup_sparse light) ANT=$(dry ant_delayed light)
# 1. The target task (reacher_hard, 10 seeds): after vs before (MJX's while-loop solve, 8
#    line-search iterations) in one process, one seed and ten.
p reacher_1 150 "" -- --profile "$(dry reacher_hard)" --evaluate False --baseline solver_loop=while ls_iterations=8
p reacher_10 120 "" -- --profile "$REACHER" --seeds "$SEEDS" --evaluate False
# 2. GPU settings, measured on the 10-seed program: CUDA-graph loops, TF32 matmuls.
p reacher_10_cmdbuf 90 "$CB" -- --profile "$REACHER" --seeds "$SEEDS" --evaluate False --phases False
p reacher_10_tf32 60 "" -- --profile "$REACHER" --seeds "$SEEDS" --evaluate False --phases False --train.matmul-precision tensorfloat32
# 3. The other paper-setting rows.
p cartpole_10 90 "" -- --profile "$CARTPOLE" --seeds "$SEEDS" --evaluate False
p ant_delayed_1 150 "" -- --profile "$(dry ant_delayed)" --evaluate False --baseline solver_loop=while ls_iterations=8
p ant_delayed_10 120 "" -- --profile "$ANT" --seeds "$SEEDS" --evaluate False --phases False
ls -la "$OUT"
