// RFC 8785 canonicalisation: every shared vector, number formatting over numbers.csv, I-JSON
// rejections, exact-number mode, path filters and deep nesting.
#include "error.hpp"
#include "jcs.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using idem::jcs::canonicalize_text;
using idem::jcs::Options;

namespace {

const std::string kDir = std::string(IDEM_VECTORS_DIR) + "/jcs";

std::string slurp(const std::string &path) {
    std::ifstream f(path, std::ios::binary);
    EXPECT_TRUE(f.good()) << path;
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

std::vector<std::string> list_dir(const std::string &dir) {
    std::vector<std::string> names;
    DIR *d = opendir(dir.c_str());
    if (d == nullptr)
        return names;
    while (dirent *e = readdir(d))
        if (e->d_name[0] != '.')
            names.push_back(e->d_name);
    closedir(d);
    std::sort(names.begin(), names.end());
    return names;
}

std::string hex(const std::string &s) {
    static const char h[] = "0123456789abcdef";
    std::string r;
    for (unsigned char c : s) {
        r.push_back(h[c >> 4]);
        r.push_back(h[c & 15]);
    }
    return r;
}

std::string hex_only(const std::string &s) {
    std::string r;
    for (char c : s)
        if (std::isxdigit(static_cast<unsigned char>(c)))
            r.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    return r;
}

std::string canon(const std::string &text, bool exact = false) {
    Options o;
    o.exact_numbers = exact;
    return canonicalize_text(text, o);
}

// The SQLSTATE of the idem::Error the text raises, or "" when it is accepted.
std::string sqlstate_of(const std::string &text, Options o = {}) {
    try {
        canonicalize_text(text, o);
    } catch (const idem::Error &e) {
        return e.sqlstate();
    }
    return "";
}

std::string num(const std::string &text, bool exact = false) {
    std::string out;
    idem::jcs::format_number(text, exact, out);
    return out;
}

} // namespace

TEST(JcsVectors, EveryInputGivesItsOutputByteForByte) {
    auto names = list_dir(kDir + "/input");
    ASSERT_EQ(names.size(), 6u) << "vectors missing at " << kDir;
    for (const auto &name : names) {
        std::string in = slurp(kDir + "/input/" + name);
        std::string want = slurp(kDir + "/output/" + name);
        std::string base = name.substr(0, name.size() - 5);
        std::string want_hex = hex_only(slurp(kDir + "/outhex/" + base + ".txt"));
        std::string got = canon(in);
        EXPECT_EQ(got, want) << name;
        EXPECT_EQ(hex(got), want_hex) << name;
        // Canonical output is a fixed point.
        EXPECT_EQ(canon(got), got) << name;
    }
}

TEST(JcsVectors, AllNumbersCsvLines) {
    std::ifstream f(kDir + "/numbers.csv");
    ASSERT_TRUE(f.good());
    std::string line;
    size_t lines = 0, failures = 0;
    while (std::getline(f, line)) {
        if (line.empty())
            continue;
        lines++;
        size_t a = line.find(','), b = line.find(',', a + 1);
        ASSERT_NE(b, std::string::npos) << line;
        std::string hexbits = line.substr(0, a);
        std::string input = line.substr(a + 1, b - a - 1);
        std::string expected = line.substr(b + 1);
        // From the decimal text.
        std::string got = num(input);
        // From the exact double given by the hex bits.
        uint64_t bits = std::stoull(hexbits, nullptr, 16);
        double d;
        std::memcpy(&d, &bits, sizeof d);
        std::string got2;
        idem::jcs::format_double(d, got2);
        // The expected text is itself canonical: it reparses to the same output.
        std::string again = num(expected);
        if (got != expected || got2 != expected || again != expected) {
            if (++failures < 20)
                ADD_FAILURE() << line << " -> " << got << " / " << got2 << " / " << again;
        }
    }
    EXPECT_EQ(lines, 20034u);
    EXPECT_EQ(failures, 0u);
}

TEST(JcsNumbers, EcmaScriptLayout) {
    EXPECT_EQ(num("1"), "1");
    EXPECT_EQ(num("1.0"), "1");
    EXPECT_EQ(num("1.00"), "1");
    EXPECT_EQ(num("1e0"), "1");
    EXPECT_EQ(num("10E-1"), "1");
    EXPECT_EQ(num("-0"), "0");
    EXPECT_EQ(num("-0.0e5"), "0");
    EXPECT_EQ(num("1e21"), "1e+21");
    EXPECT_EQ(num("999999999999999900000"), "999999999999999900000");
    EXPECT_EQ(num("1e-6"), "0.000001");
    EXPECT_EQ(num("1e-7"), "1e-7");
    EXPECT_EQ(num("123456789012345678"), "123456789012345680");
    EXPECT_EQ(num("9007199254740993"), "9007199254740992");
    EXPECT_EQ(num("5e-324"), "5e-324");
    EXPECT_EQ(num("1e-400"), "0"); // underflow, as ECMAScript
    EXPECT_EQ(num("1.7976931348623157e308"), "1.7976931348623157e+308");
    EXPECT_EQ(num("-1.5"), "-1.5");
}

// The strict-mode fast path (<= 15 significant digits, no binary conversion) must agree with
// parsing to a double and printing it as ECMAScript does.
TEST(JcsNumbers, ShortDecimalFastPathMatchesDoubleConversion) {
    uint64_t x = 88172645463325252ULL; // xorshift64
    auto next = [&] {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        return x;
    };
    std::vector<std::string> cases = {"1e-307",
                                      "9.99999999999999e307",
                                      "1e308",
                                      "1.5e-308",
                                      "123456789012345e-320",
                                      "0.1",
                                      "100e-2",
                                      "999999999999999",
                                      "0.000001234",
                                      "1e21",
                                      "1.1e21"};
    for (int i = 0; i < 200000; i++) {
        int ndig = 1 + static_cast<int>(next() % 15);
        std::string d;
        for (int k = 0; k < ndig; k++)
            d.push_back(static_cast<char>('0' + next() % 10));
        if (d[0] == '0' && d.size() > 1)
            d[0] = '1';
        int point = static_cast<int>(next() % (d.size() + 1));
        std::string t = (next() % 2 ? "-" : "") + d.substr(0, point == 0 ? 1 : point);
        if (point == 0)
            t = (t[0] == '-' ? "-0." : "0.") + d;
        else if (point < static_cast<int>(d.size()))
            t += "." + d.substr(point);
        int mode = static_cast<int>(next() % 3);
        if (mode == 1)
            t += "e" + std::to_string(static_cast<int>(next() % 600) - 300);
        cases.push_back(t);
    }
    size_t checked = 0;
    for (const std::string &t : cases) {
        double v = std::strtod(t.c_str(), nullptr);
        if (v == HUGE_VAL || v == -HUGE_VAL)
            continue;
        std::string want;
        idem::jcs::format_double(v, want);
        ASSERT_EQ(num(t), want) << t;
        checked++;
    }
    EXPECT_GT(checked, 190000u);
}

TEST(JcsNumbers, OverflowIsAnErrorInStrictModeOnly) {
    EXPECT_EQ(sqlstate_of("1e400"), "22003");
    EXPECT_EQ(sqlstate_of("[-1.8e308]"), "22003");
    Options exact;
    exact.exact_numbers = true;
    EXPECT_EQ(sqlstate_of("1e400", exact), "");
    EXPECT_EQ(canon("1e400", true), "1e+400");
}

TEST(JcsNumbers, ExactModeKeepsDistinctValuesDistinct) {
    EXPECT_EQ(canon("9007199254740993", true), "9007199254740993");
    EXPECT_EQ(canon("9007199254740992", true), "9007199254740992");
    EXPECT_NE(canon("9007199254740993", true), canon("9007199254740992", true));
    // Strict RFC 8785 collapses them.
    EXPECT_EQ(canon("9007199254740993"), canon("9007199254740992"));
    EXPECT_EQ(canon("0.10000000000000000001", true), "0.10000000000000000001");
    EXPECT_NE(canon("0.10000000000000000001", true), canon("0.1", true));
    EXPECT_EQ(canon("333333333.33333329", true), "333333333.33333329");
    // Same value, different spellings, agree.
    for (const char *s : {"1", "1.0", "1.00", "1e0", "10e-1", "0.1e1", "1E+0"})
        EXPECT_EQ(canon(s, true), "1") << s;
    for (const char *s : {"0", "-0", "0.000", "-0e10", "0e-5"})
        EXPECT_EQ(canon(s, true), "0") << s;
    EXPECT_EQ(canon("123000", true), "123000");
    EXPECT_EQ(canon("1.5e3", true), "1500");
    EXPECT_EQ(canon("1e21", true), "1e+21");
    EXPECT_EQ(canon("12345678901234567890123", true), "1.2345678901234567890123e+22");
    EXPECT_EQ(canon("0.0000001", true), "1e-7");
    EXPECT_EQ(canon("-0.00000123", true), "-0.00000123");
    // Numbers that doubles represent exactly print the same in both modes.
    for (const char *s : {"4.50", "2e-3", "1E30", "0.1", "-12.75", "1e-7", "56.0"})
        EXPECT_EQ(canon(s, true), canon(s)) << s;
    Options exact;
    exact.exact_numbers = true;
    EXPECT_EQ(sqlstate_of("1e99999999999999999999", exact), "22003");
}

TEST(JcsStrings, EscapesOnlyWhatJcsEscapes) {
    EXPECT_EQ(canon(R"("\u0000\u0001\b\t\n\f\r\u001f\"\\\/\u007f\u0080\u2028")"),
              "\"\\u0000\\u0001\\b\\t\\n\\f\\r\\u001f\\\"\\\\/\x7f\xc2\x80\xe2\x80\xa8\"");
    EXPECT_EQ(canon(R"("\u00e9\uD83D\uDE00")"), "\"\xc3\xa9\xf0\x9f\x98\x80\"");
    EXPECT_EQ(canon("\"</script>\""), "\"</script>\"");
    // A NUL inside a string (jsonb cannot hold it) is kept and written as \u0000.
    EXPECT_EQ(canon(R"({"a\u0000b":"x\u0000"})"), "{\"a\\u0000b\":\"x\\u0000\"}");
    EXPECT_NE(canon(R"({"a\u0000b":1})"), canon(R"({"a":1})"));
}

TEST(JcsKeys, SortedByUtf16CodeUnits) {
    // U+E000 (private use, one UTF-16 unit 0xE000) sorts after U+1F600 (surrogates 0xD83D...)
    // although its code point is smaller; U+00E9 sorts before both.
    std::string in = "{\"\xee\x80\x80\":1,\"\xf0\x9f\x98\x80\":2,\"\xc3\xa9\":3,\"z\":4,\"\":5}";
    EXPECT_EQ(canon(in),
              "{\"\":5,\"z\":4,\"\xc3\xa9\":3,\"\xf0\x9f\x98\x80\":2,\"\xee\x80\x80\":1}");
    EXPECT_LT(idem::jcs::compare_utf16("\xf0\x9f\x98\x80", "\xef\xbf\xbf"), 0);
    EXPECT_GT(idem::jcs::compare_utf16("\xef\xbf\xbf", "\xf0\x90\x80\x80"), 0);
    EXPECT_LT(idem::jcs::compare_utf16("\xed\x9f\xbf", "\xf0\x90\x80\x80"), 0); // U+D7FF
    EXPECT_LT(idem::jcs::compare_utf16("a", "ab"), 0);
    EXPECT_EQ(idem::jcs::compare_utf16("ab", "ab"), 0);
    EXPECT_EQ(canon(R"({"b":1,"a":{"d":[3,{"z":1,"y":2}],"c":null}})"),
              R"({"a":{"c":null,"d":[3,{"y":2,"z":1}]},"b":1})");
}

TEST(JcsVariants, ReorderedRespacedRenumberedAgree) {
    std::string a = canon(R"({"amount":1.0,"currency":"EUR","items":[{"sku":"x","qty":1e0}]})");
    std::string b = canon("{ \"items\" : [ { \"qty\" : 1 , \"sku\" : \"x\" } ] ,\n\t\"currency\":"
                          "\"EUR\", \"amount\" : 1.00 }");
    std::string c =
        canon(R"({"currency":"\u0045UR","amount":10e-1,"items":[{"qty":1,"sku":"x"}]})");
    EXPECT_EQ(a, b);
    EXPECT_EQ(a, c);
    EXPECT_EQ(a, R"({"amount":1,"currency":"EUR","items":[{"qty":1,"sku":"x"}]})");
    // Different requests stay different.
    EXPECT_NE(a, canon(R"({"amount":2,"currency":"EUR","items":[{"sku":"x","qty":1}]})"));
    EXPECT_NE(a, canon(R"({"amount":1,"currency":"EUR","items":[{"sku":"x","qty":"1"}]})"));
    EXPECT_NE(canon("[1,2]"), canon("[2,1]"));
}

TEST(JcsIJson, RejectsWhatIJsonForbids) {
    EXPECT_EQ(sqlstate_of(R"({"a":1,"a":2})"), "22P02");
    EXPECT_EQ(sqlstate_of(R"({"a":1,"\u0061":2})"), "22P02"); // duplicate after unescaping
    EXPECT_EQ(sqlstate_of(R"({"b":{"x":1,"y":2,"x":3}})"), "22P02");
    EXPECT_EQ(sqlstate_of(R"({"a":1,"b":{"a":2}})"), ""); // same name in another object is fine
    EXPECT_EQ(sqlstate_of(R"("\uD800")"), "22P02");       // lone high surrogate
    EXPECT_EQ(sqlstate_of(R"("\uDC00")"), "22P02");       // lone low surrogate
    EXPECT_EQ(sqlstate_of(R"("\uD800\u0041")"), "22P02");
    EXPECT_EQ(sqlstate_of(R"("\uD800x")"), "22P02");
    EXPECT_EQ(sqlstate_of("NaN"), "22P02");
    EXPECT_EQ(sqlstate_of("[Infinity]"), "22P02");
    EXPECT_EQ(sqlstate_of("[-Infinity]"), "22P02");
    EXPECT_EQ(sqlstate_of(R"({"a":NaN})"), "22P02");
    // Invalid UTF-8: stray continuation, overlongs, surrogates encoded in UTF-8, > U+10FFFF,
    // truncated sequences.
    for (const char *bad :
         {"\"\x80\"", "\"\xc0\xaf\"", "\"\xc1\xbf\"", "\"\xe0\x80\xaf\"", "\"\xf0\x80\x80\xaf\"",
          "\"\xed\xa0\x80\"", "\"\xed\xbf\xbf\"", "\"\xf4\x90\x80\x80\"", "\"\xf5\x80\x80\x80\"",
          "\"\xe2\x82\"", "\"\xff\"", "{\"\xc3\":1}"})
        EXPECT_EQ(sqlstate_of(bad), "22021") << hex(bad);
    EXPECT_EQ(sqlstate_of("\"\xf4\x8f\xbf\xbf\""), ""); // U+10FFFF is fine
}

namespace {

// How a text reaches the parser: the tape (no filters), the streaming tokenizer (an exclude
// filter that matches nothing), fingerprint_text, and one writer kept across texts (as the
// extension keeps one per backend).
enum class Via { kTape, kStreaming, kFingerprint, kReused };
const Via kEveryPath[] = {Via::kTape, Via::kStreaming, Via::kFingerprint, Via::kReused};

// The error text raises through path `via` as "SQLSTATE message / detail / hint", or "".
std::string error_via(const std::string &text, Via via, Options o = {}) {
    static idem::jcs::CanonicalWriter reused;
    try {
        switch (via) {
        case Via::kTape:
            canonicalize_text(text, o);
            break;
        case Via::kStreaming:
            o.exclude = {{"\xff"}};
            canonicalize_text(text, o);
            break;
        case Via::kFingerprint:
            idem::jcs::fingerprint_text(text, o);
            break;
        case Via::kReused:
            idem::jcs::parse_into(R"({"b":[1,"x"],"a":{}})", reused);
            reused.reset(o);
            idem::jcs::parse_into(text, reused);
            break;
        }
    } catch (const idem::Error &e) {
        return std::string(e.sqlstate()) + " " + e.what() + " / " + e.detail() + " / " + e.hint();
    }
    return "";
}

// The 22021 error for the invalid sequence `shown` at byte `at` of the text.
std::string utf8_error(size_t at, const std::string &shown) {
    return "22021 invalid UTF-8 in JSON text / At byte " + std::to_string(at) +
           " of the JSON text: the byte sequence " + shown +
           " is not well-formed UTF-8. / JSON text must be UTF-8 (RFC 8259).";
}

// Each kind of invalid sequence, and how the error shows it.
struct BadSequence {
    std::string bytes;
    std::string shown;
};
const BadSequence kBadSequences[] = {
    {"\xff", "0xff"},                            // a byte UTF-8 never uses
    {"\xfe", "0xfe"},                            //
    {"\x80", "0x80"},                            // a continuation byte without a lead
    {"\xbf", "0xbf"},                            //
    {"\xc0\xaf", "0xc0 0xaf"},                   // overlong '/' (2 bytes)
    {"\xc1\xbf", "0xc1 0xbf"},                   // overlong U+007F
    {"\xe0\x80\xaf", "0xe0 0x80 0xaf"},          // overlong '/' (3 bytes)
    {"\xf0\x80\x80\xaf", "0xf0 0x80 0x80 0xaf"}, // overlong '/' (4 bytes)
    {"\xed\xa0\x80", "0xed 0xa0 0x80"},          // the surrogate U+D800, encoded
    {"\xed\xbf\xbf", "0xed 0xbf 0xbf"},          // the surrogate U+DFFF, encoded
    {"\xf4\x90\x80\x80", "0xf4 0x90 0x80 0x80"}, // U+110000, above U+10FFFF
    {"\xf5\x80\x80\x80", "0xf5 0x80 0x80 0x80"}, // a lead byte beyond F4
    {"\xc3", "0xc3"},                            // truncated: 1 of 2 bytes
    {"\xe2\x82", "0xe2 0x82"},                   // truncated: 2 of 3 bytes (a euro sign's)
    {"\xf0\x9f\x98", "0xf0 0x9f 0x98"},          // truncated: 3 of 4 bytes
};

} // namespace

// Invalid UTF-8 is 22021 wherever it is: in a string or a member name, and outside strings
// (where it was "unexpected character", 22P02), also after something else that is wrong with
// the text: a text that is not UTF-8 cannot be read as JSON at all. The error names the
// first invalid sequence, the same on every path.
TEST(JcsUtf8, InvalidUtf8AnywhereIs22021) {
    // '@' marks where the sequence goes.
    const char *const places[] = {
        "@",                 // the whole text
        " \t@",              // after whitespace
        "\"@\"",             // a string
        "{\"a\":\"x@y\"}",   // a member's value
        "{\"@\":1}",         // a member name
        "[\"\\u00e9\\n@\"]", // after escapes
        "\"@",               // an unterminated string
        "[@]",               // where a value must start
        "{\"a\":@}",         //
        "{\"a\":1}@",        // after the top-level value
        "{\"a\":1} \n@",     //
        "[\"x\"]@[]",        //
        "{@:1}",             // where a member name must start
        "{\"a\":1,@}",       //
        "{\"a\"@:1}",        // where the ':' must be
        "[1@]",              // right after a number
        "[1.5,@2]",          // after a ','
        "[-@]",              // inside a number
        "[tru@]",            // inside a literal
        "[true@]",           // right after a literal
        "[{\"a\":\"x\",\"b\":1},{\"a\":\"y\",\"b\":2},{\"a\":\"@\",\"b\":3}]", // a shape
        "[{\"a\":\"x\",\"b\":1},{\"a\":\"y\",\"b\":2}@]",                      //
        "[{\"a\":\"x\",\"b\":1},{\"a\":\"y\",\"b\":2},{\"a\":\"z\"@",          //
        "{\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\":\"bbbbbbbbbbbbbbbbbbbb@\"}",
        // after what is wrong with the text otherwise: the UTF-8 error wins
        "[1,]@",              // a grammar error
        "{\"a\" 1}@",         //
        "\"\\x\"@",           // an invalid escape
        "[\"\\ud800\"]@",     // a lone surrogate escape
        "{\"a\":1,\"a\":2}@", // a duplicate name
        "[NaN]@",             // NaN
        "[1e400]@",           // a number out of range (strict mode)
        "\xef\xbb\xbf@",      // a byte order mark
        "\"a\x01\"@",         // an unescaped control character
        "\xc3\xa9@",          // valid UTF-8 that is no JSON
    };
    for (const BadSequence &seq : kBadSequences) {
        for (const char *place : places) {
            std::string text = place;
            const size_t at = text.find('@');
            text.replace(at, 1, seq.bytes);
            for (Via via : kEveryPath)
                ASSERT_EQ(error_via(text, via), utf8_error(at, seq.shown))
                    << hex(text) << " via " << static_cast<int>(via);
        }
    }
}

// The first invalid sequence is the one named; a document too deep for max_depth with
// invalid UTF-8 past the limit is 22021 too; exact mode answers alike.
TEST(JcsUtf8, TheFirstInvalidSequenceIsNamed) {
    for (Via via : kEveryPath) {
        EXPECT_EQ(error_via("\"\xff\" \xc0\xaf", via), utf8_error(1, "0xff"));
        EXPECT_EQ(error_via("[1, \xe2\x82\xac, \"\xe2\x82\"]", via), utf8_error(10, "0xe2 0x82"));
        EXPECT_EQ(error_via("{\"\xc3\xa9\":\"\xed\xa0\x80\"}\xff", via),
                  utf8_error(7, "0xed 0xa0 0x80"));
        Options small;
        small.max_depth = 2;
        EXPECT_EQ(error_via("[[[[\xff]]]]", via, small), utf8_error(4, "0xff"));
        EXPECT_EQ(error_via("[[[[1]]]]", via, small).substr(0, 5), "54001");
        Options exact;
        exact.exact_numbers = true;
        EXPECT_EQ(error_via("[1e400, \xf4\x90\x80\x80]", via, exact),
                  utf8_error(8, "0xf4 0x90 0x80 0x80"));
    }
}

// What stays as it was: well-formed UTF-8 outside strings is a grammar error (22P02), the
// grammar's errors without invalid UTF-8 keep their codes, valid texts their canonical form.
TEST(JcsUtf8, ValidUtf8KeepsItsAnswers) {
    for (Via via : kEveryPath) {
        EXPECT_EQ(error_via("\xc3\xa9", via),
                  "22P02 unexpected character in JSON text / At byte 0 of the JSON text. / ");
        EXPECT_EQ(error_via("{\"a\":1}\xe2\x82\xac", via),
                  "22P02 unexpected text after the JSON value / At byte 7 of the JSON text. / ");
        EXPECT_EQ(error_via("[\xf4\x8f\xbf\xbf]", via).substr(0, 5), "22P02");
        EXPECT_EQ(error_via("\xef\xbb\xbf{}", via).substr(0, 5), "22P02");
        EXPECT_EQ(error_via("[1e400, \"\xc3\xa9\"]", via).substr(0, 5), "22003");
        EXPECT_EQ(error_via("{\"a\":1,\"a\":2}", via).substr(0, 5), "22P02");
        EXPECT_EQ(error_via("[\"\xf4\x8f\xbf\xbf\", \"\xed\x9f\xbf\", \"\xee\x80\x80\"]", via), "");
    }
    EXPECT_EQ(canon("{\"\xee\x80\x80\":1,\"\xf0\x9f\x98\x80\":2,\"\xc3\xa9\":3}"),
              "{\"\xc3\xa9\":3,\"\xf0\x9f\x98\x80\":2,\"\xee\x80\x80\":1}");
}

TEST(JcsGrammar, RejectsMalformedText) {
    for (const char *bad : {"",          " ",        "{",
                            "[1,]",      "[1 2]",    "{\"a\":1,}",
                            "{\"a\" 1}", "{a:1}",    "'a'",
                            "01",        "1.",       ".5",
                            "+1",        "1e",       "1e+",
                            "-",         "0x10",     "tru",
                            "nul",       "[1]]",     "{} {}",
                            "\"a",       "\"\\x\"",  "\"\\u12\"",
                            "\"a\tb\"",  "\"a\nb\"", "\xef\xbb\xbf{}",
                            "[1,,2]",    "{\"a\":}", "[\"a\"x]"})
        EXPECT_EQ(sqlstate_of(bad), "22P02") << "input: " << bad;
    EXPECT_EQ(canon(" \t\r\n[ ] "), "[]");
    EXPECT_EQ(canon("true"), "true");
    EXPECT_EQ(canon("\"x\""), "\"x\"");
    EXPECT_EQ(canon("-0.0"), "0");
}

TEST(JcsErrors, MessagesAreClear) {
    try {
        canonicalize_text(R"({"a":1,"\u0061":2})");
        FAIL();
    } catch (const idem::Error &e) {
        EXPECT_STREQ(e.what(), "duplicate member name in JSON object");
        EXPECT_NE(e.detail().find("\"a\""), std::string::npos) << e.detail();
    }
    try {
        canonicalize_text("[1, 2, x]");
        FAIL();
    } catch (const idem::Error &e) {
        EXPECT_EQ(e.detail(), "At byte 7 of the JSON text.");
    }
}

namespace {
std::string filtered(const std::string &text, std::vector<idem::jcs::Path> ex,
                     std::vector<idem::jcs::Path> in) {
    Options o;
    o.exclude = std::move(ex);
    o.include = std::move(in);
    return canonicalize_text(text, o);
}
} // namespace

TEST(JcsFilters, ExcludeDropsMembersAndElements) {
    std::string doc = R"({"amount":5,"meta":{"trace_id":"t1","source":"web"},"ts":1,
                          "items":[{"sku":"a","note":"x"},{"sku":"b"}]})";
    EXPECT_EQ(
        filtered(doc, {{"meta", "trace_id"}, {"ts"}}, {}),
        R"({"amount":5,"items":[{"note":"x","sku":"a"},{"sku":"b"}],"meta":{"source":"web"}})");
    EXPECT_EQ(filtered(doc, {{"items", "0", "note"}, {"meta"}}, {}),
              R"({"amount":5,"items":[{"sku":"a"},{"sku":"b"}],"ts":1})");
    EXPECT_EQ(
        filtered(doc, {{"items", "0"}}, {}),
        R"({"amount":5,"items":[{"sku":"b"}],"meta":{"source":"web","trace_id":"t1"},"ts":1})");
    // Missing paths are ignored; a path through a scalar matches nothing.
    EXPECT_EQ(filtered(doc, {{"nope"}, {"amount", "x"}, {"items", "7"}, {"items", "-1"}}, {}),
              canonicalize_text(doc));
    // Volatile members do not change the fingerprint.
    std::string retry = R"({"ts":2,"meta":{"source":"web","trace_id":"t2"},"amount":5.0,
                            "items":[{"sku":"a","note":"x"},{"sku":"b"}]})";
    EXPECT_EQ(filtered(doc, {{"meta", "trace_id"}, {"ts"}}, {}),
              filtered(retry, {{"meta", "trace_id"}, {"ts"}}, {}));
    EXPECT_THROW(filtered(doc, {{}}, {}), idem::Error);
}

