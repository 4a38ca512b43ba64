#!/usr/bin/env bash
# Candidate recipes for ant_delayed compared in one run of about 9 minutes on one GPU, each the
# profile `ant_delayed_fast` plus a few `train.py` options, by return against env steps and
# wall-clock and by the time to the paper's score.
#
# On a GPU machine:
#   OUT=<dir> COMMIT=<hash> LIMIT=540 bash benchmarks/gpu/tune.sh       # every candidate of the block below
#   ONLY="base w128" PARALLEL=1 COMMIT=<hash> bash benchmarks/gpu/tune.sh   # two of them, one after the other
# On a CPU, the same commands at tiny sizes (tests/test_gpu_scripts.py runs it):
#   DRY_RUN=1 bash benchmarks/gpu/tune.sh
#
# How it runs: each candidate is a program of its own (its own run directory, named after it),
# SEEDS seeds (10) as members. A candidate whose options hold a `--sweep KNOB=v1,v2` trains its
# sweep points as members of that one program (one compile; reported as NAME/pbac KNOB=v1, ...).
# PARALLEL candidates (default: all those chosen) train at once on the one GPU, in waves: one
# program of the earlier 1,024-env `ant_delayed_fast` took 158 s to compile on an H200 (docs/evidence/h200-20261128.md), so
# four candidates one after another would spend a 540 s LIMIT compiling; side by side, their
# compiles overlap on the machine's cores (16 there) and they then share the GPU
# (XLA_PYTHON_CLIENT_PREALLOCATE=false, so that each takes only the memory it uses). Each wave's
# candidates get an equal share of what is left of the LIMIT (setup.sh), less RESERVE_SECONDS for
# the last report; a wave with under MIN_SECONDS each (default 180, more than one compile) is not
# started, and the log says so. PARALLEL=1 gives each candidate the GPU alone.
#
# What it writes to $OUT, as it goes (rewritten every COPY_SECONDS during the runs and after each
# wave, so a run cut short still says which candidate leads; a few files, quick to copy back):
#   results.md          "Standing": one row per candidate (and sweep point), the leader first:
#                       its options, state, env steps per seed trained, env steps/s (all seeds), compile seconds,
#                       the last evaluation's IQM return and wall-clock, the best IQM, and when
#                       90 % and 100 % of the paper's PBAC final (5,138) were reached; then
#                       `train.py report RUN_DIRS --by-run True --x steps wall --score-fraction 0.9 1.0`
#                       (the paper's tables and the time-to-score table, one column per candidate)
#   time_to_score.json  that report's time-to-score rows (method NAME/pbac)
#   candidates.json     each candidate's options, budget, start and end, exit code (124: cut at
#                       its time; 0: its budget's end; 137: killed)
#   tune_runs.tgz       each run's config.json, eval.jsonl, metrics.jsonl, summary.json, and the
#                       report with its curves (curves_wall_ant_delayed.png: return against
#                       wall-clock); no checkpoints, which stay in $WORK on the machine
#   log.txt, device.txt (card, jax, commit)
#
# How to read it: the first row of results.md's Standing leads. Candidates that share the GPU
# (PARALLEL > 1) run slower than one alone, all of them alike, so compare them with each other
# (best by return against env steps: curves_ant_delayed.png), and time the winner alone
# (`TASKS=ant_delayed bash benchmarks/gpu/fast.sh`, or PARALLEL=1 ONLY=name here) against the
# target: the 10-seed IQM >= 4,624 (90 % of 5,138) within 10 min of wall-clock, compile included.
set -uo pipefail
cd "$(dirname "$0")/../.."
source benchmarks/gpu/setup.sh

