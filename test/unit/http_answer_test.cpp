// The HTTP answer of each outcome (core/http_answer.hpp).
#include "http_answer.hpp"

#include <gtest/gtest.h>

#include <string>

using namespace idem::http;

namespace {
constexpr int64_t NOW = 1'000'000'000'000;
Stored stored() {
    Stored s{};
    return s;
}
} // namespace

TEST(HttpAnswer, KindOfEachOutcome) {
    EXPECT_EQ(kind_of("claimed"), Kind::RunHandler);
    EXPECT_EQ(kind_of("reclaimed"), Kind::RunHandler);
    EXPECT_EQ(kind_of("replayed"), Kind::Replay);
    EXPECT_EQ(kind_of("in_progress"), Kind::Busy);
    EXPECT_EQ(kind_of("mismatch"), Kind::Mismatch);
    EXPECT_EQ(kind_of(""), Kind::RunHandler);
    EXPECT_EQ(kind_of("Replayed"), Kind::RunHandler);
}

TEST(HttpAnswer, RunHandlerHasNoAnswer) {
    Answer a = answer(Kind::RunHandler, stored(), NOW);
    EXPECT_FALSE(a.has_answer);
    EXPECT_EQ(a.problem, nullptr);
}

TEST(HttpAnswer, ReplayTakesTheStoredStatusOr200) {
    Stored s = stored();
    s.has_status = true;
    s.status = 201;
    s.has_body = true;
    Answer a = answer(Kind::Replay, s, NOW);
    EXPECT_TRUE(a.has_answer);
    EXPECT_EQ(a.status, 201);
    EXPECT_TRUE(a.replay_headers);
    EXPECT_FALSE(a.json_type);
    EXPECT_EQ(a.retry_after, 0);
    EXPECT_EQ(answer(Kind::Replay, stored(), NOW).status, 200);
}

TEST(HttpAnswer, JsonTypeOnlyForAJsonbResponseWithoutContentType) {
    Stored s = stored();
    s.has_json = true;
    EXPECT_TRUE(answer(Kind::Replay, s, NOW).json_type);
    s.has_content_type = true;
    EXPECT_FALSE(answer(Kind::Replay, s, NOW).json_type);
    s.has_content_type = false;
    s.has_body = true; // the exact bytes win over the jsonb
    EXPECT_FALSE(answer(Kind::Replay, s, NOW).json_type);
}

TEST(HttpAnswer, BusyIs409WithRetryAfterRoundedUp) {
    Stored s = stored();
    s.has_lease = true;
    s.lease_expires_us = NOW + 29'000'001;
    Answer a = answer(Kind::Busy, s, NOW);
    EXPECT_EQ(a.status, 409);
    EXPECT_EQ(a.retry_after, 30);
    ASSERT_NE(a.problem, nullptr);
    EXPECT_NE(std::string(a.problem).find("\"status\":409"), std::string::npos);
    EXPECT_FALSE(a.replay_headers);
}

TEST(HttpAnswer, RetryAfterIsAtLeastOne) {
    EXPECT_EQ(retry_after_seconds(false, 0, NOW), 1);
    EXPECT_EQ(retry_after_seconds(true, NOW, NOW), 1);
    EXPECT_EQ(retry_after_seconds(true, NOW - 5'000'000, NOW), 1);
    EXPECT_EQ(retry_after_seconds(true, NOW + 1, NOW), 1);
    EXPECT_EQ(retry_after_seconds(true, NOW + 1'000'000, NOW), 1);
    EXPECT_EQ(retry_after_seconds(true, NOW + 1'000'001, NOW), 2);
}

TEST(HttpAnswer, MismatchIs422) {
    Answer a = answer(Kind::Mismatch, stored(), NOW);
    EXPECT_EQ(a.status, 422);
    EXPECT_EQ(a.retry_after, 0);
    ASSERT_NE(a.problem, nullptr);
    EXPECT_NE(std::string(a.problem).find("\"status\":422"), std::string::npos);
}

TEST(HttpAnswer, HeaderNamesCaseInsensitive) {
    EXPECT_TRUE(header_name_equal("content-type", CONTENT_TYPE));
    EXPECT_TRUE(header_name_equal("CONTENT-TYPE", CONTENT_TYPE));
    EXPECT_FALSE(header_name_equal("content-typ", CONTENT_TYPE));
    EXPECT_FALSE(header_name_equal("content_type", CONTENT_TYPE));
}
