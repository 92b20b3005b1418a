// Unit tests of the lease arithmetic, validation and claim decision (core/lease.hpp).
#include "error.hpp"
#include "lease.hpp"

#include <gtest/gtest.h>

#include <climits>
#include <string>

using namespace idem;

namespace {
constexpr int64_t SEC = 1000000;

// The SQLSTATE of the idem::Error that f throws, or "" when it does not throw one.
template <typename F> std::string sqlstate_of(F f) {
    try {
        f();
    } catch (const Error &e) {
        return e.sqlstate();
    }
    return "";
}

RecordState processing(int32_t attempt, int64_t lease_expires, int64_t expires) {
    return {Status::Processing, false, attempt, true, lease_expires, expires};
}
} // namespace

TEST(Interval, CountsMonthsAsThirtyDays) {
    EXPECT_EQ(interval_usec(0, 0, 5 * SEC), 5 * SEC);
    EXPECT_EQ(interval_usec(0, 1, 0), 86400 * SEC);
    EXPECT_EQ(interval_usec(1, 0, 0), 30 * 86400 * SEC);
    EXPECT_EQ(interval_usec(0, -1, 3600 * SEC), -23 * 3600 * SEC);
}

TEST(Interval, OverflowIsAnError) {
    EXPECT_EQ(sqlstate_of([] { interval_usec(INT32_MAX, INT32_MAX, INT64_MAX); }), "22008");
    EXPECT_EQ(sqlstate_of([] { add_usec(INT64_MAX - 5, 10); }), "22008");
    EXPECT_EQ(add_usec(10, -20), -10);
}

TEST(ClaimTimes, ValidatesLeaseAndTtl) {
    ClaimTimes t = claim_times(1000, 60 * SEC, 3600 * SEC);
    EXPECT_EQ(t.lease_expires, 1000 + 60 * SEC);
    EXPECT_EQ(t.expires, 1000 + 3600 * SEC);
    EXPECT_EQ(claim_times(0, SEC, SEC).expires, SEC); // ttl == lease is allowed
    EXPECT_EQ(sqlstate_of([] { claim_times(0, 0, SEC); }), "22023");
    EXPECT_EQ(sqlstate_of([] { claim_times(0, -SEC, SEC); }), "22023");
    EXPECT_EQ(sqlstate_of([] { claim_times(0, 2 * SEC, SEC); }), "22023");
    EXPECT_EQ(sqlstate_of([] { claim_times(INT64_MAX - SEC, SEC, 2 * SEC); }), "22008");
}

// The error names both durations and, for claims that take both from the settings, both
// settings (idempotency.default_ttl below idempotency.default_lease fails every such claim).
TEST(ClaimTimes, TtlShorterThanLeaseSaysBoth) {
    try {
        claim_times(0, 60 * SEC, 30 * SEC + SEC / 2);
        FAIL() << "no error";
    } catch (const Error &e) {
        EXPECT_EQ(e.detail(), "The ttl is 30.5 s and the lease 60 s: the record would expire "
                              "while its owner still holds the lease.");
        EXPECT_NE(e.hint().find("idempotency.default_ttl"), std::string::npos);
        EXPECT_NE(e.hint().find("idempotency.default_lease"), std::string::npos);
    }
    try {
        claim_times(0, SEC, -2 * SEC);
        FAIL() << "no error";
    } catch (const Error &e) {
        EXPECT_EQ(e.detail().rfind("The ttl is -2 s and the lease 1 s: ", 0), 0u);
    }
}

TEST(Validation, NamesFingerprintsAttempts) {
    EXPECT_EQ(sqlstate_of([] { validate_name("key", 0, max_key_bytes); }), "22023");
    EXPECT_EQ(sqlstate_of([] { validate_name("key", 256, max_key_bytes); }), "22001");
    EXPECT_EQ(sqlstate_of([] { validate_name("key", 255, max_key_bytes); }), "");
    EXPECT_EQ(sqlstate_of([] { validate_name("scope", 1025, max_scope_bytes); }), "22001");
    EXPECT_EQ(sqlstate_of([] { validate_fingerprint(0); }), "22023");
    EXPECT_EQ(sqlstate_of([] { validate_fingerprint(65); }), "22023");
    EXPECT_EQ(sqlstate_of([] { validate_fingerprint(1); }), "");
    EXPECT_EQ(sqlstate_of([] { validate_fingerprint(64); }), "");
    EXPECT_EQ(sqlstate_of([] { validate_attempt(0); }), "22023");
    EXPECT_EQ(sqlstate_of([] { validate_attempt(-3); }), "22023");
    EXPECT_EQ(sqlstate_of([] { validate_attempt(1); }), "");
    EXPECT_EQ(next_attempt(1), 2);
    EXPECT_EQ(sqlstate_of([] { next_attempt(INT32_MAX); }), "22003");
}

TEST(DecideClaim, MismatchComesFirstInEveryLiveState) {
    const int64_t now = 100 * SEC;
    EXPECT_EQ(decide_claim(processing(1, now + SEC, now + 10 * SEC), false, now),
              ClaimDecision::Mismatch);
    EXPECT_EQ(decide_claim(processing(1, now - SEC, now + 10 * SEC), false, now),
              ClaimDecision::Mismatch);
    RecordState done{Status::Completed, false, 3, false, 0, now + SEC};
    EXPECT_EQ(decide_claim(done, false, now), ClaimDecision::Mismatch);
    RecordState failed{Status::Failed, true, 1, false, 0, now + SEC};
    EXPECT_EQ(decide_claim(failed, false, now), ClaimDecision::Mismatch);
}

