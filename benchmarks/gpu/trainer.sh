#!/usr/bin/env bash
# Training-loop throughput (`train.py profile`): the paper's one-env Ant setting and two many-env
# settings (docs/evidence/data/throughput/h200_ant_delayed_*.json were made by an earlier version of it).
#
#   OUT=<dir> COMMIT=<hash> bash benchmarks/gpu/trainer.sh   # on a GPU machine
#   DRY_RUN=1 bash benchmarks/gpu/trainer.sh                 # on a CPU: the same commands at tiny sizes
#
# Each report goes to $OUT/profile_<tag>.json as soon as it is measured; each command is bounded
# (setup.sh `bounded`) so that a slow compile cannot take the script's whole LIMIT.
set -uo pipefail
cd "$(dirname "$0")/../.."
source benchmarks/gpu/setup.sh
TINY=()
if [ "${DRY_RUN:-0}" = 1 ]; then
  TINY=(--train.num-envs 2 --train.batch-size 16 --train.updates-per-step 1 --train.buffer-size 400 --train.warmup-steps 20
        --train.chunk-steps 20 --pbac.num-critics 2 --pbac.hidden-sizes 8 8
        --measure-steps 20 --timed-chunks 1)
fi
ANT=$(dry ant_delayed light)  # the chain probe in a dry run: throughput lines, no physics option
p() {
  local tag=$1 seconds=$2; shift 2
  local line=(profile --out "$OUT/profile_$tag.json" "$@" "${TINY[@]}")
  dry_once "$(dry_key "$tag" "${line[@]}")" "$tag" "$OUT/profile_$tag.json" || bounded "$tag" "$seconds" python3 train.py "${line[@]}"
}
# The paper's setting: one env, 5 updates of batch 256 per env step, K = 10, width 256.
p ant_delayed_paper 150 --profile "$ANT" --timed-chunks 3 --measure-steps 100
# Many envs per seed: more data per update, bigger batches.
p ant_delayed_n4096 150 --profile "$ANT" --train.num-envs 4096 --train.batch-size 4096 --train.updates-per-step 4 --timed-chunks 3 --measure-steps 81920
p ant_delayed_n256 150 --profile "$ANT" --train.num-envs 256 --train.updates-per-step 5 --timed-chunks 3 --measure-steps 5120
ls -la "$OUT"
