// The run's trace: one line per delivered frame, timer and fault. Its SHA-256
// is the run's fingerprint: same scenario + seed => same hash.
#pragma once

#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>

typedef struct evp_md_ctx_st EVP_MD_CTX;

namespace rcxl::sim {

class Trace {
 public:
  Trace();
  ~Trace();
  Trace(const Trace&) = delete;
  Trace& operator=(const Trace&) = delete;

  // Also write the lines to `path` (the hash does not depend on it).
  bool open_file(const std::string& path);
  // Appends `line`; `payload` is hashed too but not written (frame bytes).
  void record(std::int64_t time_ns, std::string_view line, std::string_view payload = {});
  // Hex SHA-256 of everything recorded so far (does not end the trace).
  std::string hash_hex() const;
  std::uint64_t lines() const { return lines_; }
  // Flushes the file: false if a line could not be written (disk full, EIO).
  bool file_complete();

 private:
  EVP_MD_CTX* ctx_;
  std::unique_ptr<std::ofstream> file_;
  std::uint64_t lines_ = 0;
};

}  // namespace rcxl::sim
