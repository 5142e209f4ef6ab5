#include "backends/verbs/thread_runtime.h"

#include "backends/verbs/os_random.h"
#include "backends/verbs/thread_strand.h"

namespace rcxl::verbs {

ThreadRuntime::ThreadRuntime(Options options)
    : log_(options.log_level), transport_(std::make_unique<TcpTransport>()) {}

ThreadRuntime::~ThreadRuntime() = default;

std::unique_ptr<runtime::Strand> ThreadRuntime::make_strand(std::string name) {
  return std::make_unique<ThreadStrand>(std::move(name));
}

std::unique_ptr<runtime::RandomSource> ThreadRuntime::random(std::string_view /*stream*/) {
  return std::make_unique<OsRandom>();
}

}  // namespace rcxl::verbs
