#!/usr/bin/env bash
# Grows the committed fuzz corpus (tests/fuzz/corpus/<target>/found/): fuzzes each target for
# SECONDS from the corpus as it is, then keeps the inputs that add coverage (libFuzzer's -merge=1
# into a copy of the corpus: only files with new features are added).
#   tests/fuzz/grow_corpus.sh <fuzz build dir, e.g. build/tests/fuzz> [seconds, default 240]
# Why (issue 32): ctest's fuzz.* runs are short (COHORT_FUZZ_SECONDS), so each starts where the
# long runs got to instead of rediscovering the same edges from the hand-made seeds every time.
# Two targets at a time on a 2-core machine; never while a benchmark is timed.
set -euo pipefail
bin=$(cd "$1" && pwd)
seconds=${2:-240}
corpus=$(cd "$(dirname "$0")" && pwd)/corpus
work=$(mktemp -d)
grow() {
  local t=$1
  mkdir -p "$work/$t" "$work/art_$t"
  "$bin/fuzz_$t" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 -artifact_prefix="$work/art_$t/" \
    "$work/$t" "$corpus/$t" >"$work/$t.log" 2>&1 || { tail -40 "$work/$t.log"; echo "fuzz_$t failed: see $work"; return 1; }
  cp -r "$corpus/$t" "$work/merged_$t"
  "$bin/fuzz_$t" -merge=1 "$work/merged_$t" "$work/$t" 2>&1 | grep -E 'MERGE-OUTER: [0-9]+ new files' | sed "s/^/$t: /"
  mkdir -p "$corpus/$t/found"
  # The merge added files named by their SHA-1 at the top level; the hand-made seeds keep theirs.
  for f in "$work/merged_$t"/*; do
    [ -f "$f" ] && [ ! -e "$corpus/$t/$(basename "$f")" ] && cp "$f" "$corpus/$t/found/"
  done
  echo "$t: $(ls "$corpus/$t/found" | wc -l) files in found/"
}
(grow safetensors && grow image) &
a=$!
(grow idx && grow idx_gzip) &
b=$!
wait $a && wait $b
rm -rf "$work"
