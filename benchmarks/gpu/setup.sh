# Sourced by the scripts of benchmarks/gpu/ (from the repository root). Two modes:
#
# - On a GPU machine (a copy of the repository): installs the wheels of .whl/, if there are any
#   (`bash benchmarks/gpu/wheels.sh` builds them, for a machine without registry access), beside
#   the machine's own CUDA jax; without .whl/ it uses the packages installed (`pip install -e
#   ".[cuda12]"`).
# - DRY_RUN=1, on a CPU: installs nothing; the script runs the same commands at tiny sizes
#   (each script picks them), so a test can run it and the script cannot rot unseen.
#
# Either way it sets $OUT (the output directory, /tmp/out by default; the scripts keep it to a
# few files, 2 folders deep, so that it is quick to copy back; a dry run without $OUT writes to a
# temporary directory), $DEADLINE (epoch seconds by which the script must be done: now + $LIMIT,
# 540 s by default, so that a script fits a 10-minute job; 1500 s in a dry run) and records the
# device, the jax version and the commit measured in $OUT/device.txt. The commit: $COMMIT when
# given (pass COMMIT=<hash> where the copy has no .git, or one that may be stale), else
# `git rev-parse`.
if [ "${DRY_RUN:-0}" = 1 ]; then
  export OUT=${OUT:-$(mktemp -d)}
else
  if compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
      && export PYTHONPATH=/tmp/site:$PWD || { echo "setup: installing .whl/ failed (built by benchmarks/gpu/wheels.sh)" >&2; exit 1; }
  else
    echo "setup: no wheels in .whl/: using the installed packages" >&2
    export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
  fi
  export OUT=${OUT:-/tmp/out}
  # The runs' compilation cache (`mjx_pbac.compilation_cache`), restored from an earlier run's
  # bundle, .gpu_cache/jax_cache.tgz, and packed into $OUT when the script exits, for the next run
  # on a fresh machine (benchmarks/gpu/cache.sh).
  export MJX_PBAC_JAX_CACHE=${MJX_PBAC_JAX_CACHE:-/tmp/jax_cache}
  export JAX_COMPILATION_CACHE_DIR=${JAX_COMPILATION_CACHE_DIR:-$MJX_PBAC_JAX_CACHE} JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0
fi
export PYTHONUNBUFFERED=1
mkdir -p "$OUT"
if [ "${DRY_RUN:-0}" != 1 ]; then
  bash benchmarks/gpu/cache.sh restore "$MJX_PBAC_JAX_CACHE" | tee -a "$OUT/log.txt"
  trap 'bash benchmarks/gpu/cache.sh save "$MJX_PBAC_JAX_CACHE" "$OUT" | tee -a "$OUT/log.txt"' EXIT
fi
# A dry run compiles on a CPU (slow, more so on a cold cache): its deadline is longer than a GPU run's.
if [ "${DRY_RUN:-0}" = 1 ]; then LIMIT=${LIMIT:-1500}; else LIMIT=${LIMIT:-540}; fi
DEADLINE=$(( $(date +%s) + LIMIT ))
export LIMIT DEADLINE
if [ -n "${COMMIT:-}" ]; then  # given: a copy's .git can be stale (docs/evidence/h200-20261129b.md)
  commit=$COMMIT
elif commit=$(git rev-parse HEAD 2>/dev/null); then
  git diff --quiet HEAD 2>/dev/null || commit="$commit (with uncommitted changes)"
else
  commit=unknown
fi
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $commit"
  echo "dry_run: ${DRY_RUN:-0}"
  echo "limit_s: $LIMIT"
  python3 -c "import jax; d = jax.devices()[0]; print(f'jax: {jax.__version__}'); print(f'device: {d.platform} {d.device_kind} x{jax.device_count()}')"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | sed 's/^/gpu: /'
} 2>&1 | tee "$OUT/device.txt"

seconds_left() { echo $(( DEADLINE - $(date +%s) )); }

# bounded TAG SECONDS COMMAND...: COMMAND under `timeout`, at most SECONDS and never past the
# DEADLINE (less 10 s to write what is left), its output (less XLA's warp chatter) appended to
# $OUT/log.txt; skipped, and said so, when under 20 s are left. Returns COMMAND's exit code.
# `--foreground`: timeout signals COMMAND alone, once; without it, it signals COMMAND and then its
# own process group, and a run took the pair of SIGTERMs as "stop at once" (docs/evidence/h200-20261128b.md).
# BOUNDED_PREFIX=1 bounded ...: each output line is prefixed "[TAG] " (commands run side by side).
bounded() {
  local tag=$1 seconds=$2; shift 2
  local left=$(( $(seconds_left) - 10 ))
  [ "${DRY_RUN:-0}" = 1 ] && seconds=$left  # the per-command bounds are sized for a GPU, not for compiling on a CPU
  (( seconds > left )) && seconds=$left
  if (( seconds < 20 )); then
    echo "$tag: skipped, $(seconds_left) s left" | tee -a "$OUT/log.txt"
    return 0
  fi
  echo "== $tag (up to ${seconds} s, $(date -u +%H:%M:%S))" | tee -a "$OUT/log.txt"
  local prefix=""
  [ -n "${BOUNDED_PREFIX:-}" ] && prefix="[$tag] "
  timeout --foreground -k 20 "$seconds" "$@" 2>&1 | grep --line-buffered -v -i warp | sed -u "s|^|$prefix|" | tee -a "$OUT/log.txt"
  local status=${PIPESTATUS[0]}
  echo "$tag: exit $status" | tee -a "$OUT/log.txt"
  return "$status"
}

