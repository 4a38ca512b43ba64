#!/bin/bash
# Tuning round 2: the round-1 winner's sizes on the other two DM Control tasks, with the learning
# rates as traced sweep members of one program (reacher) and 3 seeds (ball-in-cup).
cd /work/main; . .venv/bin/activate
while pgrep -f round1.sh > /dev/null; do sleep 20; done
common="--seeds 2 --train.progress False --train.eval-interval 40000 --train.checkpoint-interval 400000 --train.chunk-steps 8000 --train.warmup-steps 8000 --train.buffer-size 1000000 --train.eval-episodes 5 --pbac.num-critics 5 --pbac.hidden-sizes 64 64 --pbac.alpha-lr 1e-3"
python train.py --profile reacher_hard $common --train.num-envs 32 --train.updates-per-step 4 --train.batch-size 256 --train.total-steps 320000 \
  --sweep critic_lr=3e-4,1e-3 --sweep actor_lr=3e-4,1e-3 --train.run-dir runs/tune/r2_reacher_lr > runs/tune/r2_reacher_lr.log 2>&1; echo "reacher done rc=$?"
python train.py --profile ball_in_cup_catch $common --seeds 3 --train.num-envs 32 --train.updates-per-step 4 --train.batch-size 256 --train.total-steps 400000 \
  --pbac.critic-lr 1e-3 --pbac.actor-lr 1e-3 --train.run-dir runs/tune/r2_ball > runs/tune/r2_ball.log 2>&1; echo "ball done rc=$?"
