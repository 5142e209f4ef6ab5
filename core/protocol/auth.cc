#include "core/protocol/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cctype>
#include <limits>

namespace rcxl::protocol {

namespace {

// Lowercase hex of a SHA-256-sized digest; "" for anything else (a failure).
std::string hex_of_digest(const unsigned char* digest, unsigned int length) {
  if (length != 32) return {};
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(64);
  for (unsigned int i = 0; i < length; ++i) {
    hex.push_back(kDigits[digest[i] >> 4]);
    hex.push_back(kDigits[digest[i] & 0xf]);
  }
  return hex;
}

}  // namespace

std::string hmac_sha256_hex(std::string_view key, std::string_view message) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  // A failed HMAC (no provider for SHA-256, a key it refuses) gives "", which
  // verify_auth never takes: an empty auth must not match an empty digest.
  if (key.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()) ||
      HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(message.data()), message.size(), digest,
           &length) == nullptr) {
    return {};
  }
  return hex_of_digest(digest, length);
}

std::string sha256_hex(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_Digest(data.data(), data.size(), digest, &length, EVP_sha256(), nullptr) != 1) return {};
  return hex_of_digest(digest, length);
}

bool constant_time_equal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string secret_from_file_contents(std::string_view contents) {
  std::size_t end = contents.size();
  while (end > 0 && std::isspace(static_cast<unsigned char>(contents[end - 1]))) --end;
  return std::string(contents.substr(0, end));
}

bool verify_auth(std::string_view secret, std::string_view challenge, std::string_view auth) {
  std::string lowered(auth);
  for (char& c : lowered) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const std::string expected = hmac_sha256_hex(secret, challenge);
  return !expected.empty() && constant_time_equal(expected, lowered);
}

std::string connect_proof(std::string_view secret, std::string_view challenge) {
  std::string proof(challenge.substr(0, kConnectProofChallengeChars));
  proof += hmac_sha256_hex(secret, "rcxl-rdma-connect " + std::string(challenge))
               .substr(0, kConnectProofBytes - kConnectProofChallengeChars);
  return proof;
}

bool verify_connect_proof(std::string_view secret, std::string_view challenge,
                          std::string_view proof) {
  if (proof.size() < kConnectProofBytes ||
      proof.find_first_not_of('\0', kConnectProofBytes) != std::string_view::npos ||
      challenge.size() < kConnectProofChallengeChars) {
    return false;
  }
  return constant_time_equal(connect_proof(secret, challenge), proof.substr(0, kConnectProofBytes));
}

}  // namespace rcxl::protocol
