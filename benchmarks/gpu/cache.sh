#!/usr/bin/env bash
# The GPU machine's JAX compilation cache, kept from one device call to the next. Each call starts
# on a bare machine, and compiling took 158-243 s of a ~9-minute call (docs/evidence/data/h200-20261128,
# docs/evidence/data/h200-20261129). A program whose HLO did not change between commits (the same profile and
# sizes, jax and card) is read from the cache instead: JAX keys its entries by the program, the
# jax version, the device and the compile options, so an entry never serves another program.
#
#   bash benchmarks/gpu/cache.sh restore CACHE_DIR       # on the GPU: unpacks the carried .gpu_cache/jax_cache.tgz
#   bash benchmarks/gpu/cache.sh save CACHE_DIR OUT_DIR  # on the GPU: packs CACHE_DIR into OUT_DIR/jax_cache.tgz
#
# setup.sh does both (restore first, save when the script exits). `save` keeps the bundle only
# where it can come back: at most CACHE_MAX_BYTES (16 MiB, what one file from $OUT may be) and
# with fewer than 8 files in OUT_DIR (what a call brings back). Neither ever fails the script:
# each says what it did.
#
# Here, after a call: copy what came back to the carried folder (git-ignored) and carry it too,
# if the call's 64 MiB allow (the working tree ~18 MB, `.whl` ~36 MB without Meta-World's):
#   mkdir -p .gpu_cache && cp /work/.device/<n>/jax_cache.tgz .gpu_cache/ && du -shc .whl .gpu_cache
#   ... carry: [".whl", ".gpu_cache"]
set -uo pipefail
cd "$(dirname "$0")/../.."
CARRIED=${CACHE_CARRIED:-.gpu_cache/jax_cache.tgz}  # (a test points it elsewhere)
MAX_BYTES=${CACHE_MAX_BYTES:-16777216}

entries() { find "$1" -type f 2>/dev/null | wc -l; }
megabytes() { awk -v b="$1" 'BEGIN { printf "%.1f MB", b / 1e6 }'; }

case "${1:-}" in
  restore)
    dir=${2:?cache.sh restore CACHE_DIR}
    if [ ! -s "$CARRIED" ]; then
      echo "cache: no carried $CARRIED: every program compiles"
      exit 0
    fi
    mkdir -p "$dir"
    if tar -xzf "$CARRIED" -C "$dir" 2>/dev/null; then
      echo "cache: restored $(entries "$dir") entries ($(megabytes "$(stat -c %s "$CARRIED")") carried) into $dir"
    else
      echo "cache: $CARRIED could not be unpacked: every program compiles"
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
      echo "cache: $out already holds $files files, the most a call brings back: the cache ($count entries) stays behind"
      exit 0
    fi
    raw=$(du -sb "$dir" | cut -f1)
    if (( raw > 4 * MAX_BYTES )); then  # packing it would spend the call's last seconds for nothing
      echo "cache: $count entries, $(megabytes "$raw"): more than 4x the $(megabytes "$MAX_BYTES") a file may bring back, so it stays behind"
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
      echo "cache: $count entries, $(megabytes "$raw"), $(megabytes "$size") packed: over the $(megabytes "$MAX_BYTES") a file may bring back, so it stays behind"
      exit 0
    fi
    mv "$out/jax_cache.tgz.tmp" "$out/jax_cache.tgz"
    echo "cache: $count entries, $(megabytes "$raw"), packed into jax_cache.tgz ($(megabytes "$size")): carry it next time (benchmarks/gpu/cache.sh)"
    ;;
  *)
    echo "usage: bash benchmarks/gpu/cache.sh restore CACHE_DIR | save CACHE_DIR OUT_DIR" >&2
    exit 2
    ;;
esac
