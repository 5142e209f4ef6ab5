#include "backends/sim/trace.h"

#include <openssl/evp.h>

#include <string>

namespace rcxl::sim {

Trace::Trace() : ctx_(EVP_MD_CTX_new()) {
  EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr);
}

Trace::~Trace() {
  EVP_MD_CTX_free(ctx_);
}

bool Trace::open_file(const std::string& path) {
  file_ = std::make_unique<std::ofstream>(path, std::ios::trunc);
  return file_->good();
}

bool Trace::file_complete() {
  if (!file_) return true;
  file_->flush();
  return file_->good();
}

void Trace::record(std::int64_t time_ns, std::string_view line, std::string_view payload) {
  std::string text = std::to_string(time_ns);
  text.push_back(' ');
  text.append(line);
  text.push_back('\n');
  EVP_DigestUpdate(ctx_, text.data(), text.size());
  if (!payload.empty()) EVP_DigestUpdate(ctx_, payload.data(), payload.size());
  if (file_) *file_ << text;
  ++lines_;
}

std::string Trace::hash_hex() const {
  EVP_MD_CTX* copy = EVP_MD_CTX_new();
  EVP_MD_CTX_copy_ex(copy, ctx_);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(copy, digest, &len);
  EVP_MD_CTX_free(copy);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < len; ++i) {
    out.push_back(kHex[digest[i] >> 4]);
    out.push_back(kHex[digest[i] & 0xf]);
  }
  return out;
}

}  // namespace rcxl::sim
