#!/usr/bin/env bash
# Prepares .whl/ (git-ignored) for a GPU machine without registry access that has its own CUDA
# jax: every package of this project's dependency closure (as installed in this venv, exact
# versions) that the machine's image lacks (ON_IMAGE below: the packages of an image with CUDA jax
# and the usual scientific Python stack; edit it for yours), as Python 3.12 x86-64 wheels. Run it
# from the repository root with the project's venv active, then copy the repository with .whl/ to
# the GPU machine (benchmarks/gpu/setup.sh installs the wheels there). dm-control's wheel (56 MB)
# and metaworld's would be most of the copy, and the envs read only their model files
# (envs/dm_control.py, envs/metaworld_model.py): slim wheels of those files stand in for them
# (benchmarks/gpu/slim_wheels.py), and dm-control's own dependencies are left out.
set -euo pipefail
cd "$(dirname "$0")/../.."
python3 - > /tmp/gpu_wheels.txt <<'PY'
import importlib.metadata as md
import re

from packaging.requirements import Requirement

ON_IMAGE = set("""
absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch build
certifi charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cycler cython
diffrax einops equinox etils filelock flatbuffers flax fonttools frozenlist fsspec grpcio h11 h5py
httpcore httpx humanize idna imageio iniconfig jax jaxlib jaxtyping jinja2 joblib kiwisolver lxml
markdown markdown-it-py markupsafe matplotlib mdurl ml-dtypes msgpack multidict networkx numpy optax
opt-einsum orbax-checkpoint packaging pandas pillow pip pluggy prometheus-client propcache protobuf
psutil pyarrow pygments pyparsing python-dateutil pyyaml regex requests rich safetensors scipy setuptools
simplejson six tensorstore toolz tqdm treescope typing-extensions urllib3 uvloop werkzeug wheel wrapt
""".split())


def key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


seen, todo = {}, ["mjx-pbac", "pytest"]  # pytest: benchmarks/gpu/device_tests.sh
while todo:
    name = todo.pop()
    if key(name) in seen:
        continue
    try:
        dist = md.distribution(name)
    except md.PackageNotFoundError:
        continue
    seen[key(name)] = dist.version
    for line in dist.requires or []:
        requirement = Requirement(line)
        if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
            todo.append(requirement.name)
# dm-control and metaworld, and what only the full dm-control needs: slim wheels replace them
# (benchmarks/gpu/slim_wheels.py); metaworld's own dependencies are the project's too.
SLIM = {"dm-control", "dm-env", "dm-tree", "glfw", "labmaze", "pyopengl", "metaworld"}
for name, version in sorted(seen.items()):
    if name not in ON_IMAGE | SLIM and name != "mjx-pbac":
        print(f"{name}=={version}")
PY
mkdir -p .whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl -r /tmp/gpu_wheels.txt
python3 benchmarks/gpu/slim_wheels.py .whl
grep -qx "/.whl/" .gitignore || echo "/.whl/ must stay ignored" >&2
du -sh .whl && ls .whl
