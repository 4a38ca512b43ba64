#!/usr/bin/env bash
# The issue's target run on a lent GPU: PBAC on reacher_hard at the paper's budget (100,000 env
# steps, one env per seed, 5 updates per step, K = 10, width 256) with 10 seeds in one program, via
# the table command, so the result comes with the paper's statistics. Run from the repo root with
# `.whl` carried and timeout_s=600; the run directory stays on the machine (its checkpoints hold
# the replay buffers), only the small results come back: $OUT/log.txt, table.json, results.md,
# eval.jsonl, metrics.jsonl (the last chunk's env steps/s), summary.json.
set -o pipefail
source "$(dirname "$0")/gpu_setup.sh"
export JAX_COMPILATION_CACHE_DIR=/tmp/jax_cache JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0
TABLE=/tmp/reacher_table
timeout "${LIMIT:-580}" python3 train.py table --tasks reacher_hard --algos pbac --seeds 10 --out "$TABLE" \
  --train.progress False "$@" 2>&1 | grep -vi warp | tee -a "$OUT/log.txt"
RUN=$(ls -d "$TABLE"/runs/pbac_reacher_hard 2>/dev/null)
cp "$TABLE/table.json" "$OUT/" 2>/dev/null
cp "$TABLE/report/results.md" "$OUT/" 2>/dev/null
for f in eval.jsonl metrics.jsonl summary.json; do cp "$RUN/$f" "$OUT/" 2>/dev/null; done
ls -la "$OUT"
