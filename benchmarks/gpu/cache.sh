#!/usr/bin/env bash
# The GPU machine's JAX compilation cache, kept from one run of a script to the next when each
# starts on a fresh machine: compiling took 158-243 s of a 9-minute run on an H200
# (docs/evidence/h200-20261128.md, docs/evidence/h200-20261129.md). A program whose HLO did not
# change between commits (the same profile and sizes, jax and card) is read from the cache
# instead: JAX keys its entries by the program, the jax version, the device and the compile
# options (XLA_FLAGS included), so an entry never serves another program.
#
#   bash benchmarks/gpu/cache.sh restore CACHE_DIR       # on the GPU: unpacks .gpu_cache/jax_cache.tgz
#   bash benchmarks/gpu/cache.sh save CACHE_DIR OUT_DIR  # on the GPU: packs CACHE_DIR into OUT_DIR/jax_cache.tgz
#
# setup.sh does both (restore first, save when the script exits). `save` keeps the bundle only
# where it keeps $OUT small enough to copy back quickly: at most CACHE_MAX_BYTES (16 MiB) and
# fewer than 8 files in OUT_DIR. Neither ever fails the script: each says what it did.
#
# After a run, put the bundle where the next run reads it (.gpu_cache/ is git-ignored) and copy
# it to the GPU machine with the repository:
#   mkdir -p .gpu_cache && cp <the run's OUT>/jax_cache.tgz .gpu_cache/
set -uo pipefail
cd "$(dirname "$0")/../.."
BUNDLE=${CACHE_BUNDLE:-.gpu_cache/jax_cache.tgz}  # (a test points it elsewhere)
MAX_BYTES=${CACHE_MAX_BYTES:-16777216}

entries() { find "$1" -type f 2>/dev/null | wc -l; }
megabytes() { awk -v b="$1" 'BEGIN { printf "%.1f MB", b / 1e6 }'; }

case "${1:-}" in
  restore)
    dir=${2:?cache.sh restore CACHE_DIR}
    if [ ! -s "$BUNDLE" ]; then
      echo "cache: no bundle $BUNDLE: every program compiles"
      exit 0
    fi
    mkdir -p "$dir"
    if tar -xzf "$BUNDLE" -C "$dir" 2>/dev/null; then
      echo "cache: restored $(entries "$dir") entries (a $(megabytes "$(stat -c %s "$BUNDLE")") bundle) into $dir"
    else
      echo "cache: $BUNDLE could not be unpacked: every program compiles"
    fi
    ;;
  save)
    dir=${2:?cache.sh save CACHE_DIR OUT_DIR} out=${3:?cache.sh save CACHE_DIR OUT_DIR}
    count=$(entries "$dir")
    if [ "$count" = 0 ]; then
      echo "cache: nothing in $dir to bring back"
      exit 0
    fi
    files=$(find "$out" -maxdepth 2 -type f ! -name jax_cache.tgz | wc -l)
    if (( files >= 8 )); then
      echo "cache: $out already holds $files files, the most it is kept to: the cache ($count entries) stays behind"
      exit 0
    fi
    raw=$(du -sb "$dir" | cut -f1)
    if (( raw > 4 * MAX_BYTES )); then  # packing it would spend the run's last seconds for nothing
      echo "cache: $count entries, $(megabytes "$raw"): more than 4x the $(megabytes "$MAX_BYTES") a bundle may be, so it stays behind"
      exit 0
    fi
    if ! tar -czf "$out/jax_cache.tgz.tmp" -C "$dir" . 2>/dev/null; then
      rm -f "$out/jax_cache.tgz.tmp"
      echo "cache: packing $dir failed: the cache stays behind"
      exit 0
    fi
    size=$(stat -c %s "$out/jax_cache.tgz.tmp")
    if (( size > MAX_BYTES )); then
      rm -f "$out/jax_cache.tgz.tmp"
      echo "cache: $count entries, $(megabytes "$raw"), $(megabytes "$size") packed: over the $(megabytes "$MAX_BYTES") a bundle may be, so it stays behind"
      exit 0
    fi
    mv "$out/jax_cache.tgz.tmp" "$out/jax_cache.tgz"
    echo "cache: $count entries, $(megabytes "$raw"), packed into jax_cache.tgz ($(megabytes "$size")): put it in .gpu_cache/ for the next run (benchmarks/gpu/cache.sh)"
    ;;
  *)
    echo "usage: bash benchmarks/gpu/cache.sh restore CACHE_DIR | save CACHE_DIR OUT_DIR" >&2
    exit 2
    ;;
esac
