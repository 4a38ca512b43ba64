#!/usr/bin/env bash
# Records Meta-World reference data with C MuJoCo 3.3.0 in an isolated venv.
#
# usage: benchmarks/metaworld_reference_mujoco33.sh OUT_DIR [VENV_DIR] [TASKS...]
#   OUT_DIR   where <task>.npz, <task>_resets.npz, success.json, speed.json go
#   VENV_DIR  venv to create/reuse (default: a fresh dir under ${TMPDIR:-/tmp});
#             must lie outside the repository
#   TASKS     default: the seven sparse tasks
# env: EPISODES_SCRIPTED (2) EPISODES_NOISY (2) EPISODES_RANDOM (1) RESETS (1000)
#      SUCCESS_EPISODES (100) SEED (0) METAWORLD_WHEEL (a local metaworld-3.0.0
#      wheel; default /tmp/mw/metaworld-3.0.0-py3-none-any.whl if present, else PyPI)
#      PYTHON (python3.11 if available, else python3)
# Only envs/tools/metaworld_reference.py is imported from the repo (numpy, mujoco,
# metaworld only); it is run with PYTHONPATH pointing at a copy of it.
set -euo pipefail

OUT=${1:?usage: $0 OUT_DIR [VENV_DIR] [TASKS...]}
VENV=${2:-}
shift || true
shift || true
TASKS=("$@")
if [ ${#TASKS[@]} -eq 0 ]; then
  TASKS=(window-close-v3 window-open-v3 drawer-close-v3 drawer-open-v3 reach-v3 button-press-topdown-v3 door-open-v3)
fi
REPO=$(cd "$(dirname "$0")/.." && pwd)
MW_SHA256=f1dd9f8a1bcceab34a5f3c20113724dd90d21984ae89df98c21c842eb3ece137
WHEEL=${METAWORLD_WHEEL:-/tmp/mw/metaworld-3.0.0-py3-none-any.whl}
PY=${PYTHON:-$(command -v python3.11 || command -v python3)}

if [ -z "$VENV" ]; then
  VENV=$(mktemp -d "${TMPDIR:-/tmp}/mw_mujoco33.XXXXXX")/venv
fi
case "$(realpath -m "$VENV")/" in
  "$REPO"/*) echo "VENV_DIR must be outside the repository ($REPO)" >&2; exit 2;;
esac
mkdir -p "$OUT"

if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import mujoco, metaworld, sys; sys.exit(mujoco.__version__ != "3.3.0")' 2>/dev/null; then
  "$PY" -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
  "$VENV/bin/pip" install -q "mujoco==3.3.0" numpy gymnasium scipy imageio packaging
  # metaworld pinned by sha256; installed without deps so nothing else moves
  if [ -f "$WHEEL" ]; then
    echo "$MW_SHA256  $WHEEL" | sha256sum -c -
    "$VENV/bin/pip" install -q --no-deps "$WHEEL"
  else
    REQ=$(mktemp)
    echo "metaworld==3.0.0 --hash=sha256:$MW_SHA256" > "$REQ"
    "$VENV/bin/pip" install -q --no-deps --require-hashes -r "$REQ"
    rm -f "$REQ"
  fi
fi
"$VENV/bin/python" -c 'import mujoco, metaworld, numpy, gymnasium; print("mujoco", mujoco.__version__, "numpy", numpy.__version__, "gymnasium", gymnasium.__version__)'
"$VENV/bin/pip" freeze > "$OUT/pip_freeze.txt"

# Import the recorder module alone, not the envs package (whose __init__ needs jax).
SRC=$(mktemp -d)
cp "$REPO/envs/tools/metaworld_reference.py" "$SRC/metaworld_reference.py"
run() { PYTHONPATH="$SRC" "$VENV/bin/python" -m metaworld_reference "$@"; }

SEED=${SEED:-0}
for t in "${TASKS[@]}"; do
  run record --task "$t" --policy mixed --seed "$SEED" \
    --scripted "${EPISODES_SCRIPTED:-2}" --noisy "${EPISODES_NOISY:-2}" --random "${EPISODES_RANDOM:-1}" \
    --out "$OUT/$t.npz"
  run resets --task "$t" --episodes "${RESETS:-1000}" --seed "$SEED" --out "$OUT/${t}_resets.npz"
done
run success --tasks "${TASKS[@]}" --episodes "${SUCCESS_EPISODES:-100}" --seed "$SEED" --out "$OUT/success.json"
run speed --tasks "${TASKS[@]}" --out "$OUT/speed.json"
rm -rf "$SRC"
echo "wrote $OUT"
