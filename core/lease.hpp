// Lease arithmetic, input validation and the claim decision for Idempotency-Key records.
// Times are microseconds on any fixed epoch (the PostgreSQL layer passes TimestampTz values).
#pragma once

#include <cstddef>
#include <cstdint>

namespace idem {

// Limits on caller-supplied values (bytes); keys follow the IETF Idempotency-Key draft's
// advice to bound the key, and scope + key must fit a btree index entry.
inline constexpr size_t max_key_bytes = 255;
inline constexpr size_t max_scope_bytes = 1024;
inline constexpr size_t min_fingerprint_bytes = 1;
inline constexpr size_t max_fingerprint_bytes = 64;

// An interval's length in microseconds, a month counting 30 days and a day 24 hours (as
// PostgreSQL compares intervals). Throws idem::Error 22008 on overflow.
int64_t interval_usec(int32_t months, int32_t days, int64_t usec);

// ts + usec; throws idem::Error 22008 if the result leaves the int64 range.
int64_t add_usec(int64_t ts, int64_t usec);

// Lease and expiry of a claim made at now. lease_usec must be > 0 and ttl_usec >= lease_usec,
// otherwise idem::Error 22023 (what names the offending argument, e.g. "lease").
struct ClaimTimes {
    int64_t lease_expires;
    int64_t expires;
};
ClaimTimes claim_times(int64_t now, int64_t lease_usec, int64_t ttl_usec);

// Validates a scope or key: not empty, at most max_bytes. what is "scope" or "key".
// Throws idem::Error 22023 (empty) or 22001 (too long).
void validate_name(const char *what, size_t len, size_t max_bytes);

// Validates a fingerprint's length (1..64 bytes); throws idem::Error 22023.
void validate_fingerprint(size_t len);

// Validates a fencing token given back by a caller; throws idem::Error 22023 unless > 0.
void validate_attempt(int64_t attempt);

// The attempt that follows current; throws idem::Error 22003 at INT32_MAX.
int32_t next_attempt(int32_t current);

enum class Status { Processing, Completed, Failed };

// What a claim found in an existing row.
struct RecordState {
    Status status;
    bool retryable;        // for Failed: the failure allows a new attempt
    int32_t attempt;       // the current fencing token
    bool has_lease;        // lease_expires is set (Processing rows)
    int64_t lease_expires; // when the owner's lease ends
    int64_t expires;       // end of the record's TTL
};

enum class ClaimDecision {
    Fresh,      // a finished record past its TTL counts as absent: claim it anew
    Mismatch,   // same key, different fingerprint
    Replay,     // finished: return the stored result
    InProgress, // another owner holds a live lease
    Reclaim,    // the owner's lease expired without an outcome: take over (outcome reclaimed)
    Retry,      // a retryable failure: claim the next attempt (outcome claimed)
};

// A record is live (not counted as absent) while its TTL runs; an unfinished (processing)
// record is always live: past its lease it is stuck and is reclaimed, never claimed as new.
bool record_live(const RecordState &r, int64_t now);

// The claim decision for an existing row. The fingerprint check comes before anything else
// for a live record.
ClaimDecision decide_claim(const RecordState &r, bool fingerprint_equal, int64_t now);

// The outcome name a claim reports for a decision ("claimed", "replayed", ...).
const char *outcome_name(ClaimDecision d);

// Leased queues (the inbox's queued mode and the outbox): the delay before an event whose
// attempt failed retryably is handed out again. Exponential, base * 2^(attempt - 1) capped at
// cap, with equal jitter: half of it fixed, the other half uniform from random (any 64-bit
// value), so that events that failed together do not come back together. 0 when base is 0;
// attempt < 1 counts as 1.
int64_t retry_delay_usec(int32_t attempt, int64_t base_usec, int64_t cap_usec,
                         uint64_t random) noexcept;

// Whether a failed attempt is retried: retryable, and fewer than max_attempts attempts since the
// event was queued (or requeued). max_attempts 0: no limit.
bool retry_allowed(bool retryable, int32_t attempts, int32_t max_attempts) noexcept;

} // namespace idem
