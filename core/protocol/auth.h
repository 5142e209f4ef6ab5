// The hello's challenge-response (PROTOCOL.md "Handshake"): HMAC-SHA256 over
// the 64 hex characters of the challenge, keyed by the shared secret.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace rcxl::protocol {

// The auth_failed message: what a person reading it should check.
inline constexpr char kWrongAuth[] =
    "wrong auth: the hello's HMAC does not match this service's secret; use the same secret "
    "file as the service's --auth-secret-file";

// Lowercase hex of HMAC-SHA256(key, message).
std::string hmac_sha256_hex(std::string_view key, std::string_view message);
// Lowercase hex of SHA-256(data): a capability kept by its digest is looked
// up in time that tells nothing of how close a guess came.
std::string sha256_hex(std::string_view data);

// Equality that takes the same time wherever the first difference is.
bool constant_time_equal(std::string_view a, std::string_view b);

// A secret file's contents with trailing whitespace removed.
std::string secret_from_file_contents(std::string_view contents);

// True when `auth` answers `challenge` under `secret` (hex compared case-insensitively).
bool verify_auth(std::string_view secret, std::string_view challenge, std::string_view auth);

// The RDMA connect proof (docs/agent.md, *RDMA connect proofs*): the first 16
// hex characters of a control connection's challenge, then the first 32 of
// HMAC-SHA256(secret, "rcxl-rdma-connect " + challenge): 48 bytes, within
// rdma_cm's 56 of private data.
inline constexpr std::size_t kConnectProofChallengeChars = 16;
inline constexpr std::size_t kConnectProofBytes = 48;
std::string connect_proof(std::string_view secret, std::string_view challenge);
// True when `proof` (rdma_cm's private data: zeros may follow the 48 bytes)
// is the proof of `challenge` under `secret`.
bool verify_connect_proof(std::string_view secret, std::string_view challenge,
                          std::string_view proof);

}  // namespace rcxl::protocol
