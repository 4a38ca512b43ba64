# Sourced by the benchmarks/gpu_*.sh scripts on a lent GPU machine (repo root there, carrying
# .whl/: the wheels other than its own CUDA jax, see the README): installs them beside the
# machine's jax, sets $OUT (what comes back) and records the card.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1 OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
