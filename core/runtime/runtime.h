// The Env of rcxl (after LevelDB's Env): everything core may ask of the world.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "core/runtime/clock.h"
#include "core/runtime/file_system.h"
#include "core/runtime/log.h"
#include "core/runtime/random.h"
#include "core/runtime/strand.h"
#include "core/runtime/transport.h"

namespace rcxl::runtime {

class Runtime {
 public:
  virtual ~Runtime() = default;
  virtual Clock& clock() = 0;
  // Thread runtime: a new OS thread; sim: a virtual thread on the event loop.
  virtual std::unique_ptr<Strand> make_strand(std::string name) = 0;
  virtual Transport& transport() = 0;
  // A named random stream (sim: forked from the seed by name).
  virtual std::unique_ptr<RandomSource> random(std::string_view stream) = 0;
  virtual LogSink& log_sink() = 0;
  virtual FileSystem& file_system() = 0;
};

}  // namespace rcxl::runtime
