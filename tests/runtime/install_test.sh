#!/usr/bin/env bash
# `cmake --install` with prefix /usr into a scratch root: every path the
# systemd unit names (ExecStart, EnvironmentFile, Documentation) is there.
set -euo pipefail
BUILD=${1:?usage: install_test.sh BUILD_DIR}
ROOT=$(mktemp -d /tmp/rcxl-install-XXXXXX)
trap 'rm -rf "$ROOT"' EXIT
DESTDIR=$ROOT cmake --install "$BUILD" --prefix /usr >/dev/null
unit=$ROOT/usr/lib/systemd/system/rcxl-agent.service
[ -f "$unit" ] || { echo "no unit at /usr/lib/systemd/system"; exit 1; }
fail=0
for path in $(sed -n -e 's/^ExecStart=\([^ ]*\).*/\1/p' -e 's/^EnvironmentFile=-\{0,1\}\(.*\)/\1/p' \
                -e 's|^Documentation=file://\(.*\)|\1|p' "$unit"); do
  [ -e "$ROOT$path" ] || { echo "the unit names $path, which the install does not put there"; fail=1; }
done
for bin in rcxl-agent rcxl-directory rcxl-kv rcxl-sim; do
  [ -x "$ROOT/usr/bin/$bin" ] || { echo "no /usr/bin/$bin"; fail=1; }
done
"$ROOT/usr/bin/rcxl-agent" --version >/dev/null || { echo "the installed rcxl-agent does not run"; fail=1; }
# A plugin author's C file compiles against the installed header alone.
printf '#include <rcxl/c_abi.h>\nint main(void) { return RCXL_REGION_EXTENSION_ABI_VERSION != 1u; }\n' \
  > "$ROOT/plugin.c"
if ! cc -std=c99 -Wall -Werror -I"$ROOT/usr/include" -c "$ROOT/plugin.c" -o "$ROOT/plugin.o"; then
  echo "the installed include/rcxl/c_abi.h does not compile as C"; fail=1
fi
# An upgrade keeps the admin's settings.
echo "RCXL_AGENT_MEMORY=file:/srv/pool:64G" >> "$ROOT/etc/default/rcxl-agent"
DESTDIR=$ROOT cmake --install "$BUILD" --prefix /usr >/dev/null
grep -q "^RCXL_AGENT_MEMORY=file:/srv/pool:64G$" "$ROOT/etc/default/rcxl-agent" ||
  { echo "a second install overwrote /etc/default/rcxl-agent"; fail=1; }
exit $fail