# ==== Candidates: "NAME|OPTIONS", one a line ===================================================
# NAME names the run directory and the report's column (letters, digits, '_', '-'); OPTIONS are
# `train.py` options added to the profile, split at spaces (no quoting). The first is the profile
# as it is, the reference. Edit this block alone to change what a run compares.
# The profile is the CPU recipe per seed (profiles/ant_delayed_fast_cpu.toml: 16 envs, 8 updates
# of batch 1,024 per vector step, K = 5 of width 64, lr 1e-3), which on ant_delayed on the 2-core
# CPU reached a mean of 2,405 at 96,000 env steps and levels near 3,000 from 240,000 on
# (docs/evidence/ant-delayed.md). The profile's earlier sizes, one gradient step per 256 env steps,
# showed no learning by 256,000-460,800 env steps per seed on an H200 (docs/evidence/h200-20261129.md,
# docs/evidence/h200-20261129b.md), where a gradient step of the paper's networks took ~0.43 ms
# against ~12.9 ms for a vector step of Ant's physics at small instance counts
# (docs/evidence/h200-20261128.md): with few envs per seed, gradient steps are cheap on a GPU.
#   base        the profile as it is: the CPU recipe
#   n64_u32     64 envs per seed and 32 updates per vector step: the recipe's gradient steps per env
#               step in a quarter of the vector steps (on the CPU, 64 envs at 8 updates reached a
#               mean of 1,907 at 192,000 env steps against 16 envs' 859 at 48,000)
#   u16         16 updates per vector step: one gradient step per env step, twice the recipe's
#   w128        width 128: on the CPU level with width 64 in the mean at 144,000 env steps (2,616
#               against 2,579), above it at 192,000 (3,056 against 2,889), one seed's whole
#               episodes at 4,228 and 4,327 where no width-64 seed passed 3,373 by 288,000
# All but base evaluate every 48,000 env steps per seed (192,000 at 64 envs) and spell out their
# sizes, so that candidates.json records each candidate's whole options.
CANDIDATES=(
  "base|"
  "n64_u32|--train.num-envs 64 --train.warmup-steps 8000 --train.chunk-steps 64000 --train.eval-interval 192000 --train.updates-per-step 32 --train.batch-size 1024 --pbac.num-critics 5 --pbac.hidden-sizes 64 64 --pbac.critic-lr 1e-3 --pbac.actor-lr 1e-3 --pbac.alpha-lr 1e-3"
  "u16|--train.num-envs 16 --train.warmup-steps 8000 --train.chunk-steps 16000 --train.eval-interval 48000 --train.updates-per-step 16 --train.batch-size 1024 --pbac.num-critics 5 --pbac.hidden-sizes 64 64 --pbac.critic-lr 1e-3 --pbac.actor-lr 1e-3 --pbac.alpha-lr 1e-3"
  "w128|--train.num-envs 16 --train.warmup-steps 8000 --train.chunk-steps 16000 --train.eval-interval 48000 --train.updates-per-step 8 --train.batch-size 1024 --pbac.num-critics 5 --pbac.hidden-sizes 128 128 --pbac.critic-lr 1e-3 --pbac.actor-lr 1e-3 --pbac.alpha-lr 1e-3"
)
# ===============================================================================================

PROFILE=$(dry "${PROFILE:-ant_delayed_fast}")
ONLY=${ONLY:-}                 # the candidates to run (names, space-separated; default: all, in order)
SEEDS=${SEEDS:-10}
MIN_SECONDS=${MIN_SECONDS:-180}
RESERVE_SECONDS=${RESERVE_SECONDS:-25}
COPY_SECONDS=${COPY_SECONDS:-30}
# The runs (checkpoints included) and the report; only a bundle goes to $OUT. A fresh folder each
# time: a machine is not always bare, and an earlier run's /tmp/tune once held folders that a
# candidate of the same name would have found taken (docs/evidence/h200-20261129b.md).
WORK=${WORK:-$(mktemp -d /tmp/tune.XXXXXX)}
# Every candidate writes each evaluation when it is made (none kept on the device for a batched one
# later), stops at once at its time (its checkpoints stay on the GPU machine and are lost, so a
# stop checkpoint would only spend the grace) and runs its chunks whole (short chunks serve a
# stop's grace; on a GPU a split chunk runs a second, any-length training program). Without these,
# three candidates writing their 2.6 GB stop checkpoints at once outran `timeout`'s 20 s and were
# killed before the evaluations they had kept for after it, and sharing the GPU slowed every chunk
# past the 10 s target, so each candidate compiled split chunks while it trained (n256: at least
# 95 s of its 531; docs/evidence/h200-20261129.md). Each trains the profile's task alone (the
# robot's other tasks, members of ant_delayed_fast's program, are fast.sh's). A candidate's own
# options come after these.
TUNE_RUN=(--train.eval-batch 1 --train.stop-grace-seconds 0 --train.chunk-seconds 0 --train.tasks)
TINY=()
if [ "${DRY_RUN:-0}" = 1 ]; then
  # The same commands at tiny sizes, after each candidate's options (which are parsed all the same),
  # so that the candidates that differ only in sizes share one compile: 2 seeds of 2 envs, 2
  # critics of width 8, three short chunks, on DM Control cartpole (setup.sh's `dry`).
  SEEDS=2 MIN_SECONDS=1 COPY_SECONDS=60 PARALLEL=${PARALLEL:-2}
  WORK=$(mktemp -d)
  TINY=("${DRY_TINY[@]}")
