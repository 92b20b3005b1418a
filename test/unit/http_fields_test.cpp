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

namespace {
// The SQLSTATE a header check throws, or "accepted".
template <typename F> std::string outcome(F &&f) {
    try {
        f();
    } catch (const idem::Error &e) {
        return std::string(e.sqlstate());
    }
    return "accepted";
}

std::string one(std::string_view n, std::string_view v) {
    return outcome([&] { idem::validate_response_header(n, v); });
}

std::string all(const std::vector<idem::HeaderField> &f, size_t max_count = 100,
                size_t max_bytes = 65536) {
    return outcome([&] {
        idem::validate_response_headers(f.data(), f.size(), {max_count, max_bytes});
    });
}
} // namespace

// RFC 9110 section 5.5: field-value = VCHAR / obs-text, with SP and HTAB only inside.
TEST(ResponseHeaders, FieldValueCharacters) {
    EXPECT_EQ(one("X", "a b\tc"), "accepted");
    EXPECT_EQ(one("X", ""), "accepted");
    EXPECT_EQ(one("X", "caf\xc3\xa9 \xe2\x82\xac"), "accepted"); // UTF-8 text is obs-text
    EXPECT_EQ(one("X", "\x80\xff"), "accepted");                 // opaque obs-text bytes
    EXPECT_EQ(one("X", "a\xc2\xa0"
                       "b"),
              "accepted"); // U+00A0 is not a control
    EXPECT_EQ(one("X", "a\xe2\x80\xa7"
                       "b"),
              "accepted"); // U+2027 is not a separator
    for (int c = 0; c < 0x20; c++) {
        if (c == '\t')
            continue;
        std::string v = "a";
        v += static_cast<char>(c);
        v += "b";
        EXPECT_EQ(one("X", v), "22023") << "control " << c;
    }
    EXPECT_EQ(one("X", "a\x7f"
                       "b"),
              "22023"); // DEL
    EXPECT_EQ(one("X", "a\x01"
                       "b"),
              "22023");
    EXPECT_EQ(one("X", "a\xc2\x85"
                       "b"),
              "22023"); // U+0085 NEL
    EXPECT_EQ(one("X", "a\xc2\x80"
                       "b"),
              "22023"); // U+0080
    EXPECT_EQ(one("X", "a\xc2\x9f"
                       "b"),
              "22023"); // U+009F
    EXPECT_EQ(one("X", "a\xe2\x80\xa8"
                       "b"),
              "22023"); // U+2028
    EXPECT_EQ(one("X", "a\xe2\x80\xa9"
                       "b"),
              "22023"); // U+2029
    EXPECT_EQ(one("X", " a"), "22023");
    EXPECT_EQ(one("X", "a "), "22023");
    EXPECT_EQ(one("X", "\ta"), "22023");
    EXPECT_EQ(one("X", "a\t"), "22023");
    EXPECT_EQ(one("X", " "), "22023");
}

TEST(ResponseHeaders, FramingAndHopByHopFieldsAreRefused) {
    for (const char *n :
         {"Content-Length", "content-length", "Transfer-Encoding", "Connection", "Keep-Alive",
          "Proxy-Connection", "TE", "te", "Trailer", "Upgrade", "UPGRADE"})
        EXPECT_EQ(one(n, "x"), "22023") << n;
    for (const char *n : {"Content-Type", "Content-Length2", "Trailers", "Tea", "Location"})
        EXPECT_EQ(one(n, "x"), "accepted") << n;
}

TEST(ResponseHeaders, TheDetailNamesTheHeaderAndTheByte) {
    try {
        idem::validate_response_header("X-Note", "ab\xc2\x85");
        FAIL();
    } catch (const idem::Error &e) {
        EXPECT_EQ(e.detail(), "The value of header \"X-Note\" contains a C1 control character "
                              "(U+0080-U+009F, such as U+0085 NEL) at byte 3 (RFC 9110 section "
                              "5.5).");
    }
}

TEST(ResponseHeaders, NamesAreUniqueIgnoringCase) {
    EXPECT_EQ(all({{"Location", "/a"}, {"ETag", "x"}}), "accepted");
    EXPECT_EQ(all({{"Location", "/a"}, {"location", "/b"}}), "22023");
    EXPECT_EQ(all({{"X-A", "1"}, {"ETag", "x"}, {"x-a", "2"}}), "22023");
    try {
        std::vector<idem::HeaderField> f{{"Location", "/a"}, {"LOCATION", "/b"}};
        idem::validate_response_headers(f.data(), f.size(), {100, 65536});
        FAIL();
    } catch (const idem::Error &e) {
        EXPECT_EQ(e.detail(), "Headers \"Location\" and \"LOCATION\" are the same field: header "
                              "names are case-insensitive (RFC 9110 section 5.1).");
    }
}

TEST(ResponseHeaders, CountAndTotalSizeAre54000AtOnePastTheLimit) {
    std::vector<std::string> names;
    for (int i = 0; i < 5; i++)
        names.push_back("X-" + std::to_string(i));
    std::vector<idem::HeaderField> f;
    for (const auto &n : names)
        f.push_back({n, "abcdefg"}); // 3 + 7 = 10 bytes each
    EXPECT_EQ(all(f, 5, 50), "accepted");
    EXPECT_EQ(all(f, 4, 50), "54000");
    EXPECT_EQ(all(f, 5, 49), "54000");
    EXPECT_EQ(all({}, 0, 0), "accepted");
    try {
        idem::validate_response_headers(f.data(), f.size(), {4, 50});
        FAIL();
    } catch (const idem::Error &e) {
        EXPECT_STREQ(e.what(), "response_headers exceed idempotency.max_response_headers");
        EXPECT_EQ(e.detail(), "There are 5 headers; the maximum is 4.");
    }
    try {
        idem::validate_response_headers(f.data(), f.size(), {5, 49});
        FAIL();
    } catch (const idem::Error &e) {
        EXPECT_STREQ(e.what(), "response_headers exceed idempotency.max_response_header_bytes");
    }
    // the limits come before the syntax: 20,000 headers are refused without reading them
    std::vector<idem::HeaderField> many(20000, idem::HeaderField{"bad name", "\x01"});
    EXPECT_EQ(all(many), "54000");
    // src/limits.cpp relies on it: past the count the fields are not read at all
    EXPECT_EQ(outcome([] {
                  idem::validate_response_headers(nullptr, 20000, {100, 65536});
              }),
              "54000");
}
