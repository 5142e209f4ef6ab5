#!/usr/bin/env bash
# LayeringCheck.CatchesPlantedViolations: runs ci/check-layering on tiny fake
# trees, one planted violation per rule, and on a clean tree full of near misses.
# Usage: layering_check_test.sh PATH/TO/check-layering
set -uo pipefail
CHECK=${1:?usage: $0 PATH/TO/check-layering}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
# The system interpreter directly: version-manager shims cost more than the check.
PYTHON=python3
[ -x /usr/bin/python3 ] && PYTHON=/usr/bin/python3

check() { "$PYTHON" "$CHECK" "$@"; }

# Cases run in parallel; each failure leaves a note in $WORK/failures/.
mkdir -p "$WORK/failures"
fail() {
  echo "FAIL: $*" | tee "$(mktemp "$WORK/failures/XXXXXX")"
}

# A clean tree: things that look like violations but are not.
make_clean_tree() {
  local root=$1
  mkdir -p "$root/core/runtime" "$root/core/agent" "$root/backends/sim" "$root/backends/verbs"
  cat >"$root/core/runtime/ports.h" <<'EOF'
// The thread runtime maps a strand to std::thread; core never calls sleep_for,
// steady_clock, socket(), connect(), rand(), mmap, dlopen, getenv or fopen.
/* A block comment: std::ifstream, ibv_post_send(), #include <sys/socket.h> */
#pragma once
#include <functional>
#include <string>
#include <unordered_map>
class Transport {
 public:
  virtual void connect(const std::string& address, int strand, std::function<void()> cb) = 0;
  virtual bool bind(int port);
  int* socket(int a, int b, int c);
};
inline const char* kHelp = "call socket(AF_INET, SOCK_STREAM, 0) and std::thread yourself";
EOF
  cat >"$root/core/agent/agent.cc" <<'EOF'
#include <functional>
#include <map>
#include <unordered_map>
#include "core/runtime/ports.h"
class Agent {
  void start(Transport& t) {
    t.connect("a:1", 0, [this] { accept(1); });
    auto f = std::bind(&Agent::accept, this, 2);
    for (const auto& [k, v] : ordered_) (void)k;
    auto it = index_.find(3);
    if (it == index_.end()) return;
  }
  void accept(int fd);
  std::map<int, int> ordered_;
  std::unordered_map<int, int> index_;  // looked up only
};
void Agent::accept(int) {}
int rdma_ops_done = 0;
int operand = 1'000;
EOF
  cat >"$root/backends/sim/pool.h" <<'EOF'
#pragma once
#include <unordered_map>
struct Pool {
  void drop();
  std::unordered_map<int, int> pages_;
  std::unordered_map<int, int> cache_;  // layering: lookup-only
};
EOF
  cat >"$root/backends/sim/pool.cc" <<'EOF'
#include "backends/sim/pool.h"
void Pool::drop() {
  // layering: order-independent (a pure filter)
  std::erase_if(pages_, [](const auto& kv) { return kv.first > 3; });
  for (auto& kv : cache_) kv.second = 0;
  auto hit = pages_.find(1);
  (void)hit;
}
EOF
  # Outside core and backends/sim anything goes.
  cat >"$root/backends/verbs/os.cc" <<'EOF'
#include <sys/socket.h>
#include <thread>
#include <unordered_map>
std::unordered_map<int, int> fds;
void f() { std::thread t([] {}); t.join(); for (auto& kv : fds) (void)kv; socket(1, 2, 3); }
EOF
}

# plant NAME RELPATH RULE LINE CONTENT: expects exit 1 and "RELPATH:LINE: [RULE]".
plant() { plant_case "$@" & }
plant_case() {
  local name=$1 rel=$2 rule=$3 line=$4 content=$5
  local root="$WORK/$name"
  make_clean_tree "$root"
  mkdir -p "$(dirname "$root/$rel")"
  printf '%s\n' "$content" >"$root/$rel"
  local out
  out=$(check "$root" 2>&1)
  local rc=$?
  if [ "$rc" -ne 1 ]; then
    fail "$name: exit $rc, want 1. Output: $out"
  elif ! grep -qF "$rel:$line: [$rule]" <<<"$out"; then
    fail "$name: no '$rel:$line: [$rule]' in: $out"
  fi
}

# The clean tree passes.
make_clean_tree "$WORK/clean"
out=$(check "$WORK/clean" 2>&1) || fail "clean tree: exit $?, output: $out"

# A bad root is a usage error, not a pass.
check "$WORK/no-such-dir" >/dev/null 2>&1
[ $? -eq 2 ] || fail "missing root: want exit 2"

