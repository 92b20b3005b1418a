// UUID version 7 (RFC 9562 §5.7): 48-bit Unix milliseconds, 12-bit rand_a used as a
// per-millisecond sequence (RFC 9562 §6.2 method 1, "fixed-length dedicated counter"), 62-bit
// random rand_b from OpenSSL RAND_bytes. Server-independent.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace idem {

using Uuid = std::array<unsigned char, 16>;

// The UUIDv7 with exactly these fields (version 7, variant 0b10); unix_ts_ms is truncated to
// 48 bits, rand_a to 12 bits and rand_b to 62 bits. Deterministic, for tests and replays.
Uuid make_uuid_v7(uint64_t unix_ts_ms, uint16_t rand_a, uint64_t rand_b) noexcept;

// True when u has version 7 and the RFC 9562 variant (0b10).
bool is_uuid_v7(const Uuid &u) noexcept;

// The 48-bit Unix millisecond timestamp of a UUIDv7.
uint64_t uuid_v7_unix_ms(const Uuid &u) noexcept;

// Canonical lower-case 8-4-4-4-12 text.
std::string uuid_to_string(const Uuid &u);

// Generates strictly increasing UUIDv7s: within one millisecond, and when the clock steps
// back, the previous timestamp is kept and the 12-bit sequence in rand_a is incremented; when
// the sequence is exhausted the timestamp is advanced by 1 ms (RFC 9562 §6.2). A new
// millisecond starts the sequence at a random value below 0x800, leaving at least 2048 values.
// Not thread-safe (one generator per backend).
class UuidV7Generator {
  public:
    // Uses the system clock.
    Uuid next();
    // Uses the given Unix time in milliseconds (tests inject clock steps through this).
    Uuid next(uint64_t now_unix_ms);
    uint64_t last_unix_ms() const noexcept { return last_ms_; }

  private:
    uint64_t last_ms_ = 0;
    uint16_t seq_ = 0;
    bool started_ = false;
};

// Current Unix time in milliseconds (system clock).
uint64_t unix_now_ms() noexcept;

} // namespace idem
