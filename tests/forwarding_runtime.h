// A Runtime that passes every call to another: tests override the one call
// they need to fail or to hold (make_strand, mostly).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "core/runtime/runtime.h"

namespace rcxl::testing {

class ForwardingRuntime : public runtime::Runtime {
 public:
  explicit ForwardingRuntime(runtime::Runtime& inner) : inner_(inner) {}
  runtime::Clock& clock() override { return inner_.clock(); }
  std::unique_ptr<runtime::Strand> make_strand(std::string name) override {
    return inner_.make_strand(std::move(name));
  }
  runtime::Transport& transport() override { return inner_.transport(); }
  std::unique_ptr<runtime::RandomSource> random(std::string_view stream) override {
    return inner_.random(stream);
  }
  runtime::LogSink& log_sink() override { return inner_.log_sink(); }
  runtime::FileSystem& file_system() override { return inner_.file_system(); }

 private:
  runtime::Runtime& inner_;
};

}  // namespace rcxl::testing