H='#include <string>'
plant include-backends core/x.cc core-include 2 "$H
#include \"backends/sim/sim_world.h\""
plant include-devices core/agent/y.h core-include 1 '#include "devices/cxl_ssd_model/cxl_ssd_device.h"'
plant include-scenarios core/y.cc core-include 1 '#include "scenarios/engine.h"'
plant include-apps core/y.cc core-include 1 '#include <apps/rcxl-sim/main.h>'
plant std-thread core/t.cc core-os-call 2 "$H
void f() { std::thread t([] {}); }"
plant std-jthread core/t.cc core-os-call 1 'std::jthread worker;'
plant thread-header core/t.h core-os-call 1 '#include <thread>'
plant sleep-for core/s.cc core-os-call 1 'void f() { std::this_thread::sleep_for(1ms); }'
plant sleep-until core/s.cc core-os-call 1 'void f(T t) { sleep_until(t); }'
plant usleep core/s.cc core-os-call 1 'void f() { usleep(10); }'
plant nanosleep core/s.cc core-os-call 1 'void f() { nanosleep(&ts, nullptr); }'
plant steady-clock core/c.cc core-os-call 1 'auto t = std::chrono::steady_clock::now();'
plant system-clock core/c.cc core-os-call 1 'auto t = std::chrono::system_clock::now();'
plant hires-clock core/c.cc core-os-call 1 'using C = std::chrono::high_resolution_clock;'
plant socket-call core/n.cc core-os-call 1 'void f() { int fd = socket(2, 1, 0); }'
plant connect-call core/n.cc core-os-call 1 'void f(int fd, const void* a) { ::connect(fd, a, 16); }'
plant bind-call core/n.cc core-os-call 1 'int f(int fd, void* a, int n) { return bind(fd, a, n); }'
plant accept-call core/n.cc core-os-call 1 'void f(int fd) { int c = accept(fd, nullptr, nullptr); }'
plant sockaddr core/n.cc core-os-call 1 'void f() { sockaddr_in a{}; }'
plant socket-header core/n.h core-os-call 1 '#include <sys/socket.h>'
plant netinet-header core/n.h core-os-call 1 '#include <netinet/tcp.h>'
plant ibv-call core/v.cc core-os-call 1 'void f() { ibv_get_device_list(nullptr); }'
plant rdma-call core/v.cc core-os-call 1 'void f() { rdma_create_event_channel(); }'
plant infiniband-header core/v.h core-os-call 1 '#include <infiniband/verbs.h>'
plant rand-call core/r.cc core-os-call 1 'int f() { return rand() % 6; }'
plant srand-call core/r.cc core-os-call 1 'void f() { srand(42); }'
plant mmap-call core/m.cc core-os-call 1 'void* f() { return mmap(nullptr, 4096, 3, 34, -1, 0); }'
plant dlopen-call core/d.cc core-os-call 1 'void* f() { return dlopen("x.so", 2); }'
plant getenv-call core/e.cc core-os-call 1 'const char* f() { return std::getenv("HOME"); }'
plant fopen-call core/f.cc core-os-call 1 'void f() { FILE* x = fopen("a", "r"); }'
plant ifstream core/f.cc core-os-call 1 'void f() { std::ifstream in("a"); }'
plant ofstream core/f.cc core-os-call 1 'void f() { std::ofstream out("a"); }'
plant fstream core/f.cc core-os-call 1 'void f() { std::fstream io("a"); }'
plant range-for-core core/u.cc unordered-iter 3 '#include <unordered_map>
std::unordered_map<int, int> counts;
void f() { for (const auto& [k, v] : counts) (void)k; }'
plant begin-core core/u.cc unordered-iter 3 '#include <unordered_set>
std::unordered_set<int> seen;
auto first = seen.begin();'
plant member-in-header backends/sim/pool.cc unordered-iter 3 '#include "backends/sim/pool.h"
void Pool::drop() {
  for (auto& [page, v] : pages_) (void)page;
}'
plant erase-if-unmarked backends/sim/pool.cc unordered-iter 2 '#include "backends/sim/pool.h"
void Pool::drop() { std::erase_if(pages_, [](const auto&) { return true; }); }'
plant alias core/u.cc unordered-iter 3 'using Index = std::unordered_map<int, int>;
Index index;
void f() { for (auto& kv : index) (void)kv; }'

wait
failures=$(find "$WORK/failures" -type f | wc -l)
if [ "$failures" -ne 0 ]; then
  echo "$failures case(s) failed"
  exit 1
fi
echo "all planted violations caught; the clean tree passes"
