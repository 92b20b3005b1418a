// UUIDv7 (RFC 9562): the Appendix A.6 vector, version/variant bits, monotonicity within one
// millisecond, across sequence exhaustion and when the clock steps back.
#include "uuid7.hpp"

#include <gtest/gtest.h>

TEST(UuidV7, Rfc9562AppendixA6) {
    idem::Uuid u = idem::make_uuid_v7(0x017F22E279B0ULL, 0xCC3, 0x18C4DC0C0C07398FULL);
    EXPECT_EQ(idem::uuid_to_string(u), "017f22e2-79b0-7cc3-98c4-dc0c0c07398f");
    EXPECT_TRUE(idem::is_uuid_v7(u));
    EXPECT_EQ(idem::uuid_v7_unix_ms(u), 0x017F22E279B0ULL); // 2022-02-22 19:22:22 UTC
    EXPECT_EQ(idem::uuid_v7_unix_ms(u), 1645557742000ULL);
}

TEST(UuidV7, FieldsAreMaskedToTheirWidths) {
    idem::Uuid u = idem::make_uuid_v7(~0ULL, 0xFFFF, ~0ULL);
    EXPECT_EQ(idem::uuid_to_string(u), "ffffffff-ffff-7fff-bfff-ffffffffffff");
    EXPECT_TRUE(idem::is_uuid_v7(u));
    idem::Uuid v4 = u;
    v4[6] = 0x4F;
    EXPECT_FALSE(idem::is_uuid_v7(v4));
    idem::Uuid badvariant = u;
    badvariant[8] = 0xC0;
    EXPECT_FALSE(idem::is_uuid_v7(badvariant));
}

TEST(UuidV7, StrictlyIncreasingInOneMillisecondAndWhenTheClockStepsBack) {
    idem::UuidV7Generator g;
    idem::Uuid prev = g.next(1000);
    EXPECT_EQ(idem::uuid_v7_unix_ms(prev), 1000u);
    // 10,000 UUIDs in the same millisecond: more than the 12-bit sequence holds, so the
    // generator borrows following milliseconds rather than repeat or go backwards.
    for (int i = 0; i < 10000; i++) {
        idem::Uuid u = g.next(1000);
        ASSERT_LT(prev, u) << i;
        ASSERT_TRUE(idem::is_uuid_v7(u));
        prev = u;
    }
    // Clock steps back by a second: still increasing, timestamp does not go back.
    uint64_t before = idem::uuid_v7_unix_ms(prev);
    for (int i = 0; i < 100; i++) {
        idem::Uuid u = g.next(0);
        ASSERT_LT(prev, u);
        ASSERT_GE(idem::uuid_v7_unix_ms(u), before);
        prev = u;
    }
    // Clock moves forward again: the new time is used.
    idem::Uuid later = g.next(5000000);
    EXPECT_LT(prev, later);
    EXPECT_EQ(idem::uuid_v7_unix_ms(later), 5000000u);
}

TEST(UuidV7, SystemClockAndRandomness) {
    idem::UuidV7Generator g;
    uint64_t t0 = idem::unix_now_ms();
    idem::Uuid a = g.next(), b = g.next();
    uint64_t t1 = idem::unix_now_ms();
    EXPECT_LT(a, b);
    EXPECT_GE(idem::uuid_v7_unix_ms(a), t0);
    EXPECT_LE(idem::uuid_v7_unix_ms(b), t1 + 1);
    // rand_b differs between UUIDs (62 random bits; a collision would be a 2^-62 event).
    EXPECT_FALSE(std::equal(a.begin() + 8, a.end(), b.begin() + 8));
}
