// SHA-256, HMAC-SHA256 and constant-time comparison, all through OpenSSL's EVP interface
// (no hand-written cryptography).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace idem {

using Digest = std::array<unsigned char, 32>;

// SHA-256 (FIPS 180-4) of the bytes; throws std::runtime_error if OpenSSL fails.
Digest sha256(std::string_view data);

// Incremental SHA-256 for data produced in pieces. Not copyable.
class Sha256 {
  public:
    Sha256();
    ~Sha256();
    Sha256(const Sha256 &) = delete;
    Sha256 &operator=(const Sha256 &) = delete;
    void update(const void *data, size_t len);
    void update(std::string_view s) { update(s.data(), s.size()); }
    Digest finish();
    // Starts a new digest, keeping the context (cheaper than a new object).
    void reset();

  private:
    void *ctx_; // EVP_MD_CTX
};

// HMAC-SHA256 (RFC 2104) of message under key.
Digest hmac_sha256(std::string_view key, std::string_view message);

// Compares two byte strings in time that depends only on their lengths (CRYPTO_memcmp).
bool constant_time_equal(std::string_view a, std::string_view b) noexcept;

// Lower-case hex of bytes.
std::string_view hex_lower(const unsigned char *data, size_t len, char *out);

} // namespace idem