TEST(JcsFilters, IncludeKeepsOnlyPathsAndAncestors) {
    std::string doc = R"({"amount":5,"currency":"EUR","meta":{"trace_id":"t1","source":"web"},
                          "items":[{"sku":"a","qty":1},{"sku":"b","qty":2}]})";
    EXPECT_EQ(filtered(doc, {}, {{"amount"}, {"currency"}}), R"({"amount":5,"currency":"EUR"})");
    EXPECT_EQ(filtered(doc, {}, {{"meta", "source"}}), R"({"meta":{"source":"web"}})");
    EXPECT_EQ(filtered(doc, {}, {{"items", "1", "sku"}}), R"({"items":[{"sku":"b"}]})");
    EXPECT_EQ(filtered(doc, {}, {{"items"}}),
              R"({"items":[{"qty":1,"sku":"a"},{"qty":2,"sku":"b"}]})");
    // Include and exclude together: exclude applies inside included subtrees.
    EXPECT_EQ(filtered(doc, {{"meta", "trace_id"}}, {{"meta"}, {"amount"}}),
              R"({"amount":5,"meta":{"source":"web"}})");
    // Nothing matches: the root stays, empty. A path through a scalar keeps nothing.
    EXPECT_EQ(filtered(doc, {}, {{"nope"}}), "{}");
    EXPECT_EQ(filtered(doc, {}, {{"amount", "x"}}), "{}");
    EXPECT_EQ(filtered(doc, {}, {{"meta", "nope"}}), "{}");
    // An empty path includes everything.
    EXPECT_EQ(filtered(doc, {}, {{}}), canonicalize_text(doc));
    // Filters do not hide I-JSON violations.
    EXPECT_THROW(filtered(R"({"a":1,"b":{"x":1,"x":2}})", {{"b"}}, {}), idem::Error);
    // Member names and indices: "0" is a name in an object and an index in an array.
    EXPECT_EQ(filtered(R"({"0":"k","a":["x","y"]})", {{"0"}, {"a", "0"}}, {}), R"({"a":["y"]})");
}

