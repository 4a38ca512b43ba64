#!/usr/bin/env bash
# The README's quickstart from a clean clone with an empty compilation cache, at two commits, one
# after the other on an otherwise idle machine; keeps each run's log, summary and evaluations.
#   bash measure_quickstart.sh BEFORE_COMMIT AFTER_COMMIT OUT_DIR
set -euo pipefail
repo=$(git rev-parse --show-toplevel)
out=$(realpath -m "$3")
mkdir -p "$out"
for pair in "before $1" "after $2"; do
  read -r label commit <<< "$pair"
  work=$(mktemp -d)
  git clone -q "$repo" "$work/clone"
  git -C "$work/clone" checkout -q "$commit"
  (cd "$work/clone" && MJX_PBAC_JAX_CACHE="$work/cache" /usr/bin/time -f "%e s wall, %M KiB peak resident" \
    python train.py --profile quickstart --train.run-dir "$work/run") > "$out/quickstart_$label.log" 2>&1
  cp "$work/run/summary.json" "$out/quickstart_${label}_summary.json"
  gzip -9 -n -c "$work/run/eval.jsonl" > "$out/quickstart_${label}_eval.jsonl.gz"
  rm -rf "$work"
done
