#!/bin/bash
# Tuning round 1 on cartpole swing-up sparse: shape knobs as separate programs, 3 seeds each,
# ~20 min each on the 2-core CPU. K = 5, width 64, lr 1e-3, PSR 10 (the paper's), kappa 0.05.
cd /work/main; . .venv/bin/activate
common="--profile cartpole_quickstart --seeds 3 --train.progress False --train.eval-interval 40000 --train.checkpoint-interval 400000 --train.chunk-steps 8000 --train.warmup-steps 8000 --train.buffer-size 1000000"
run() { name=$1; shift; python train.py $common --train.run-dir runs/tune/r1_$name "$@" > runs/tune/r1_$name.log 2>&1; echo "$name done rc=$?"; }
run n16_u4_b128 --train.num-envs 16 --train.updates-per-step 4 --train.batch-size 128 --train.total-steps 720000
run n32_u4_b256 --train.num-envs 32 --train.updates-per-step 4 --train.batch-size 256 --train.total-steps 800000
run n16_u8_b128 --train.num-envs 16 --train.updates-per-step 8 --train.batch-size 128 --train.total-steps 400000
run n64_u4_b128 --train.num-envs 64 --train.updates-per-step 4 --train.batch-size 128 --train.total-steps 2400000
