#!/bin/sh
# rcxl_sim_exits.sh EXE CODE SAYS ARGS...: `EXE ARGS...` exits CODE and prints
# SAYS; exit 2 (bad input) must be one line on stderr and nothing run (no stdout).
exe=$1 want=$2 says=$3
shift 3
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
"$exe" "$@" >"$dir/out" 2>"$dir/err"
got=$?
cat "$dir/err"
[ "$got" -eq "$want" ] || { echo "FAIL: exit $got, wanted $want"; exit 1; }
cat "$dir/out" "$dir/err" | grep -qF -- "$says" || { echo "FAIL: does not say: $says"; exit 1; }
if [ "$want" -eq 2 ]; then
  [ "$(wc -l <"$dir/err")" -eq 1 ] || { echo "FAIL: stderr is not one line"; exit 1; }
  [ ! -s "$dir/out" ] || { echo "FAIL: something ran:"; cat "$dir/out"; exit 1; }
fi
exit 0