TEST(JcsDepth, DeepNestingIsACleanError) {
    std::string deep(100000, '[');
    deep += std::string(100000, ']');
    EXPECT_EQ(sqlstate_of(deep), "54001");
    std::string deepobj;
    for (int i = 0; i < 100000; i++)
        deepobj += "{\"a\":";
    deepobj += "1" + std::string(100000, '}');
    EXPECT_EQ(sqlstate_of(deepobj), "54001");
    Options big;
    big.max_depth = 200000;
    // With the limit raised, the answer is correct (nothing recurses).
    EXPECT_EQ(canonicalize_text(deep, big), deep);
    EXPECT_EQ(canonicalize_text(deepobj, big), deepobj);
    // The limit itself: 10000 levels pass, 10001 do not.
    std::string ok(10000, '[');
    ok += std::string(10000, ']');
    EXPECT_EQ(canon(ok), ok);
    EXPECT_EQ(sqlstate_of("[" + ok + "]"), "54001");
    Options small;
    small.max_depth = 2;
    EXPECT_EQ(canonicalize_text("[[1]]", small), "[[1]]");
    EXPECT_EQ(sqlstate_of("[[[1]]]", small), "54001");
    EXPECT_EQ(sqlstate_of("{\"a\":{\"b\":{}}}", small), "54001");
}

