// UUIDv7 (RFC 9562) construction and a monotonic per-backend generator.
#include "uuid7.hpp"

#include <openssl/rand.h>

#include <chrono>
#include <stdexcept>

#include "cpp_only.hpp" // last include: core/ never sees postgres.h

namespace idem {

Uuid make_uuid_v7(uint64_t unix_ts_ms, uint16_t rand_a, uint64_t rand_b) noexcept {
    Uuid u{};
    unix_ts_ms &= 0xFFFFFFFFFFFFULL;
    for (int i = 0; i < 6; i++)
        u[i] = static_cast<unsigned char>(unix_ts_ms >> (8 * (5 - i)));
    u[6] = static_cast<unsigned char>(0x70 | ((rand_a >> 8) & 0x0F));
    u[7] = static_cast<unsigned char>(rand_a & 0xFF);
    rand_b &= 0x3FFFFFFFFFFFFFFFULL;
    u[8] = static_cast<unsigned char>(0x80 | (rand_b >> 56));
    for (int i = 9; i < 16; i++)
        u[i] = static_cast<unsigned char>(rand_b >> (8 * (15 - i)));
    return u;
}

bool is_uuid_v7(const Uuid &u) noexcept {
    return (u[6] >> 4) == 7 && (u[8] >> 6) == 2;
}

uint64_t uuid_v7_unix_ms(const Uuid &u) noexcept {
    uint64_t ms = 0;
    for (int i = 0; i < 6; i++)
        ms = (ms << 8) | u[i];
    return ms;
}

std::string uuid_to_string(const Uuid &u) {
    static const char hex[] = "0123456789abcdef";
    std::string s;
    s.reserve(36);
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            s.push_back('-');
        s.push_back(hex[u[i] >> 4]);
        s.push_back(hex[u[i] & 0xF]);
    }
    return s;
}

uint64_t unix_now_ms() noexcept {
    using namespace std::chrono;
    return static_cast<uint64_t>(
        duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count());
}

Uuid UuidV7Generator::next() {
    return next(unix_now_ms());
}

Uuid UuidV7Generator::next(uint64_t now_ms) {
    unsigned char rnd[10];
    if (RAND_bytes(rnd, sizeof rnd) != 1)
        throw std::runtime_error("OpenSSL RAND_bytes failed");
    uint64_t rand_b = 0;
    for (int i = 0; i < 8; i++)
        rand_b = (rand_b << 8) | rnd[i];
    uint16_t fresh_seq = static_cast<uint16_t>(((rnd[8] << 8) | rnd[9]) & 0x7FF);
    now_ms &= 0xFFFFFFFFFFFFULL;
    if (!started_ || now_ms > last_ms_) {
        last_ms_ = now_ms;
        seq_ = fresh_seq;
        started_ = true;
    } else if (seq_ < 0xFFF) {
        seq_++; // same millisecond, or the clock stepped back: keep the last timestamp
    } else {
        last_ms_++; // sequence exhausted: borrow the next millisecond
        seq_ = fresh_seq;
    }
    return make_uuid_v7(last_ms_, seq_, rand_b);
}

} // namespace idem
