#!/usr/bin/env bash
# The quickstart timed from a clean clone of each commit, with a cold compile cache per run, in
# the order before, after, after, before:
#   bash docs/evidence/data/compact-math/measure_quickstart.sh BEFORE AFTER OUT
# Run from the repository root with its virtual environment active. Writes OUT/whole.txt (each
# run's whole-command seconds, its summary's compile, training and evaluation seconds, and its
# evaluation returns) and each run's summary.json and eval.jsonl.gz.
set -euo pipefail
before=$1 after=$2 out=$(realpath -m "$3")
root=$(pwd) work=$(mktemp -d)
mkdir -p "$out"
for commit in "$before" "$after"; do
  git clone -q "$root" "$work/$commit" && git -C "$work/$commit" checkout -q "$commit"
done
i=0
for commit in "$before" "$after" "$after" "$before"; do
  i=$((i + 1)) run="$work/run$i"
  start=$(date +%s.%N)
  (cd "$work/$commit" && MJX_PBAC_JAX_CACHE="$work/cache$i" PYTHONPATH="$work/$commit" \
    python train.py --profile quickstart --train.run-dir "$run" --train.progress False > /dev/null 2>&1)
  end=$(date +%s.%N)
  echo "run $i commit $commit whole_s $(echo "$end - $start" | bc)" | tee -a "$out/whole.txt"
  cp "$run/summary.json" "$out/run${i}_${commit}_summary.json"
  gzip -9 -n -c "$run/eval.jsonl" > "$out/run${i}_${commit}_eval.jsonl.gz"
  python - "$run" >> "$out/whole.txt" <<'PY'
import json, sys
summary = json.load(open(f"{sys.argv[1]}/summary.json"))
print({key: summary.get(key) for key in ("compiles", "compile_s", "train_s", "eval_s", "elapsed_s")})
print("returns", [round(json.loads(line)["return_mean"], 1) for line in open(f"{sys.argv[1]}/eval.jsonl")])
PY
done
rm -rf "$work"