# merge_json DIR FILE: every DIR/*.json into one JSON object FILE, keyed by file name (rewritten
# after each measurement, so a script cut short still returns what it measured, in one file).
merge_json() {
  python3 -c "import json,glob,os,sys; json.dump({os.path.basename(p)[:-5]: json.load(open(p)) for p in sorted(glob.glob(sys.argv[1] + '/*.json'))}, open(sys.argv[2], 'w'), indent=1)" "$1" "$2"
}

# dry PROFILE [light]: the profile a dry run uses in its place (cheap to compile), else PROFILE
# itself: DM Control cartpole (MJX physics and a paper score, for lines that train to a score or
# set physics options), or with `light` the chain probe (no physics: a tiny profile compiles in
# ~17 s here against cartpole's ~62 s), for throughput lines that need neither.
dry() {
  if [ "${DRY_RUN:-0}" != 1 ]; then echo "$1"
  elif [ "${2:-}" = light ]; then echo chain
  else echo "${DRY_PROFILE:-cartpole_swingup_sparse}"; fi
}
# dry_once KEY TAG FILE...: in a dry run every profile is one of two stand-ins (`dry`) and its sizes
# override each line's, so two of a script's lines can be one command (latency.sh's reacher_1 and
# ant_delayed_1 word for word, both cartpole there; trainer.sh's three lines once parsed, KEY from
# `dry_key`); the second runs nothing and takes the first's outputs, FILE... of the first
# copied to this tag's FILE..., and says so. Returns 0 when it did; otherwise (and always on a GPU)
# it remembers KEY (the command's words) with this tag's files and returns 1: run it.
declare -A DRY_SEEN=() DRY_SEEN_TAG=()
dry_once() {
  local key=$1 tag=$2; shift 2
  [ "${DRY_RUN:-0}" = 1 ] || return 1
  if [ -n "${DRY_SEEN[$key]:-}" ]; then
    local -a earlier
    read -r -a earlier <<< "${DRY_SEEN[$key]}"
    local i=0 file
    for file in "$@"; do cp "${earlier[$i]}" "$file"; i=$((i + 1)); done
    echo "$tag: the same command as ${DRY_SEEN_TAG[$key]} in this dry run: its output taken, not run again" | tee -a "$OUT/log.txt"
    return 0
  fi
  DRY_SEEN[$key]="$*"
  DRY_SEEN_TAG[$key]=$tag
  return 1
}

# dry_key TAG WORDS...: in a dry run, what the line `python3 train.py WORDS...` asks for once parsed
# (benchmarks/gpu/resolved.py: the command's own parser and checks, later options over earlier
# ones, --out left out), the KEY dry_once compares: lines whose sizes the dry run's override alike
# (trainer.sh's three Ant settings) are one command there. A line that does not parse has its error
# logged and a key of its own, so it runs and fails as it would on the GPU. Prints nothing on a GPU.
dry_key() {
  local tag=$1; shift
  [ "${DRY_RUN:-0}" = 1 ] || return 0
  python3 benchmarks/gpu/resolved.py "$@" 2>>"$OUT/log.txt" || echo "unparsed $tag"
}

# A dry run's training sizes (fast.sh, tune.sh, reacher_table.sh): 2 envs per seed, batch 16, one update per vector
# step, three 40-step chunks, 2-episode evaluations of 20-step episodes, 2 critics of width 8.
DRY_TINY=(--train.num-envs 2 --train.batch-size 16 --train.updates-per-step 1 --train.buffer-size 400
          --train.total-steps 120 --train.warmup-steps 40 --train.chunk-steps 40 --train.eval-interval 40
          --train.eval-episodes 2 --train.env-overrides episode_length=20 --pbac.num-critics 2 --pbac.hidden-sizes 8 8)

# every SECONDS COMMAND...: COMMAND every SECONDS in the background (e.g. a report of the runs so
# far, while they run) until `stop_every`, which lets a COMMAND under way finish first, so that
# the next COMMAND never writes the same files at the same time (a `kill` would leave it running).
every() {
  local seconds=$1; shift
  EVERY_STOP=$(mktemp -u)
  ( ticks=0; while [ ! -e "$EVERY_STOP" ]; do sleep 1; (( ++ticks % seconds )) || [ -e "$EVERY_STOP" ] || "$@"; done ) &
  EVERY_PID=$!
}
stop_every() { touch "$EVERY_STOP"; wait "$EVERY_PID" 2>/dev/null; rm -f "$EVERY_STOP"; }