namespace {
int g_polls = 0;
bool interrupt_after_3() {
    return ++g_polls > 3;
}
} // namespace

TEST(JcsInterrupt, LongWorkPollsTheCallback) {
    std::string big = "[";
    for (int i = 0; i < 100000; i++)
        big += (i ? ",1" : "1");
    big += "]";
    Options o;
    o.interrupted = &interrupt_after_3;
    g_polls = 0;
    EXPECT_THROW(canonicalize_text(big, o), idem::Interrupted);
    EXPECT_EQ(g_polls, 4);
}

TEST(JcsWriter, StreamingApiAndReuse) {
    idem::jcs::CanonicalWriter w;
    w.begin_object();
    w.key("b");
    w.number("1.50");
    w.key("a");
    w.begin_array();
    w.boolean(true);
    w.null();
    w.string("\x01");
    w.end_array();
    w.end_object();
    EXPECT_TRUE(w.done());
    EXPECT_EQ(w.result(), R"({"a":[true,null,"\u0001"],"b":1.5})");
    EXPECT_EQ(w.digest(), idem::sha256(w.result()));
    w.reset();
    w.number("-0");
    EXPECT_EQ(w.result(), "0");
    w.reset();
    w.begin_object();
    EXPECT_THROW(w.result(), std::logic_error);
    w.reset();
    w.set_validate_utf8(true);
    w.begin_array();
    EXPECT_THROW(w.string("\xc0\x80"), idem::Error);
    w.reset();
    w.set_validate_utf8(false);
    EXPECT_THROW(w.number("1e"), idem::Error);
    EXPECT_EQ(idem::jcs::fingerprint_text("{\"a\":1}"), idem::sha256("{\"a\":1}"));
}