TEST(DecideClaim, OutcomesByState) {
    const int64_t now = 100 * SEC;
    EXPECT_EQ(decide_claim(processing(1, now + 1, now + SEC), true, now),
              ClaimDecision::InProgress);
    // the lease ends exactly now: expired
    EXPECT_EQ(decide_claim(processing(1, now, now + SEC), true, now), ClaimDecision::Reclaim);
    RecordState done{Status::Completed, false, 2, false, 0, now + SEC};
    EXPECT_EQ(decide_claim(done, true, now), ClaimDecision::Replay);
    RecordState permanent{Status::Failed, false, 1, false, 0, now + SEC};
    EXPECT_EQ(decide_claim(permanent, true, now), ClaimDecision::Replay);
    RecordState retryable{Status::Failed, true, 1, false, 0, now + SEC};
    EXPECT_EQ(decide_claim(retryable, true, now), ClaimDecision::Retry);
}

TEST(DecideClaim, PastTtlCountsAsAbsent) {
    const int64_t now = 100 * SEC;
    RecordState done{Status::Completed, false, 2, false, 0, now};
    EXPECT_FALSE(record_live(done, now));
    EXPECT_EQ(decide_claim(done, false, now), ClaimDecision::Fresh); // no mismatch either
    // an owner with a live lease keeps the record live even past its TTL
    RecordState owned = processing(1, now + SEC, now - SEC);
    EXPECT_TRUE(record_live(owned, now));
    EXPECT_EQ(decide_claim(owned, true, now), ClaimDecision::InProgress);
}

TEST(DecideClaim, StuckPastTtlIsReclaimedNotClaimedAnew) {
    // An unfinished record whose lease and TTL both ended: its outcome is unknown, so the next
    // caller must reconcile (reclaimed), and a different request is still a mismatch.
    const int64_t now = 100 * SEC;
    RecordState stuck = processing(1, now - 2 * SEC, now - SEC);
    EXPECT_TRUE(record_live(stuck, now));
    EXPECT_EQ(decide_claim(stuck, true, now), ClaimDecision::Reclaim);
    EXPECT_EQ(decide_claim(stuck, false, now), ClaimDecision::Mismatch);
}

TEST(DecideClaim, OutcomeNames) {
    EXPECT_STREQ(outcome_name(ClaimDecision::Fresh), "claimed");
    EXPECT_STREQ(outcome_name(ClaimDecision::Retry), "claimed");
    EXPECT_STREQ(outcome_name(ClaimDecision::Reclaim), "reclaimed");
    EXPECT_STREQ(outcome_name(ClaimDecision::Replay), "replayed");
    EXPECT_STREQ(outcome_name(ClaimDecision::InProgress), "in_progress");
    EXPECT_STREQ(outcome_name(ClaimDecision::Mismatch), "mismatch");
}

TEST(RetryDelay, DoublesUpToTheCapWithJitterInTheUpperHalf) {
    // random 0: the fixed half; random ~0: the whole delay
    EXPECT_EQ(retry_delay_usec(1, 1 * SEC, 3600 * SEC, 0), SEC / 2);
    EXPECT_EQ(retry_delay_usec(1, 1 * SEC, 3600 * SEC, SEC / 2), SEC);
    EXPECT_EQ(retry_delay_usec(2, 1 * SEC, 3600 * SEC, 0), SEC);
    EXPECT_EQ(retry_delay_usec(4, 1 * SEC, 3600 * SEC, 0), 4 * SEC);
    EXPECT_EQ(retry_delay_usec(13, 1 * SEC, 3600 * SEC, 0), 1800 * SEC); // 4096 s capped
    EXPECT_EQ(retry_delay_usec(INT32_MAX, 1 * SEC, 3600 * SEC, 0), 1800 * SEC);
    for (uint64_t r : {UINT64_C(0), UINT64_C(12345), UINT64_MAX}) {
        int64_t d = retry_delay_usec(3, 1 * SEC, 3600 * SEC, r);
        EXPECT_GE(d, 2 * SEC);
        EXPECT_LE(d, 4 * SEC);
    }
}

TEST(RetryDelay, ZeroBaseOrCapMeansNoDelayAndABaseAboveTheCapIsCapped) {
    EXPECT_EQ(retry_delay_usec(5, 0, 3600 * SEC, 99), 0);
    EXPECT_EQ(retry_delay_usec(5, SEC, 0, 99), 0);
    EXPECT_EQ(retry_delay_usec(0, 10 * SEC, 4 * SEC, 0), 2 * SEC);
    EXPECT_EQ(retry_delay_usec(1, INT64_MAX, INT64_MAX, 0), INT64_MAX / 2);
}

TEST(RetryAllowed, CountsAttemptsAgainstTheBudget) {
    EXPECT_TRUE(retry_allowed(true, 1, 3));
    EXPECT_TRUE(retry_allowed(true, 2, 3));
    EXPECT_FALSE(retry_allowed(true, 3, 3));
    EXPECT_FALSE(retry_allowed(false, 1, 3));
    EXPECT_TRUE(retry_allowed(true, 1000000, 0)); // 0: no limit
    EXPECT_FALSE(retry_allowed(false, 1, 0));
}
