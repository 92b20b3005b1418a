// The HTTP contract's rules that need no database (core/http_contract.hpp); the same values are
// pinned through SQL by test/regress/sql/http_contract.sql.
#include "http_contract.hpp"

#include <gtest/gtest.h>

#include <string>

using namespace idem::http;

namespace {
std::string scope(const char *principal, const char *operation, bool shared = false) {
    std::string out = "unchanged";
    bool ok =
        request_scope(principal != nullptr, principal ? principal : "", operation, shared, out);
    return ok ? out : std::string("<none>");
}
} // namespace

TEST(HttpContract, ScopeIsThePrincipalThenTheOperation) {
    EXPECT_EQ(scope("user:42", "POST /v1/payments"), "user:42/POST /v1/payments");
    EXPECT_EQ(scope("a/b%c*", "POST /x"), "a%2Fb%25c%2A/POST /x");
    EXPECT_EQ(scope("*", "POST /x"), "%2A/POST /x"); // never the shared scope
    EXPECT_EQ(scope("%2F", "POST /x"), "%252F/POST /x");
}

TEST(HttpContract, NoPrincipalNoScopeUnlessShared) {
    EXPECT_EQ(scope(nullptr, "POST /x"), "<none>");
    EXPECT_EQ(scope("", "POST /x"), "<none>");
    EXPECT_EQ(scope(nullptr, "POST /x", true), "*/POST /x");
    EXPECT_EQ(scope("u", "POST /x", true), "*/POST /x");
}

TEST(HttpContract, StoredStatuses) {
    for (int s : {200, 201, 204, 299, 301, 303, 399, 400, 402, 404, 410, 422, 499})
        EXPECT_TRUE(stored_status(s)) << s;
    for (int s : {100, 199, 401, 403, 408, 409, 423, 424, 425, 429, 500, 502, 503, 599, 0, -1, 600})
        EXPECT_FALSE(stored_status(s)) << s;
}

TEST(HttpContract, ResourceIdIsTheLastPathSegment) {
    EXPECT_EQ(location_resource_id("/v1/payments/42"), "42");
    EXPECT_EQ(location_resource_id("https://h.example/v1/p/7?x=1#f"), "7");
    EXPECT_EQ(location_resource_id("/a/b#x/y"), "b");
    EXPECT_EQ(location_resource_id("/a/b/"), "");
    EXPECT_EQ(location_resource_id("plain"), "plain");
    EXPECT_EQ(location_resource_id(""), "");
    EXPECT_EQ(location_resource_id("?/q"), "");
}

TEST(HttpContract, ProblemBodyEscapesAsToJson) {
    EXPECT_EQ(problem_body(400, true, "bad \"k\"\n\\ \x01 é"),
              "{\"type\":\"about:blank\",\"title\":\"Bad Request\",\"status\":400,"
              "\"detail\":\"bad \\\"k\\\"\\n\\\\ \\u0001 é\"}");
    EXPECT_EQ(problem_body(418, false, ""),
              "{\"type\":\"about:blank\",\"title\":\"Error\",\"status\":418,\"detail\":null}");
    EXPECT_EQ(problem_title(422), "Unprocessable Content");
    EXPECT_EQ(problem_title(503), "Service Unavailable");
}
