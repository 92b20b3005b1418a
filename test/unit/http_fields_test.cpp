// HTTP field syntax (core/http_fields.hpp): the Idempotency-Key header (the sf-string of RFC 8941
// section 3.3.3 with its escapes and ignored parameters, the unquoted form, every malformed value
// refused with 22023) and the response headers a record stores.
#include "error.hpp"
#include "http_fields.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

std::string parse(std::string_view v) {
    std::vector<char> out(v.size() + 1);
    size_t n = idem::parse_key_header(v, out.data());
    return std::string(out.data(), n);
}

std::string sqlstate_of(std::string_view v) {
    try {
        parse(v);
    } catch (const idem::Error &e) {
        return e.sqlstate();
    }
    return "accepted";
}

} // namespace

TEST(KeyHeader, QuotedAndUnquotedAreTheSameKey) {
    EXPECT_EQ(parse("\"8e03978e-40d5\""), "8e03978e-40d5"); // the draft's example
    EXPECT_EQ(parse("8e03978e-40d5"), "8e03978e-40d5");
    EXPECT_EQ(parse("  \"8e03978e-40d5\"\t"), "8e03978e-40d5");
    EXPECT_EQ(parse(" 8e03978e-40d5 "), "8e03978e-40d5");
}

TEST(KeyHeader, StringEscapesAndSpaces) {
    EXPECT_EQ(parse(R"("a\"b")"), "a\"b");
    EXPECT_EQ(parse(R"("a\\b")"), "a\\b");
    EXPECT_EQ(parse("\"a b\""), "a b"); // SP is a string character
    EXPECT_EQ(parse("\"~!#$%&'()*+,-./:;<=>?@[]^_`{|}\""), "~!#$%&'()*+,-./:;<=>?@[]^_`{|}");
}

TEST(KeyHeader, ParametersAreIgnored) {
    EXPECT_EQ(parse("\"k-1\";a=1"), "k-1");
    EXPECT_EQ(parse("\"k-1\";a=1;b=?0 "), "k-1");
}

TEST(KeyHeader, MalformedValuesAre22023) {
    for (std::string_view bad : {"", " ", "\t", "\"\"", "\"abc", "\"a\\b\"", "\"a\\\"", "\"abc\" x",
                                 "\"abc\"x", "\"abc\",\"def\"", "a b", "a\"b", "\"a\x01\"", "a\x7f",
                                 "\"caf\xc3\xa9\"", "caf\xc3\xa9", "\"a\";\x01"})
        EXPECT_EQ(sqlstate_of(bad), "22023") << "value: " << std::string(bad);
}

TEST(KeyHeader, ControlCharactersInsideAQuotedKey) {
    std::string with_nul = std::string("\"a") + '\0' + "b\"";
    EXPECT_EQ(sqlstate_of(with_nul), "22023");
    EXPECT_EQ(sqlstate_of("\"a\r\nb\""), "22023");
    EXPECT_EQ(sqlstate_of("a\r\n"), "22023");
}

TEST(KeyHeader, TheDetailSaysWhy) {
    try {
        parse("\"abc");
        FAIL() << "accepted";
    } catch (const idem::Error &e) {
        EXPECT_STREQ(e.what(), "invalid Idempotency-Key header");
        EXPECT_EQ(e.detail(), "The string has no closing quote.");
    }
}

TEST(ResponseHeaders, TokensAndValues) {
    EXPECT_NO_THROW(idem::validate_response_header("Location", "/v1/payments/42"));
    EXPECT_NO_THROW(idem::validate_response_header("ETag", "W/\"x\""));
    EXPECT_NO_THROW(idem::validate_response_header("X-A!#$%&'*+-.^_`|~9", ""));
    auto state = [](std::string_view n, std::string_view v) {
        try {
            idem::validate_response_header(n, v);
        } catch (const idem::Error &e) {
            return std::string(e.sqlstate());
        }
        return std::string("accepted");
    };
    EXPECT_EQ(state("", "x"), "22023");
    EXPECT_EQ(state("Bad Name", "x"), "22023");
    EXPECT_EQ(state("Bad:Name", "x"), "22023");
    EXPECT_EQ(state(std::string(257, 'a'), "x"), "22023");
    EXPECT_EQ(state("Location", "a\r\nSet-Cookie: x"), "22023"); // header injection
    EXPECT_EQ(state("Location", std::string("a\0b", 3)), "22023");
    EXPECT_EQ(state("Location", std::string(8193, 'a')), "22023");
    EXPECT_EQ(state("Location", std::string(8192, 'a')), "accepted");
}
