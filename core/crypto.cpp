// SHA-256, HMAC-SHA256 and constant-time comparison through OpenSSL EVP.
#include "crypto.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <stdexcept>

#include "cpp_only.hpp" // last include: core/ never sees postgres.h

namespace idem {

namespace {

// SHA-256, fetched once: EVP_sha256() makes OpenSSL 3 look the algorithm up again in every
// digest it starts.
const EVP_MD *sha256_md() {
#if OPENSSL_VERSION_NUMBER >= 0x30000000L
    static const EVP_MD *const md = [] {
        const EVP_MD *m = EVP_MD_fetch(nullptr, "SHA256", nullptr);
        return m != nullptr ? m : EVP_sha256();
    }();
    return md;
#else
    return EVP_sha256();
#endif
}

// A context holding an empty SHA-256 digest, set up once: copying it into a context starts a
// new digest faster than EVP_DigestInit_ex (measured in bench/RESULTS.md; both free and
// allocate the provider's state). Never freed; only read. nullptr if OpenSSL could not set it
// up (an allocation failure on first use): that answer is kept, and every reset then throws.
const EVP_MD_CTX *sha256_start() {
    static const EVP_MD_CTX *const start = [] {
        EVP_MD_CTX *c = EVP_MD_CTX_new();
        if (c != nullptr && EVP_DigestInit_ex(c, sha256_md(), nullptr) != 1) {
            EVP_MD_CTX_free(c);
            c = nullptr;
        }
        return c;
    }();
    return start;
}

} // namespace

// One-shot SHA-256 of data.
Digest sha256(std::string_view data) {
    Digest out{};
    unsigned int len = 0;
    if (EVP_Digest(data.data(), data.size(), out.data(), &len, sha256_md(), nullptr) != 1 ||
        len != out.size())
        throw std::runtime_error("OpenSSL SHA-256 failed");
    return out;
}

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
    if (ctx_ == nullptr ||
        EVP_DigestInit_ex(static_cast<EVP_MD_CTX *>(ctx_), sha256_md(), nullptr) != 1) {
        EVP_MD_CTX_free(static_cast<EVP_MD_CTX *>(ctx_));
        throw std::runtime_error("OpenSSL SHA-256 init failed");
    }
}

Sha256::~Sha256() {
    EVP_MD_CTX_free(static_cast<EVP_MD_CTX *>(ctx_));
}

// Feeds more bytes into the running digest.
void Sha256::update(const void *data, size_t len) {
    if (len > 0 && EVP_DigestUpdate(static_cast<EVP_MD_CTX *>(ctx_), data, len) != 1)
        throw std::runtime_error("OpenSSL SHA-256 update failed");
}

// Returns the digest; the object must not be updated afterwards.
Digest Sha256::finish() {
    Digest out{};
    unsigned int len = 0;
    if (EVP_DigestFinal_ex(static_cast<EVP_MD_CTX *>(ctx_), out.data(), &len) != 1 ||
        len != out.size())
        throw std::runtime_error("OpenSSL SHA-256 final failed");
    return out;
}

// Starts over with an empty message.
void Sha256::reset() {
    const EVP_MD_CTX *start = sha256_start();
    if (start == nullptr || EVP_MD_CTX_copy_ex(static_cast<EVP_MD_CTX *>(ctx_), start) != 1)
        throw std::runtime_error("OpenSSL SHA-256 init failed");
}

// HMAC-SHA256 of message under key (RFC 2104).
Digest hmac_sha256(std::string_view key, std::string_view message) {
    Digest out{};
    unsigned int len = 0;
    static const unsigned char empty = 0;
    const void *k = key.empty() ? static_cast<const void *>(&empty) : key.data();
    if (HMAC(EVP_sha256(), k, static_cast<int>(key.size()),
             reinterpret_cast<const unsigned char *>(message.data()), message.size(), out.data(),
             &len) == nullptr ||
        len != out.size())
        throw std::runtime_error("OpenSSL HMAC-SHA256 failed");
    return out;
}

// Constant-time equality: the running time depends on the lengths only.
bool constant_time_equal(std::string_view a, std::string_view b) noexcept {
    if (a.size() != b.size())
        return false;
    if (a.empty())
        return true;
    return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

// Writes 2*len lower-case hex digits to out and returns them.
std::string_view hex_lower(const unsigned char *data, size_t len, char *out) {
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < len; i++) {
        out[2 * i] = digits[data[i] >> 4];
        out[2 * i + 1] = digits[data[i] & 0xf];
    }
    return {out, 2 * len};
}

} // namespace idem
