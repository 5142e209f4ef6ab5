// A Runtime for the agent that passes everything to the node's own and shows
// the frames its connections carry to the InvariantMonitor, so "fresh only
// under the owner handle" (SPEC R5.2) is checked against what was on the wire,
// not against the agent's own bookkeeping.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "core/runtime/runtime.h"
#include "scenarios/invariant_monitor.h"

namespace rcxl::scenarios {

class CheckedRuntime final : public runtime::Runtime {
 public:
  CheckedRuntime(runtime::Runtime& inner, InvariantMonitor& monitor);
  ~CheckedRuntime() override;

  runtime::Clock& clock() override { return inner_.clock(); }
  std::unique_ptr<runtime::Strand> make_strand(std::string name) override {
    return inner_.make_strand(std::move(name));
  }
  runtime::Transport& transport() override;
  std::unique_ptr<runtime::RandomSource> random(std::string_view stream) override {
    return inner_.random(stream);
  }
  runtime::LogSink& log_sink() override { return inner_.log_sink(); }
  runtime::FileSystem& file_system() override { return inner_.file_system(); }

 private:
  class Transport;
  runtime::Runtime& inner_;
  std::unique_ptr<Transport> transport_;
};

}  // namespace rcxl::scenarios