namespace {

// Reference JCS string escaping, one byte at a time.
std::string ref_quoted(const std::string &s) {
    static const char h[] = "0123456789abcdef";
    std::string r = "\"";
    for (unsigned char c : s) {
        if (c == '"')
            r += "\\\"";
        else if (c == '\\')
            r += "\\\\";
        else if (c == '\b')
            r += "\\b";
        else if (c == '\f')
            r += "\\f";
        else if (c == '\n')
            r += "\\n";
        else if (c == '\r')
            r += "\\r";
        else if (c == '\t')
            r += "\\t";
        else if (c < 0x20)
            r += std::string("\\u00") + h[c >> 4] + h[c & 15];
        else
            r.push_back(static_cast<char>(c));
    }
    return r + "\"";
}

} // namespace

TEST(JcsStrings, BlockScanningAgreesWithBytewiseEscaping) {
    // Every special byte at every position of strings around the 16-byte block size, through
    // write_quoted and through the parser (escaped in the input) and the writer.
    const unsigned char specials[] = {'"', '\\', 0x01, 0x1f, '\n', 0x7f, 0x80, 0xff, ' ', 'A'};
    for (size_t len = 0; len <= 40; len++) {
        for (size_t pos = 0; pos < (len ? len : 1); pos++) {
            for (unsigned char sp : specials) {
                std::string s(len, 'x');
                if (len)
                    s[pos] = static_cast<char>(sp);
                std::string want = ref_quoted(s);
                std::vector<char> buf(idem::jcs::quoted_bound(s.size()));
                char *e = idem::jcs::write_quoted(buf.data(), s.data(), s.size());
                ASSERT_EQ(std::string(buf.data(), e), want) << len << " " << pos << " " << int(sp);
                if (sp >= 0x80)
                    continue; // not UTF-8 on its own
                ASSERT_EQ(canon(want), want) << len << " " << pos << " " << int(sp);
                ASSERT_EQ(canon("{" + want + ":1}"), "{" + want + ":1}");
            }
        }
    }
    // Multi-byte characters straddling block boundaries.
    for (size_t pad = 0; pad < 20; pad++) {
        std::string s = std::string(pad, 'a') + "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"" +
                        std::string(pad, 'b') + "\xee\x80\x80";
        EXPECT_EQ(canon(ref_quoted(s)), ref_quoted(s)) << pad;
    }
    // Strings longer than the 64 KiB pieces the writer escapes at a time.
    std::string big;
    for (int i = 0; i < 50000; i++)
        big += i % 7 == 0 ? "\"\x01" : "ab";
    EXPECT_EQ(canon(ref_quoted(big)), ref_quoted(big));
}

