#!/usr/bin/env bash
# ci/check-format finds a file that drifted from .clang-format, passes once it is
# formatted, and fails when clang-format cannot read the style.
set -u
check=$1
src=$(cd "$(dirname "$check")/.." && pwd)
command -v clang-format >/dev/null || { echo "skipped: clang-format is not installed"; exit 77; }
repo=$(mktemp -d)
trap 'rm -rf "$repo"' EXIT
cp "$src/.clang-format" "$repo/"
printf 'int   f( int a ){return a+1;}\n' > "$repo/bad.cc"
git -C "$repo" init -q && git -C "$repo" add -A || exit 1
out=$("$check" "$repo"); code=$?
echo "$out"
[ $code -eq 1 ] && echo "$out" | grep -q "bad.cc" || { echo "FAIL: drift not caught"; exit 1; }
clang-format -i "$repo/bad.cc"
"$check" "$repo" || { echo "FAIL: formatted file refused"; exit 1; }
# A .clang-format clang-format cannot read checks nothing: that fails too (session 30).
printf 'NoSuchKey: 1\n' >> "$repo/.clang-format"
out=$("$check" "$repo"); code=$?
echo "$out"
[ $code -eq 1 ] && echo "$out" | grep -q "clang-format failed" || { echo "FAIL: broken .clang-format passed"; exit 1; }
echo "ok"
