// Lease arithmetic, input validation and the claim decision.
#include "lease.hpp"

#include "error.hpp"

#include <climits>
#include <string>

#include "cpp_only.hpp" // last include: core/ never sees postgres.h

namespace idem {

// Interval length in microseconds (30-day months, 24-hour days), overflow-checked.
int64_t interval_usec(int32_t months, int32_t days, int64_t usec) {
    constexpr int64_t usec_per_day = INT64_C(86400000000);
    __int128 total = static_cast<__int128>(months) * 30 * usec_per_day +
                     static_cast<__int128>(days) * usec_per_day + usec;
    if (total > INT64_MAX || total < INT64_MIN)
        throw Error(sqlstate::datetime_field_overflow, "interval out of range");
    return static_cast<int64_t>(total);
}

// Overflow-checked ts + usec.
int64_t add_usec(int64_t ts, int64_t usec) {
    int64_t out;
    if (__builtin_add_overflow(ts, usec, &out))
        throw Error(sqlstate::datetime_field_overflow, "timestamp out of range",
                    "The lease or TTL is too long to be added to the current time.");
    return out;
}

namespace {
// A duration for a message: "30 s", "1.5 s".
std::string seconds_text(int64_t usec) {
    constexpr int64_t usec_per_sec = 1000000;
    std::string sign = usec < 0 ? "-" : "";
    uint64_t u = usec < 0 ? 0 - static_cast<uint64_t>(usec) : static_cast<uint64_t>(usec);
    std::string out = sign + std::to_string(u / usec_per_sec);
    if (uint64_t frac = u % usec_per_sec) {
        std::string f = std::to_string(frac + usec_per_sec).substr(1); // six digits
        out += "." + f.substr(0, f.find_last_not_of('0') + 1);
    }
    return out + " s";
}
} // namespace

// Lease and expiry of a claim; validates lease > 0 and ttl >= lease. The settings are not
// checked against each other when they are set (they may be set in any order, from different
// places): a claim that takes both and finds default_ttl below default_lease fails here, and
// the hint names both.
ClaimTimes claim_times(int64_t now, int64_t lease_usec, int64_t ttl_usec) {
    if (lease_usec <= 0)
        throw Error(sqlstate::invalid_parameter_value, "lease must be positive",
                    "A lease of zero or less would let any duplicate take the operation over "
                    "at once.",
                    "Pass a lease such as interval '30 seconds', or NULL for "
                    "idempotency.default_lease.");
    if (ttl_usec < lease_usec)
        throw Error(sqlstate::invalid_parameter_value, "ttl must not be shorter than the lease",
                    "The ttl is " + seconds_text(ttl_usec) + " and the lease " +
                        seconds_text(lease_usec) +
                        ": the record would expire while its owner still holds the lease.",
                    "Pass a ttl of at least the lease. A NULL ttl is idempotency.default_ttl and "
                    "a NULL lease idempotency.default_lease: keep default_ttl at least "
                    "default_lease.");
    return {add_usec(now, lease_usec), add_usec(now, ttl_usec)};
}

// Scope/key validation: non-empty and bounded.
void validate_name(const char *what, size_t len, size_t max_bytes) {
    if (len == 0) {
        if (std::string(what) == "key")
            throw Error(sqlstate::invalid_parameter_value, "key must not be empty", {},
                        "A request without an Idempotency-Key must be rejected (HTTP 400), not "
                        "claimed with an empty key.");
        throw Error(sqlstate::invalid_parameter_value, std::string(what) + " must not be empty", {},
                    "Use a namespace such as tenant + operation, e.g. 'user:482/create_order'.");
    }
    if (len > max_bytes)
        throw Error(sqlstate::string_data_right_truncation, std::string(what) + " is too long",
                    std::string(what) + " has " + std::to_string(len) + " bytes; the maximum is " +
                        std::to_string(max_bytes) + " bytes.");
}

// Fingerprint length validation (1..64 bytes).
void validate_fingerprint(size_t len) {
    if (len < min_fingerprint_bytes || len > max_fingerprint_bytes)
        throw Error(sqlstate::invalid_parameter_value, "fingerprint must have 1 to 64 bytes",
                    "The fingerprint has " + std::to_string(len) + " bytes.",
                    "Use idem_fingerprint(request_body), a 32-byte SHA-256, or NULL.");
}

// A fencing token handed back by a caller must be positive.
void validate_attempt(int64_t attempt) {
    if (attempt <= 0)
        throw Error(sqlstate::invalid_parameter_value, "attempt must be positive",
                    "attempt is the fencing token idem_claim returned (1, 2, ...).");
}

// The next fencing token.
int32_t next_attempt(int32_t current) {
    if (current >= INT32_MAX)
        throw Error(sqlstate::numeric_value_out_of_range, "attempt counter exhausted");
    return current + 1;
}

// A finished record is live while its TTL runs. An unfinished one never expires by TTL: its
// outcome is unknown until it is finished or taken over (reclaimed), whatever its age.
bool record_live(const RecordState &r, int64_t now) {
    return r.status == Status::Processing || r.expires > now;
}

// Decision table of idem_claim for an existing row.
ClaimDecision decide_claim(const RecordState &r, bool fingerprint_equal, int64_t now) {
    if (!record_live(r, now))
        return ClaimDecision::Fresh;
    if (!fingerprint_equal)
        return ClaimDecision::Mismatch;
    switch (r.status) {
    case Status::Completed:
        return ClaimDecision::Replay;
    case Status::Failed:
        return r.retryable ? ClaimDecision::Retry : ClaimDecision::Replay;
    case Status::Processing:
        break;
    }
    if (r.has_lease && r.lease_expires > now)
        return ClaimDecision::InProgress;
    return ClaimDecision::Reclaim;
}

// Outcome strings of idem_claim.
const char *outcome_name(ClaimDecision d) {
    switch (d) {
    case ClaimDecision::Fresh:
    case ClaimDecision::Retry:
        return "claimed";
    case ClaimDecision::Mismatch:
        return "mismatch";
    case ClaimDecision::Replay:
        return "replayed";
    case ClaimDecision::InProgress:
        return "in_progress";
    case ClaimDecision::Reclaim:
        return "reclaimed";
    }
    return "claimed";
}

// Exponential backoff with equal jitter, overflow-free (the doubling stops at the cap).
int64_t retry_delay_usec(int32_t attempt, int64_t base_usec, int64_t cap_usec,
                         uint64_t random) noexcept {
    if (base_usec <= 0 || cap_usec <= 0)
        return 0;
    int64_t d = base_usec < cap_usec ? base_usec : cap_usec;
    for (int32_t n = 1; n < attempt && d < cap_usec; n++)
        d = d > cap_usec / 2 ? cap_usec : d * 2;
    int64_t fixed = d / 2;
    uint64_t span = static_cast<uint64_t>(d - fixed) + 1; // the jitter: 0 .. d - fixed
    return fixed + static_cast<int64_t>(random % span);
}

// Retryable and below the attempt budget (0: none).
bool retry_allowed(bool retryable, int32_t attempts, int32_t max_attempts) noexcept {
    return retryable && (max_attempts == 0 || attempts < max_attempts);
}

} // namespace idem