TEST(JcsKeys, EscapedAndPlainNamesSortAndCollide) {
    // Names that need escapes are kept apart from the output; both kinds sort together.
    EXPECT_EQ(canon(R"({"b":1,"a\"":2,"a":3,"\n":4,"a\\":5})"),
              R"({"\n":4,"a":3,"a\"":2,"a\\":5,"b":1})");
    EXPECT_EQ(sqlstate_of(R"({"a\"":1,"a\u0022":2})"), "22P02");
    EXPECT_EQ(sqlstate_of(R"({"ab":1,"a\u0062":2})"), "22P02");
    // Reordering nested objects keeps every name readable.
    EXPECT_EQ(canon(R"({"z":{"y":{"x":1,"w":2},"v":[{"u":1,"t":2}]},"s":{"r\t":1,"q":2}})"),
              R"({"s":{"q":2,"r\t":1},"z":{"v":[{"t":2,"u":1}],"y":{"w":2,"x":1}}})");
}

TEST(JcsNumbers, WriteDecimalIsTheExactLayout) {
    char buf[128];
    auto dec = [&](bool neg, const char *d, int64_t point) {
        return std::string(buf, idem::jcs::write_decimal(buf, neg, d, std::strlen(d), point));
    };
    EXPECT_EQ(dec(false, "1", 1), "1");
    EXPECT_EQ(dec(true, "125", 1), "-1.25");
    EXPECT_EQ(dec(false, "1", 22), "1e+21");
    EXPECT_EQ(dec(false, "1", 21), "100000000000000000000");
    EXPECT_EQ(dec(false, "1", -6), "1e-7");
    EXPECT_EQ(dec(false, "1", -5), "0.000001");
    EXPECT_EQ(dec(false, "123456789012345678", 18), "123456789012345678");
    for (const char *t : {"0.5", "1999.50", "-12.5e3", "1e-7", "123.456e-300", "99999e300"}) {
        std::string want = num(t, true), got(num(t, false));
        EXPECT_EQ(want, got) << t; // <= 15 digits: strict and exact agree
    }
}
