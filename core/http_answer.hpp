// The HTTP answer of a claim's outcome (docs/records.md "The HTTP answer"): what a client sends
// instead of running its handler, so that no client computes the status, Retry-After or
// Idempotent-Replayed itself. Plain data in, plain data out; src/http_answer.cpp builds the
// jsonb headers and the bytea body from it.
#pragma once

#include <cstdint>
#include <string_view>

namespace idem::http {

// What the outcome asks of the client.
enum class Kind {
    RunHandler, // claimed, reclaimed (or nothing stored): run the handler, no answer yet
    Replay,     // replayed: the stored result
    Busy,       // in_progress: 409 with Retry-After
    Mismatch,   // mismatch: 422
};

// The kind of an idem_claim outcome; an unknown or empty one is RunHandler's NULL answer.
Kind kind_of(std::string_view outcome) noexcept;

// Whole seconds from now until the lease ends, rounded up, at least 1 (1 without a lease: a
// claim with wait => false found the record held by an unfinished transaction). Microseconds.
int64_t retry_after_seconds(bool has_lease, int64_t lease_expires_us, int64_t now_us) noexcept;

struct Answer {
    bool has_answer;     // false: run the handler (status, headers, body are NULL)
    int status;          // the HTTP status
    int64_t retry_after; // > 0: a Retry-After header of that many seconds
    const char *problem; // non-null: the body, an RFC 9457 problem+json document
    bool replay_headers; // the stored headers, then Idempotent-Replayed: true
    bool json_type;      // add Content-Type: application/json (a jsonb response replayed
                         // without a stored Content-Type)
};

// The stored result as the replay sees it.
struct Stored {
    bool has_status;
    int status;
    bool has_body;         // response_body (exact bytes) was stored
    bool has_json;         // response (jsonb) was stored
    bool has_content_type; // the stored headers name Content-Type (any case)
    bool has_lease;
    int64_t lease_expires_us;
};

Answer answer(Kind kind, const Stored &stored, int64_t now_us) noexcept;

// ASCII case-insensitive equality of two header names.
bool header_name_equal(std::string_view a, std::string_view b) noexcept;

// The header names answer() writes.
inline constexpr std::string_view REPLAYED_HEADER = "Idempotent-Replayed";
inline constexpr std::string_view CONTENT_TYPE = "Content-Type";
inline constexpr std::string_view RETRY_AFTER = "Retry-After";
inline constexpr std::string_view PROBLEM_TYPE = "application/problem+json";
inline constexpr std::string_view JSON_TYPE = "application/json";

} // namespace idem::http