fi
RUNS=$WORK/runs REPORT=$WORK/report STATUS=$WORK/status
mkdir -p "$RUNS" "$REPORT" "$STATUS"
log() { echo "$@" | tee -a "$OUT/log.txt"; }

# The chosen candidates, in the block's order; a name ONLY gives that the block lacks is an error.
names=() options=()
for line in "${CANDIDATES[@]}"; do
  name=${line%%|*}
  if [ -z "$ONLY" ] || [[ " $ONLY " == *" $name "* ]]; then names+=("$name"); options+=("${line#*|}"); fi
done
for wanted in $ONLY; do
  [[ " ${names[*]} " == *" $wanted "* ]] || { log "tune: no candidate named $wanted (the block has: $(printf '%s ' "${CANDIDATES[@]%%|*}"))"; exit 2; }
done
PARALLEL=${PARALLEL:-${#names[@]}}
[[ "$PARALLEL" =~ ^[1-9][0-9]*$ ]] || { log "tune: PARALLEL must be a whole number >= 1, got $PARALLEL"; exit 2; }
(( PARALLEL > 1 )) && export XLA_PYTHON_CLIENT_PREALLOCATE=${XLA_PYTHON_CLIENT_PREALLOCATE:-false}
log "tune: ${#names[@]} candidate(s) of $PROFILE, $SEEDS seeds each, $PARALLEL at a time: ${names[*]}"

note() {  # NAME OPTIONS BUDGET STATE [EXIT]: the candidate's record in $STATUS/NAME.json
  python3 - "$STATUS/$1.json" "$@" <<'PY'
import json, os, sys, time
path, name, options, budget, state, *code = sys.argv[1:]
record = json.load(open(path)) if os.path.exists(path) else {"name": name, "options": options}
record.update(state=state, budget_s=int(budget))
if state != "skipped":
    record["started" if state == "running" else "ended"] = time.strftime("%H:%M:%S", time.gmtime())
if code:
    record["exit"] = int(code[0])
json.dump(record, open(path + ".tmp", "w"), indent=1)
os.replace(path + ".tmp", path)
PY
}

standing() {  # results.md's first table, from the report's time_to_score.json and the runs' logs
  python3 - "$REPORT/time_to_score.json" "$STATUS" "$RUNS" <<'PY'
import glob, json, os, sys

rows, status_dir, runs = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
status = {os.path.basename(p)[:-5]: json.load(open(p)) for p in sorted(glob.glob(status_dir + "/*.json"))}
methods = {}  # method (NAME/label) -> its time-to-score rows, by score: 90 % of the score, then the score
for row in rows:
    methods.setdefault(row["method"], []).append(row)


def trained(name):  # the last training chunk: env steps per seed, env steps/s of all members together
    record = {}
    try:
        for line in open(os.path.join(runs, name, "metrics.jsonl")):
            if '"phase": "train"' in line:
                record = json.loads(line)
    except (OSError, json.JSONDecodeError):
        pass
    return record.get("env_steps"), record.get("env_steps_per_s")


def compiling(name):  # the run's compile seconds so far (summary.json, written once its programs are compiled)
    try:
        seconds = json.load(open(os.path.join(runs, name, "summary.json"))).get("compile_s")
    except (OSError, json.JSONDecodeError):
        return "-"
    return f"{seconds:.0f} s" if seconds else "-"


def minutes(seconds):
    return "-" if seconds is None else f"{seconds / 60:.1f} min"


def reached(row):
    if row is None or row["score"] is None:
        return "-", None
    if not row["reached"]:
        return "not yet", None
    return f"{minutes(row['wall_s'])} ({row['env_steps']:,} steps)", row["wall_s"] or 0.0


def options(record):
    return f"`{record['options']}`" if record.get("options") else "(the profile)"


def state(record):
    return record.get("state", "not started") + (f" (exit {record['exit']})" if "exit" in record else "")


table = []
for method, scored in methods.items():
    scored = sorted(scored, key=lambda row: row["score"] or 0.0)
    row, name = scored[-1], method.split("/", 1)[0]
    at90, wall90 = reached(scored[0] if len(scored) > 1 else None)
    at100, wall100 = reached(scored[-1])
    steps, speed = trained(name)
    record = status.get(name, {})
    key = (wall100 is None, wall100 or 0.0, wall90 is None, wall90 or 0.0, -row["best"])
    table.append((key, f"| {method} | {options(record)} | {state(record)} | {'-' if steps is None else f'{steps:,}'} | "
                       f"{'-' if speed is None else f'{speed:,.0f}'} | {compiling(name)} | {row['final']:.4g} at {row['final_env_steps']:,} "
                       f"({minutes(row['final_wall_s'])}) | {row['best']:.4g} at {row['best_env_steps']:,} | {at90} | {at100} |"))
for name, record in status.items():
    if not any(method.split("/", 1)[0] == name for method in methods):
        key = (True, 0.0, True, 0.0, float("inf"))
        table.append((key, f"| {name} | {options(record)} | {state(record)} | - | - | {compiling(name)} | no evaluation yet | - | - | - |"))
print("# Tuning: standing\n")
print("Leader first: the earliest to the paper's score, else to 90 % of it, else the best IQM return so far. "
      "Candidates that trained side by side shared the GPU: each ran slower than it would alone.\n")
print("| candidate | options | state | env steps per seed trained | env steps/s (all seeds) | compiling | "
      "last evaluation: IQM at env steps (wall-clock) | best IQM at env steps | 90 % of the score at | the score at |")
print("|---|---|---|---|---|---|---|---|---|---|")
for _, line in sorted(table, key=lambda item: item[0]):
    print(line)
print()
PY
}

collect() {  # the standing, the report and the bundle, from what the runs wrote so far
  merge_json "$STATUS" "$OUT/candidates.json"
  local dirs=()
  for dir in "$RUNS"/*/; do [ -s "$dir/eval.jsonl" ] && dirs+=("${dir%/}"); done
  [ ${#dirs[@]} -gt 0 ] || return 0
  if python3 train.py report "${dirs[@]}" --by-run True --out "$REPORT" --x steps wall --score-fraction 0.9 1.0 \
      > "$WORK/printed.txt" 2>&1; then
    { standing; cat "$REPORT/results.md"; } > "$OUT/results.md.tmp" && mv "$OUT/results.md.tmp" "$OUT/results.md"
    cp "$REPORT/time_to_score.json" "$OUT/"
  else
    log "report failed:"; tail -3 "$WORK/printed.txt" | tee -a "$OUT/log.txt"
  fi
  tar -czf "$OUT/tune_runs.tgz.tmp" -C "$WORK" --exclude=checkpoints --exclude=tb --exclude=.lock runs report \
    && mv "$OUT/tune_runs.tgz.tmp" "$OUT/tune_runs.tgz"
}

train_candidate() {  # NAME BUDGET OPTIONS: one candidate's program, its record kept in $STATUS
  local name=$1 budget=$2 opts=$3 extra
  read -r -a extra <<< "$opts"
  note "$name" "$opts" "$budget" running
  BOUNDED_PREFIX=1 bounded "$name" "$budget" python3 train.py --profile "$PROFILE" --seeds "$SEEDS" \
    --train.run-dir "$RUNS/$name" --train.progress False --train.tensorboard False "${TUNE_RUN[@]}" "${extra[@]}" "${TINY[@]}"
  local status=$? state
  case $status in
    0) state=ended ;;
    124) state="cut at its time" ;;
    137) state=killed ;;
    *) state=failed ;;
  esac
  note "$name" "$opts" "$budget" "$state" "$status"
}

next=0
while (( next < ${#names[@]} )); do
  remaining=$(( ${#names[@]} - next ))
  waves=$(( (remaining + PARALLEL - 1) / PARALLEL ))
  left=$(( $(seconds_left) - RESERVE_SECONDS ))
  budget=$(( left / waves ))
  (( budget < MIN_SECONDS )) && budget=$(( left < MIN_SECONDS ? left : MIN_SECONDS ))
  if (( budget < MIN_SECONDS )); then
    for (( i = next; i < ${#names[@]}; i++ )); do
      log "${names[i]}: skipped, $(seconds_left) s left (needs ${MIN_SECONDS})"
      note "${names[i]}" "${options[i]}" 0 skipped
    done
    break
  fi
  wave=("${names[@]:next:PARALLEL}")
  log "== wave: ${wave[*]}, up to ${budget} s each ($(date -u +%H:%M:%S))"
  every "$COPY_SECONDS" collect
  pids=()
  for (( i = next; i < next + ${#wave[@]}; i++ )); do
    train_candidate "${names[i]}" "$budget" "${options[i]}" &
    pids+=($!)
  done
  wait "${pids[@]}"
  stop_every
  collect
  next=$(( next + ${#wave[@]} ))
done
collect
log "standing:"; [ -s "$OUT/results.md" ] && sed -n '/^| candidate/,/^$/p' "$OUT/results.md" | tee -a "$OUT/log.txt"
ls -la "$OUT"
