// The text canonicaliser without filters (the two-pass tape) against the streaming tokenizer and
// writer (the path that filters take): number fast paths at their edges, member name order and
// duplicates, and random documents and mutations of them, byte for byte and error for error.
#include "crypto.hpp"
#include "error.hpp"
#include "jcs.hpp"

#include <gtest/gtest.h>
#include <malloc.h>

#include <algorithm>
#include <fstream>
#include <random>
#include <string>
#include <vector>

using idem::jcs::canonicalize_text;
using idem::jcs::Options;

namespace {

const std::string kDir = std::string(IDEM_VECTORS_DIR) + "/jcs";

// The outcome of canonicalising: the text, or the error's SQLSTATE, message and detail.
struct Outcome {
    std::string text;
    std::string error;
    bool operator==(const Outcome &o) const { return text == o.text && error == o.error; }
};

std::ostream &operator<<(std::ostream &os, const Outcome &o) {
    return os << (o.error.empty() ? "ok: " + o.text : "error: " + o.error);
}

Outcome run(const std::string &text, Options o) {
    Outcome r;
    try {
        r.text = canonicalize_text(text, o);
    } catch (const idem::Error &e) {
        r.error = std::string(e.sqlstate()) + " " + e.what() + " / " + e.detail();
    }
    return r;
}

// The unfiltered path: the tape.
Outcome fast(const std::string &text, bool exact = false) {
    Options o;
    o.exact_numbers = exact;
    return run(text, o);
}

// The streaming writer: an exclude filter that matches nothing (no valid member name is the
// byte 0xFF) sends the text through it.
Outcome reference(const std::string &text, bool exact = false) {
    Options o;
    o.exact_numbers = exact;
    o.exclude = {{"\xff"}};
    return run(text, o);
}

std::string canon(const std::string &text, bool exact = false) {
    Outcome r = fast(text, exact);
    EXPECT_EQ(r.error, "") << text;
    return r.text;
}

void expect_same(const std::string &text) {
    for (bool exact : {false, true})
        ASSERT_EQ(fast(text, exact), reference(text, exact)) << "exact=" << exact << " " << text;
}

} // namespace

TEST(JcsTape, NumbersCsvThroughTheParser) {
    std::ifstream f(kDir + "/numbers.csv");
    ASSERT_TRUE(f.good());
    std::string line;
    size_t lines = 0;
    while (std::getline(f, line)) {
        if (line.empty())
            continue;
        lines++;
        size_t a = line.find(','), b = line.find(',', a + 1);
        std::string input = line.substr(a + 1, b - a - 1);
        std::string expected = line.substr(b + 1);
        ASSERT_EQ(canon(input), expected) << line;
        ASSERT_EQ(canon("[" + input + "," + expected + "]"), "[" + expected + "," + expected + "]")
            << line;
        ASSERT_EQ(fast(input, true), reference(input, true)) << line;
    }
    EXPECT_EQ(lines, 20034u);
}

TEST(JcsTape, NumberFastPathEdges) {
    struct Case {
        const char *in, *strict;
    };
    const Case cases[] = {
        {"0", "0"},
        {"-0", "0"},
        {"0.0", "0"},
        {"-0.0", "0"},
        {"-0.000", "0"},
        {"1.0", "1"},
        {"-1.50", "-1.5"},
        {"1999.50", "1999.5"},
        {"10", "10"},
        {"100.000", "100"},
        {"123456789012345", "123456789012345"},         // 15 digits
        {"-123456789012345", "-123456789012345"},       // 15 digits
        {"1234567890123456", "1234567890123456"},       // 16 digits: exact double
        {"12345678901234567", "12345678901234568"},     // 17 digits: rounded
        {"9007199254740993", "9007199254740992"},       // 2^53 + 1
        {"123456789012345.0", "123456789012345"},       // 15 digits and a zero fraction
        {"12345678901234.5", "12345678901234.5"},       // 15 significant digits
        {"1234567890123.456", "1234567890123.456"},     // 16 significant digits
        {"0.123456789012345", "0.123456789012345"},     // 15
        {"0.1234567890123456", "0.1234567890123456"},   // 16
        {"0.12345678901234567", "0.12345678901234566"}, // 17: rounded
        {"0.000001", "0.000001"},                       // 1e-6: fixed notation
        {"0.0000001", "1e-7"},                          // 1e-7: exponent
        {"-0.000001", "-0.000001"},
        {"0.00000123", "0.00000123"},
        {"0.000000123", "1.23e-7"},
        {"0.0000010", "0.000001"},
        {"0.00000100000", "0.000001"},
        {"0.000001000000000000001", "0.000001000000000000001"}, // 16 digits
        {"0.00000100000000000000001", "0.000001"},              // 18 digits: rounded to a double
        {"100000000000000000000", "100000000000000000000"},     // 1e20
        {"1000000000000000000000", "1e+21"},                    // 1e21
        {"999999999999999999999", "1e+21"},
        {"100000000000000000000.0", "100000000000000000000"},
        {"1e2", "100"},
        {"1E2", "100"},
        {"1e-7", "1e-7"},
        {"1.5e+3", "1500"},
        {"0.5", "0.5"},
        {"5", "5"},
        {"-5", "-5"},
        {"1e400", ""},   // overflow in strict mode
        {"1e-400", "0"}, // underflow
    };
    for (const Case &c : cases) {
        Outcome strict = fast(c.in);
        if (*c.strict == 0) {
            EXPECT_NE(strict.error, "") << c.in;
        } else {
            EXPECT_EQ(strict.text, c.strict) << c.in;
            EXPECT_EQ(fast(std::string("{\"k\":") + c.in + "}").text,
                      std::string("{\"k\":") + c.strict + "}");
        }
        expect_same(c.in);
        expect_same(std::string("[") + c.in + "]");
        expect_same(std::string("{\"b\":") + c.in + ",\"a\":" + c.in + "}");
    }
    // Exact mode keeps every digit; up to 15 it agrees with strict mode.
    EXPECT_EQ(canon("123456789012345", true), "123456789012345");
    EXPECT_EQ(canon("12345678901234567", true), "12345678901234567");
    EXPECT_EQ(canon("0.12345678901234567", true), "0.12345678901234567");
    EXPECT_EQ(canon("-0.0", true), "0");
    EXPECT_EQ(canon("1999.50", true), "1999.5");
    EXPECT_EQ(canon("0.0000001", true), "1e-7");
    // Malformed numbers are rejected at their first byte.
    for (const char *bad : {"01", "-01", "00", "1.", "-", "-.5", "1.2.3", "1e", "1e+", "1-2", "0x1",
                            "1.5e", "--1", "-a", "1.e5", "2.-1"}) {
        EXPECT_EQ(fast(bad).error.substr(0, 5), "22P02") << bad;
        expect_same(bad);
        expect_same(std::string("[0,") + bad + "]");
    }
    EXPECT_EQ(fast("[0, 1.2.3]").error, "22P02 invalid JSON number / At byte 4 of the JSON text.");
    for (const char *bad : {"-Infinity", "-NaN", "Infinity", "NaN", "-I"}) {
        EXPECT_EQ(fast(bad).error.substr(0, 5), "22P02") << bad;
        expect_same(bad);
    }
}

TEST(JcsTape, NameOrderByUtf16CodeUnits) {
    // U+10000 (F0 90 80 80, surrogates D800 DC00) sorts before U+E000 (EE 80 80) and U+FFFF in
    // UTF-16, after them in code point order; both after U+D7FF.
    const std::string sup = "\xf0\x90\x80\x80", pua = "\xee\x80\x80", ffff = "\xef\xbf\xbf",
                      d7ff = "\xed\x9f\xbf";
    const std::string want =
        "{\"a\":0,\"" + d7ff + "\":1,\"" + sup + "\":2,\"" + pua + "\":3,\"" + ffff + "\":4}";
    EXPECT_EQ(canon("{\"" + ffff + "\":4,\"" + pua + "\":3,\"" + sup + "\":2,\"" + d7ff +
                    "\":1,\"a\":0}"),
              want);
    EXPECT_EQ(canon("{\"\\uffff\":4,\"\\ue000\":3,\"\\ud800\\udc00\":2,\"\\ud7ff\":1,\"a\":0}"),
              want);
    // The same after a common prefix longer than 8 bytes (past the prefix compare).
    const std::string p = "prefix-12345";
    EXPECT_EQ(canon("{\"" + p + pua + "\":1,\"" + p + sup + "\":2,\"" + p + "\":0}"),
              "{\"" + p + "\":0,\"" + p + sup + "\":2,\"" + p + pua + "\":1}");
    // Names that differ only after 8 bytes, by length, or by a U+0000 at the end.
    EXPECT_EQ(canon(R"({"abcdefghij":1,"abcdefghi":2,"abcdefgh":3,"abcdefgh\u0000":4})"),
              R"({"abcdefgh":3,"abcdefgh\u0000":4,"abcdefghi":2,"abcdefghij":1})");
    EXPECT_EQ(canon(R"({"":1,"\u0000":2," ":3})"), R"({"":1,"\u0000":2," ":3})");
    EXPECT_EQ(canon(R"({" ":3,"\u0000":2,"":1})"), R"({"":1,"\u0000":2," ":3})");
    // Escaped names sort by their value and are written in canonical form.
    EXPECT_EQ(canon(R"({"\u0062":1,"a":2,"\/":3,"\t":4})"), R"({"\t":4,"/":3,"a":2,"b":1})");
    // Many members (the large-object sort).
    std::string in = "{", out = "{";
    for (int i = 99; i >= 0; i--)
        in += (i == 99 ? "\"" : ",\"") + std::to_string(i) + "\":" + std::to_string(i);
    std::vector<std::string> names;
    for (int i = 0; i < 100; i++)
        names.push_back(std::to_string(i));
    std::sort(names.begin(), names.end());
    for (size_t i = 0; i < names.size(); i++)
        out += (i ? ",\"" : "\"") + names[i] + "\":" + names[i];
    EXPECT_EQ(canon(in + "}"), out + "}");
    expect_same(in + "}");
    expect_same(in + ",\"5\":0}");
}

TEST(JcsTape, DuplicateNamesAfterUnescaping) {
    for (const char *dup : {R"({"a":1,"a":2})", R"({"a":1,"\u0061":2})", R"({"\u0061":1,"a":2})",
                            R"({"a/":1,"a\/":2})", R"({"\ud83d\ude00":1,"😀":2})",
                            R"({"x":{"b":1,"c":2,"b":3}})", R"({"abcdefghij":1,"abcdefghij":2})",
                            R"({"z":1,"y":2,"x":3,"w":4,"v":5,"u":6,"t":7,"s":8,"r":9,"q":10,
                                "p":11,"o":12,"n":13,"m":14,"l":15,"k":16,"j":17,"z":18})"}) {
        EXPECT_EQ(fast(dup).error.substr(0, 5), "22P02") << dup;
        expect_same(dup);
    }
    EXPECT_EQ(fast(R"({"b":1,"\u0061":2,"a":3})").error,
              "22P02 duplicate member name in JSON object / The name \"a\" occurs more than once "
              "(after unescaping).");
    // Equal prefixes, different names.
    EXPECT_EQ(canon(R"({"abcdefgh2":1,"abcdefgh1":2})"), R"({"abcdefgh1":2,"abcdefgh2":1})");
}

TEST(JcsTape, ObjectsOfOneShapeReuseTheirOrder) {
    // Same keys in the same sequence: the remembered order; another sequence: sorted afresh.
    expect_same(
        R"([{"b":1,"a":2,"c":3},{"b":4,"a":5,"c":6},{"c":7,"b":8,"a":9},{"b":0,"a":0,"c":0}])");
    EXPECT_EQ(canon(R"([{"b":1,"a":2},{"b":3,"a":4},{"a":5,"b":6},{"b":7,"a":8}])"),
              R"([{"a":2,"b":1},{"a":4,"b":3},{"a":5,"b":6},{"a":8,"b":7}])");
    // Names equal in their first 8 bytes have equal keys: never remembered, always compared.
    EXPECT_EQ(canon(R"([{"abcdefgh_y":1,"abcdefgh_x":2},{"abcdefgh_x":3,"abcdefgh_y":4},)"
                    R"({"abcdefgh_y":5,"abcdefgh_x":6}])"),
              R"([{"abcdefgh_x":2,"abcdefgh_y":1},{"abcdefgh_x":3,"abcdefgh_y":4},)"
              R"({"abcdefgh_x":6,"abcdefgh_y":5}])");
    expect_same(R"([{"abcdefgh_y":1,"abcdefgh_x":2},{"abcdefgh_x":3,"abcdefgh_y":4}])");
    // A duplicate after objects of the same shape.
    expect_same(R"([{"b":1,"a":2},{"b":1,"a":2},{"b":1,"b":2}])");
    expect_same(R"([{"b":1,"a":2},{"b":1,"a":2},{"a":1,"\u0061":2}])");
    EXPECT_EQ(fast(R"([{"b":1,"a":2},{"b":1,"a":2},{"b":1,"b":2}])").error.substr(0, 5), "22P02");
    // Nested shapes, escaped names, and every size up to and past the remembered maximum.
    expect_same(R"([{"y":{"q":1,"p":2},"x":[{"q":3,"p":4}]},{"y":{"q":5,"p":6},"x":[]}])");
    expect_same(R"([{"\u0062":1,"a":2},{"b":3,"a":4},{"\u0062":5,"a":6}])");
    for (int n = 1; n <= 12; n++) {
        std::string obj = "{", arr = "[";
        for (int i = n; i >= 1; i--)
            obj += (i == n ? "\"k" : ",\"k") + std::to_string(i) + "\":" + std::to_string(i);
        obj += "}";
        for (int r = 0; r < 3; r++)
            arr += (r ? "," : "") + obj;
        expect_same(arr + "]");
    }
    // Writer reuse: nothing is remembered across documents.
    idem::jcs::CanonicalWriter w;
    idem::jcs::parse_into(R"([{"b":1,"a":2},{"b":3,"a":4}])", w);
    EXPECT_EQ(w.result(), R"([{"a":2,"b":1},{"a":4,"b":3}])");
    idem::jcs::parse_into(R"([{"a":1,"b":2},{"b":3,"a":4}])", w);
    EXPECT_EQ(w.result(), R"([{"a":1,"b":2},{"a":4,"b":3}])");
}

TEST(JcsTape, ObjectsInArraysPredictTheirNames) {
    // The names of the last object in an array (with what followed them up to the value) are
    // compared with the text of the next object's members: every near miss parses normally.
    const char *docs[] = {
        R"([{"sku": "A", "qty": 1}, {"sku": "B", "qty": 2}, {"sku" : "C", "qty":3}])",
        R"([{"sku": "A", "qty": 1}, {"sk": "B", "qty": 2}, {"skux": "C", "sku": 3}])",
        R"([{"sku": "A", "qty": 1}, {"sku": "B", "qty": 2, "z": 0}, {"sku": 1}])",
        R"([{"sku": "A", "qty": 1}, {"s\u006bu": "B", "qty": 2}, {"sku": "C", "qty": 3}])",
        R"([{"sku": "A", "qty": 1}, {"qty": "B", "sku": 2}, {"sku": [], "qty": {}}])",
        R"([{"sku":1,"sku2":2},{"sku":1,"sku":2},{"sku":1,"sku2":2}])",
        R"([{"a_long_name_x": 1, "b": 2}, {"a_long_name_x": 3, "b": 4}, {"a_long_name_x" :5}])",
        R"([{"a_much_longer_name_xyz": 1, "b": 2}, {"a_much_longer_name_xyz": 3, "b": 4}])",
        R"([{"é": 1, "è": 2}, {"é": 3, "è": 4}])",
        "[{\"\xc3\xa9\": 1, \"b\": 2}, {\"\xc3\xa9\": 3, \"b\": 4}]",
        R"([{"b": 1, "a": 2}, {"b": 1, "a": 2}, {"b": 1, "a"])",
        R"([{"b": 1, "a": 2}, {"b": 1, "a": 2}, {"b": 1, "a": )",
        R"([{"b": 1, "a": 2}, {"b": 1, "a": 2}, {"b": 1, "a)",
        R"({"x": [{"b": 1, "a": 2}], "y": {"b": 1, "a": 2}, "b": 1, "a": 2})",
    };
    for (const char *d : docs) {
        expect_same(d);
        std::string s(d);
        for (size_t cut = 0; cut < s.size(); cut++)
            expect_same(s.substr(0, cut));
    }
    EXPECT_EQ(canon(R"([{"sku": "A", "qty": 1}, {"sku" : "B", "qty":2}, {"sku": 3, "qty": 4}])"),
              R"([{"qty":1,"sku":"A"},{"qty":2,"sku":"B"},{"qty":4,"sku":3}])");
}

TEST(JcsTape, ObjectsInArraysMatchTheirShapeWhole) {
    // An object in an array whose members all match the last recorded shape, with string or
    // number values, is closed in the recorded order; every near miss parses normally.
    const char *docs[] = {
        // value types: literals, containers, escaped strings, numbers not in ECMAScript form
        R"([{"b": 1, "a": "x"}, {"b": 2, "a": "y"}, {"b": true, "a": null}, {"b": 3, "a": "z"}])",
        R"([{"b": 1, "a": "x"}, {"b": [1], "a": {"c": 1}}, {"b": 3, "a": "z"}])",
        R"([{"b": 1, "a": "x"}, {"b": 2, "a": "\u0079"}, {"b": 1e2, "a": "z"}, {"b": 0}])",
        R"([{"b": 1, "a": "x"}, {"b": -0.0, "a": "\n"}, {"b": 1.50, "a": "\u00e9"}])",
        // whitespace variants, before and after names, values, separators and braces
        R"([{"b": 1, "a": "x"}, { "b": 2, "a": "y"}, {"b": 3 , "a": "z"}, {"b": 4, "a": "w" }])",
        R"([{"b": 1, "a": "x"}, {"b": 2,"a": "y"}, {"b": 3,  "a": "z"}, {"b": 4, "a":"w"}])",
        "[{\"b\": 1, \"a\": 2}, {\"b\": 2,\n\"a\": 3}, {\"b\":\t3, \"a\": 4}]",
        // duplicates, missing, extra and reordered members, other names
        R"([{"b": 1, "a": 2}, {"b": 1, "b": 2}, {"b": 1, "a": 2}])",
        R"([{"b": 1, "a": 2}, {"b": 1, "a": 2, "a": 3}, {"b": 1, "a": 2, "c": 3}])",
        R"([{"b": 1, "a": 2}, {"b": 1}, {"a": 1, "b": 2}, {"b": 1, "a": 2}, {"b": 1, "ab": 2}])",
        R"([{"b": 1, "a": 2}, {"b": 1, "\u0061": 2}, {"b": 1, "a": 2}])",
        R"([{"b": 1, "a": 2, "c": 3}, {"b": 1, "a": 2}, {"b": 1, "a": 2, "c": 3, "d": 4}])",
        // nested arrays of objects, objects of one shape as members (not in arrays)
        R"([[{"b": 1, "a": 2}, {"b": 3, "a": 4}], [{"b": 5, "a": 6}], {"b": 7, "a": 8}])",
        R"([{"b": 1, "a": 2}, {"x": {"b": 3, "a": 4}}, {"b": 5, "a": 6}])",
        R"({"b": {"b": 1, "a": 2}, "a": [{"b": 1, "a": 2}, {"b": 1, "a": 2}]})",
        // errors inside a matching object
        R"([{"b": 1, "a": 2}, {"b": 1, "a": 2]])",
        R"([{"b": 1, "a": 2}, {"b": 1, "a": 2,}])",
        R"([{"b": 1, "a": 2}, {"b": 1, "a": 01}])",
        R"([{"b": 1, "a": 2}, {"b": 1, "a": "x)",
        R"([{"b": 1, "a": 2}, {"b": 1 "a": 2}])",
        R"([{"b": 1, "a": 2}, {"b": 1, "a": 2}x])",
    };
    for (const char *d : docs) {
        expect_same(d);
        std::string s(d);
        for (size_t cut = 0; cut < s.size(); cut++)
            expect_same(s.substr(0, cut));
    }
    EXPECT_EQ(canon(R"([{"sku": "A", "qty": 1}, {"sku": "B", "qty": 2}, {"sku": "C", "qty": 3}])"),
              R"([{"qty":1,"sku":"A"},{"qty":2,"sku":"B"},{"qty":3,"sku":"C"}])");
    // Many objects of one shape (the benchmark's items), every size of shape.
    for (int n = 2; n <= 9; n++) {
        std::string arr = "[";
        for (int r = 0; r < 5; r++) {
            arr += r ? ", {" : "{";
            for (int i = n; i >= 1; i--)
                arr += (i == n ? "\"k" : ", \"k") + std::to_string(i) + "\": " +
                       (i % 2 ? std::to_string(r * i) + ".25" : "\"v" + std::to_string(r) + "\"");
            arr += "}";
        }
        expect_same(arr + "]");
    }
}

TEST(JcsTape, ShapedObjectsKeepTheirOwnShape) {
    // Objects in arrays that match a recorded shape whole are written from that shape's
    // record in pass 2; a later shape must not change how earlier objects are written.
    const std::string doc =
        R"([{"b": 1, "a": "x"}, {"b": 2, "a": "y"}, {"d": 3, "c": "z"}, {"d": 4, "c": "w"},)"
        R"( {"b": 5, "a": "v"}, {"b": -0, "a": "u"}, [{"f": 1, "e": 2}, {"f": 3, "e": 4}],)"
        R"( {"b": 6, "a": "t"}, {"b": 7.50, "a": "s"}, {"b": 8, "a": "r"}])";
    EXPECT_EQ(canon(doc), R"([{"a":"x","b":1},{"a":"y","b":2},{"c":"z","d":3},{"c":"w","d":4},)"
                          R"({"a":"v","b":5},{"a":"u","b":0},[{"e":2,"f":1},{"e":4,"f":3}],)"
                          R"({"a":"t","b":6},{"a":"s","b":7.5},{"a":"r","b":8}])");
    expect_same(doc);
    for (size_t cut = 0; cut < doc.size(); cut++)
        expect_same(doc.substr(0, cut));
    // Names whose text up to the value is 16 bytes (recorded) and 17 (not recorded).
    const std::string names = R"([{"bbbbbbbbbbbb": 1, "aaaaaaaaaaaaa": 2}, {"bbbbbbbbbbbb": 3, )"
                              R"("aaaaaaaaaaaaa": 4}, {"bbbbbbbbbbbb": 5, "aaaaaaaaaaaaa": 6}])";
    EXPECT_EQ(canon(names), R"([{"aaaaaaaaaaaaa":2,"bbbbbbbbbbbb":1},{"aaaaaaaaaaaaa":4,)"
                            R"("bbbbbbbbbbbb":3},{"aaaaaaaaaaaaa":6,"bbbbbbbbbbbb":5}])");
    expect_same(names);
    // Thousands of shaped objects (one token each) with an interrupt callback: it is still
    // polled, and the result is the streaming writer's.
    std::string many = "[";
    for (int i = 0; i < 20000; i++)
        many += (i ? ", " : "") + std::string(R"({"id": )") + std::to_string(i) + R"(, "tag": "t)" +
                std::to_string(i % 10) + "\"}";
    many += "]";
    expect_same(many);
    Options o;
    static int polls;
    polls = 0;
    o.interrupted = [] { return ++polls < 0; };
    EXPECT_EQ(run(many, o).text, reference(many).text);
    EXPECT_GE(polls, 2);
}

TEST(JcsTape, BuffersOfAHugeDocumentAreNotKept) {
    // A writer lives as long as the backend: after a big document, the next one must not keep
    // its buffers. Arrays whose objects change shape every two elements make a shape record
    // for every other object.
#if defined(__SANITIZE_ADDRESS__)
    GTEST_SKIP() << "mallinfo2 does not see the sanitizer's allocator";
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
    GTEST_SKIP() << "mallinfo2 does not see the sanitizer's allocator";
#endif
#endif
    std::string doc = "[";
    while (doc.size() < (size_t(8) << 20))
        doc += R"({"a":0,"b":0},{"a":0,"b":0},{"b":0,"a":0},{"b":0,"a":0},)";
    doc += "1]";
    auto used = [] { // bytes allocated (glibc), including blocks of their own mapping
        const struct mallinfo2 m = mallinfo2();
        return m.uordblks + m.hblkhd;
    };
    const size_t before = used();
    idem::jcs::CanonicalWriter w;
    idem::jcs::parse_into(doc, w);
    EXPECT_GT(used(), before + (size_t(32) << 20)); // (the tape was big)
    idem::jcs::parse_into("[1]", w);
    EXPECT_LT(used(), before + (size_t(1) << 20));
    EXPECT_FALSE(w.shrink()); // (nothing big left)
    EXPECT_EQ(w.result(), "[1]");
    // shrink() frees them at once (the SQL functions call it after each call).
    idem::jcs::parse_into(doc, w);
    EXPECT_TRUE(w.shrink());
    EXPECT_LT(used(), before + (size_t(1) << 20));
    EXPECT_THROW(w.result(), std::logic_error);
    // The streaming writer's buffers too (an object of 200,000 members, through a filter).
    std::string wide = "{";
    for (int i = 0; i < 200000; i++)
        wide += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":" + std::to_string(i);
    wide += "}";
    Options f;
    f.exclude = {{"k1"}};
    idem::jcs::CanonicalWriter fw(f);
    const size_t before_wide = used();
    idem::jcs::parse_into(wide, fw);
    EXPECT_GT(used(), before_wide + (size_t(4) << 20));
    EXPECT_TRUE(fw.shrink());
    EXPECT_LT(used(), before_wide + (size_t(1) << 20));
    idem::jcs::parse_into(R"({"k1": 1, "k2": 2})", fw);
    EXPECT_EQ(fw.result(), R"({"k2":2})");
}

TEST(JcsTape, FingerprintWhileWriting) {
    // fingerprint_into hashes during pass 2: the same digest as hashing the result, for
    // canonical texts of every length around the points where it hands bytes to SHA-256.
    idem::jcs::CanonicalWriter w;
    std::string arr = "[";
    for (int i = 0; i < 400; i++) {
        arr +=
            (i ? ", " : "") + std::string(R"({"v": )") + std::to_string(i % 10) + R"(, "k": "x"})";
        const std::string doc = arr + "]";
        const std::string c = canon(doc);
        EXPECT_EQ(idem::jcs::fingerprint_into(doc, w), idem::sha256(c)) << doc.size();
        EXPECT_EQ(w.result(), c);
        EXPECT_EQ(w.digest(), idem::sha256(c)); // (again: not hashed twice)
        idem::jcs::parse_into(doc, w);
        EXPECT_EQ(w.digest(), idem::sha256(c));
    }
    // After an error, and through the streaming writer (filters).
    EXPECT_THROW(idem::jcs::fingerprint_into(arr + ", x]", w), idem::Error);
    EXPECT_THROW(w.digest(), std::logic_error);
    EXPECT_EQ(idem::jcs::fingerprint_into("[1, 2]", w), idem::sha256("[1,2]"));
    Options f;
    f.exclude = {{"k"}};
    idem::jcs::CanonicalWriter fw(f);
    EXPECT_EQ(idem::jcs::fingerprint_into(R"({"k": 1, "v": 2})", fw), idem::sha256(R"({"v":2})"));
    EXPECT_EQ(idem::jcs::fingerprint_text(arr + "]"), idem::sha256(canon(arr + "]")));
}

TEST(JcsTape, DigestsAfterAnyOrderOfCalls) {
    // fingerprint_into starts its digest before it canonicalises, and a call that fails leaves
    // that digest started and unfed. Whatever comes next (small or through the tape, hashed
    // while written or after) must hash its own canonical text from the start, exactly once.
    // Every sequence of three calls on one writer.
    std::string big = "[";
    for (int i = 0; i < 40; i++)
        big += (i ? ", " : "") + std::string(R"({"v": )") + std::to_string(i) + R"(, "k": "x"})";
    const std::vector<std::string> docs = {R"({"b": 1, "a": [true, null]})", big + "]",
                                           R"({"a": })", big + ", x]"};
    ASSERT_GT(docs[1].size(), 512u); // (hashed while written)
    for (int seq = 0; seq < 512; seq++) {
        idem::jcs::CanonicalWriter w;
        for (int step = 0, s = seq; step < 3; step++, s /= 8) {
            const std::string &doc = docs[s % 4];
            const bool fp = (s / 4) % 2 == 0;
            SCOPED_TRACE(std::to_string(seq) + " " + std::to_string(step));
            if (s % 4 >= 2) {
                if (fp)
                    EXPECT_THROW(idem::jcs::fingerprint_into(doc, w), idem::Error);
                else
                    EXPECT_THROW(idem::jcs::parse_into(doc, w), idem::Error);
                EXPECT_THROW(w.digest(), std::logic_error);
                continue;
            }
            const idem::Digest want = idem::sha256(canon(doc));
            if (fp) {
                EXPECT_EQ(idem::jcs::fingerprint_into(doc, w), want);
            } else {
                idem::jcs::parse_into(doc, w);
                EXPECT_EQ(w.digest(), want);
            }
        }
    }
}

TEST(JcsTape, EscapedStringValues) {
    // String values with escapes or non-ASCII bytes are written as they are decoded;
    // surrogate escapes and anything malformed go the general way. Each case, whole and cut
    // at every byte, against the streaming writer.
    std::vector<std::string> docs = {
        R"(["\" \\ \/ \b \f \n \r \t"])",
        R"(["\u0000\u0001\u001f\u0020\u0022\u005c\u002f\u007f\u0080\u00e9\u07ff\u0800\uffff"])",
        R"(["\u00E9\u00e9\uABCD\uabcd", "x\u0041y"])",
        "[\"caf\xc3\xa9\", \"caf\xc3\xa9\\n\", \"\xe2\x80\xa8\\t\xf0\x9f\x98\x80\"]",
        R"(["\ud83d\ude00", "a\ud83d\ude00b\u00e9"])",
        R"(["\ud83d", "\ude00", "\ud83dx"])",
        R"(["\u12", "\u12g4", "\x", "\)",
        "[\"a\xc3\", \"\xed\xa0\x80\", \"\xc0\xaf\", \"\\u00e9\xff\"]",
        "[\"\\n\x01\"]",
        R"({"k": "v\u00e9", "j": ["\n"]})",
    };
    // Long values (the side buffer grows inside one string), with escapes everywhere.
    std::string longer = "[\"";
    for (int i = 0; i < 300; i++)
        longer += i % 3 ? "abcdefghij\\u00e9" : "\\\"\\n\\u0001\xc3\xa9";
    docs.push_back(longer + "\"]");
    docs.push_back(std::string("[\"") + std::string(5000, 'x') + "\\n\"]");
    for (const std::string &d : docs) {
        expect_same(d);
        for (size_t cut = 0; cut < d.size() && d.size() < 200; cut++)
            expect_same(d.substr(0, cut));
    }
    EXPECT_EQ(canon(R"(["\u0041\u00e9\u001F\/\u2028"])"), "[\"A\xc3\xa9\\u001f/\xe2\x80\xa8\"]");
}

// Objects put in order at every depth, escaped or non-ASCII names, names equal in their first 8
// bytes, duplicates, errors, more than 32 members, numbers that grow, and texts either side of
// 512 bytes (hashing while writing) and 4 KiB (buffers looked at for freeing).
TEST(JcsTape, ObjectsOrderedAtEveryDepth) {
    EXPECT_EQ(
        canon(R"({"b":{"d":[{"f":1,"e":2},{"h":true,"g":null}],"c":"x"},"a":[{"z":1,"y":2}]})"),
        R"({"a":[{"y":2,"z":1}],"b":{"c":"x","d":[{"e":2,"f":1},{"g":null,"h":true}]}})");
    EXPECT_EQ(canon(R"([{"b":{"d":1,"c":2},"a":0},{"a":0}])"),
              R"([{"a":0,"b":{"c":2,"d":1}},{"a":0}])");
    EXPECT_EQ(canon(R"({"a":1,"b":{"c":1,"d":{"f":{"h":1,"g":2},"e":1}}})"),
              R"({"a":1,"b":{"c":1,"d":{"e":1,"f":{"g":2,"h":1}}}})");
    EXPECT_EQ(canon(" {\n \"b\" : 1 ,\t\"a\" :\r\n2 } "), R"({"a":2,"b":1})");
    // Long members (more than 32 bytes each), and names equal in their first 8 bytes.
    EXPECT_EQ(
        canon(
            R"({"abcdefghj":"0123456789012345678901234567890123456789","abcdefghi":[1,2,3,4,5,6,7,8,9,10,11,12]})"),
        R"({"abcdefghi":[1,2,3,4,5,6,7,8,9,10,11,12],"abcdefghj":"0123456789012345678901234567890123456789"})");
    expect_same(R"({"abcdefgh":1,"abcdefg":2,"abcdefgh\u0000":3,"abcdefghi":4})");
    // Escaped and non-ASCII names, duplicates, errors.
    expect_same(R"({"b":1,"\u0061":2})");
    expect_same("{\"\xc3\xa9\":1,\"e\":2}");
    expect_same(R"({"b":{"c":1,"c":2},"a":1})");
    expect_same(R"({"b":1,"a":2,"b":3})");
    expect_same(R"({"b":1,"a":2}x)");
    expect_same(R"({"b":1,"a":[1,2,}])");
    expect_same(R"({"b":"\ud800","a":2})");
    // 40 members in reverse order (more than the insertion sort takes).
    std::string many = "{";
    for (int i = 39; i >= 0; i--)
        many += "\"m" + std::to_string(100 + i) + "\":" + std::to_string(i) + (i ? "," : "}");
    std::string sorted = "{";
    for (int i = 0; i < 40; i++)
        sorted +=
            "\"m" + std::to_string(100 + i) + "\":" + std::to_string(i) + (i < 39 ? "," : "}");
    EXPECT_EQ(canon(many), sorted);
    // Numbers that take more room than their text (1e20 -> 21 digits), in a sorted object.
    std::string grow = "{\"b\":[", grown = "{\"a\":0,\"b\":[";
    for (int i = 0; i < 80; i++) {
        grow += std::string(i ? "," : "") + "1e20";
        grown += std::string(i ? "," : "") + "100000000000000000000";
    }
    EXPECT_EQ(canon(grow + "],\"a\":0}"), grown + "]}");
    // Either side of 512 bytes and of 4 KiB.
    for (size_t size : {size_t(510), size_t(511), size_t(512), size_t(4096), size_t(4097)}) {
        std::string doc = "{\"b\":\"" + std::string(size - 14, 'x') + "\",\"a\":1}";
        ASSERT_EQ(doc.size(), size);
        EXPECT_EQ(canon(doc), "{\"a\":1,\"b\":\"" + std::string(size - 14, 'x') + "\"}");
    }
}

// One writer through many small documents, with failures and bigger documents in between,
// gives what a new writer gives.
TEST(JcsTape, AReusedWriterAgreesWithANewOne) {
    idem::jcs::CanonicalWriter w;
    size_t done = 0;
    for (uint32_t seed = 0; seed < 3000; seed++) {
        std::string doc = seed % 7 == 0 ? "{\"x\":[" + std::string(600, ' ') + "1]}" : "";
        if (doc.empty()) {
            std::mt19937 rng(seed);
            doc = "{\"k" + std::to_string(rng() % 50) + "\":[{\"b\":" + std::to_string(rng() % 9) +
                  ",\"a\":\"v\"}],\"j" + std::to_string(rng() % 50) +
                  "\":" + (rng() % 5 == 0 ? "1e999" : "{\"d\":1,\"c\":[]}") + "}";
        }
        Outcome fresh = fast(doc);
        Outcome reused;
        try {
            idem::jcs::parse_into(doc, w);
            reused.text = std::string(w.result());
            EXPECT_EQ(w.digest(), idem::sha256(reused.text));
        } catch (const idem::Error &e) {
            reused.error = std::string(e.sqlstate()) + " " + e.what() + " / " + e.detail();
        }
        ASSERT_EQ(reused, fresh) << doc;
        done += fresh.error.empty();
    }
    EXPECT_GT(done, 2000u);
}

// After a text that fails, even one whose value is complete before the error (text after it),
// no result is left from it or from the document before, on every path.
TEST(JcsTape, AFailedTextLeavesNoResult) {
    Options tape, streaming;
    streaming.exclude = {{"\xff"}};
    for (const Options &o : {tape, streaming}) {
        idem::jcs::CanonicalWriter w(o);
        idem::jcs::parse_into(R"({"b":1,"a":2})", w);
        EXPECT_EQ(w.result(), R"({"a":2,"b":1})");
        EXPECT_THROW(idem::jcs::parse_into(R"({"b":1,"a":2}x)", w), idem::Error);
        EXPECT_THROW(w.result(), std::logic_error) << o.exclude.size();
    }
}

TEST(JcsTape, StringsAndLiterals) {
    for (const char *s : {R"("")", R"("plain")", R"("Zo\u00eb")", R"("\u0000")", R"("a\"b")",
                          R"("\/\b\f\n\r\t\\")", R"("\u001f\u007f\u0080")", R"("\ud83d\ude00")",
                          "\"\xe2\x80\xa8\"", "true", "false", "null", "[true,false,null]",
                          "{\"t\":true,\"f\":false,\"n\":null}", "\"\\u00e9\"", "[\"\\\"\"]"}) {
        expect_same(s);
        expect_same(std::string("{\"k\" : ") + s + " }");
    }
    EXPECT_EQ(canon(R"(["\u0000","\/","\u00e9","\u2028"])"),
              "[\"\\u0000\",\"/\",\"\xc3\xa9\",\"\xe2\x80\xa8\"]");
    for (const char *bad : {"tru", "truE", "nul", "fals", "[true false]", "\"\\u0000", "\"\x01\"",
                            "\"\\ud800\"", "\"\\udc00\\ud800\"", "\"\xc3\"", "{\"\xc3\":1}"})
        expect_same(bad);
}

TEST(JcsTape, GrammarErrorsMatchTheStreamingParser) {
    for (const char *bad : {"",
                            " ",
                            "{",
                            "}",
                            "[",
                            "]",
                            "[1,]",
                            "[1 2]",
                            "{\"a\":1,}",
                            "{\"a\" 1}",
                            "{a:1}",
                            "'a'",
                            "[1]]",
                            "{} {}",
                            "\"a",
                            "\xef\xbb\xbf{}",
                            "[1,,2]",
                            "{\"a\":}",
                            "[\"a\"x]",
                            "{\"a\":1 \"b\"",
                            "{,}",
                            "[,]",
                            "{\"a\"",
                            "{\"a\":",
                            "{\"a\":1",
                            "[1",
                            "[1,",
                            "{\"a\":1]",
                            "[1}",
                            "\x80",
                            "{\"a\":1,\"b\"}",
                            "  {\"a\":[{}, [], {\"b\":[1, {\"c\":2}]}]}  x"})
        expect_same(bad);
    expect_same("  {\"a\":[{}, [], {\"b\":[1, {\"c\":2}]}]}  ");
    expect_same(" [ [ ] , { } , [ { } ] , { \"a\" : [ ] } ] ");
}

TEST(JcsTape, DepthAndReuse) {
    Options small;
    small.max_depth = 3;
    EXPECT_EQ(run("[[[1]]]", small).text, "[[[1]]]");
    EXPECT_EQ(run("[[[{}]]]", small).error.substr(0, 5), "54001");
    EXPECT_EQ(run("[[[[]]]]", small).error.substr(0, 5), "54001");
    EXPECT_EQ(run("{\"a\":{\"b\":{\"c\":{}}}}", small).error.substr(0, 5), "54001");
    // One writer, many documents, errors in between.
    idem::jcs::CanonicalWriter w;
    for (int round = 0; round < 3; round++) {
        idem::jcs::parse_into(R"({"b":[1,{"d":1,"c":2}],"a":"\u00e9"})", w);
        EXPECT_EQ(w.result(), "{\"a\":\"\xc3\xa9\",\"b\":[1,{\"c\":2,\"d\":1}]}");
        EXPECT_THROW(idem::jcs::parse_into(R"({"b":[1,{"d":1,"c":2}],"a":1e999})", w), idem::Error);
        EXPECT_THROW(w.result(), std::logic_error);
        idem::jcs::parse_into("[]", w);
        EXPECT_EQ(w.result(), "[]");
        EXPECT_EQ(w.digest(), idem::sha256("[]"));
    }
}

namespace {

// Random JSON text with whitespace, nesting, tricky numbers, names and strings.
class Gen {
  public:
    explicit Gen(uint32_t seed) : rng_(seed) {}
    std::string doc() {
        std::string s;
        value(s, 0);
        return s;
    }

  private:
    size_t pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }
    void ws(std::string &s) {
        static const char *w[] = {"", "", "", " ", "\n  ", "\t", "\r\n"};
        s += w[pick(7)];
    }
    void name(std::string &s) {
        static const char *n[] = {"a",
                                  "b",
                                  "ab",
                                  "abcdefgh",
                                  "abcdefghi",
                                  "abcdefgh\\u0000",
                                  "\\u0061",
                                  "\\/",
                                  "/",
                                  "\\u00e9",
                                  "\xc3\xa9",
                                  "\xef\xbf\xbf",
                                  "\\uffff",
                                  "\xee\x80\x80",
                                  "\\ud800\\udc00",
                                  "\xf0\x90\x80\x80",
                                  "\xf0\x9f\x98\x80",
                                  "\\ud83d\\ude00",
                                  "",
                                  "\\u0000",
                                  "\\t",
                                  "\t",
                                  "sku",
                                  "qty",
                                  "price",
                                  "name",
                                  "prefix-123456789",
                                  "prefix-12345678\xee\x80\x80",
                                  "prefix-12345678\xf0\x90\x80\x80",
                                  "\\\"",
                                  "\\\\",
                                  "Z",
                                  "z"};
        s += '"';
        s += n[pick(sizeof n / sizeof *n)];
        s += '"';
    }
    void number(std::string &s) {
        static const char *n[] = {"0",
                                  "-0",
                                  "0.0",
                                  "-0.0",
                                  "1",
                                  "-1",
                                  "10",
                                  "1.5",
                                  "1.50",
                                  "-2.25",
                                  "1999.50",
                                  "123456789012345",
                                  "1234567890123456",
                                  "12345678901234567",
                                  "0.000001",
                                  "0.0000001",
                                  "0.00000123",
                                  "0.0000012345678901234",
                                  "1e21",
                                  "1e20",
                                  "1E-7",
                                  "1.5e3",
                                  "123.456e-300",
                                  "99999e300",
                                  "1e400",
                                  "1e-400",
                                  "100000000000000000000",
                                  "5e-324",
                                  "0.1",
                                  "0.30",
                                  "12345678901234.5",
                                  "1234567890123.456",
                                  "-0.000001",
                                  "4.35",
                                  "0.000100"};
        if (pick(4) == 0) { // random digits
            if (pick(2))
                s += '-';
            size_t il = pick(18) + 1;
            s += static_cast<char>('1' + pick(9));
            for (size_t i = 1; i < il; i++)
                s += static_cast<char>('0' + pick(10));
            if (pick(2)) {
                s += '.';
                size_t fl = pick(18) + 1;
                for (size_t i = 0; i < fl; i++)
                    s += static_cast<char>('0' + (pick(3) == 0 ? 0 : pick(10)));
            }
            return;
        }
        s += n[pick(sizeof n / sizeof *n)];
    }
    void str(std::string &s) {
        static const char *p[] = {"x",
                                  "Item number 7",
                                  "\\u00eb",
                                  "\\n",
                                  "\\\"",
                                  "\\\\",
                                  "\\/",
                                  "\xc3\xa9",
                                  "\xf0\x9f\x98\x80",
                                  "\\ud83d\\ude00",
                                  "\\u0001",
                                  "\\u001f",
                                  "\x7f",
                                  "\\u007f",
                                  "\xe2\x80\xa8",
                                  "SKU-1000",
                                  "0123456789abcdef",
                                  "\\b\\f\\r\\t",
                                  "\\u0000"};
        s += '"';
        size_t n = pick(5);
        for (size_t i = 0; i < n; i++)
            s += p[pick(sizeof p / sizeof *p)];
        s += '"';
    }
    // An array of objects that share one sequence of names (the sorted-order reuse).
    void shaped(std::string &s, int depth) {
        std::vector<std::string> names;
        size_t n = 1 + pick(9);
        for (size_t i = 0; i < n; i++) {
            std::string nm;
            name(nm);
            names.push_back(nm);
        }
        s += '[';
        size_t count = 1 + pick(4);
        for (size_t r = 0; r < count; r++) {
            if (r)
                s += ',';
            s += '{';
            for (size_t i = 0; i < n; i++) {
                if (i)
                    s += ',';
                s += names[pick(8) == 0 ? pick(n) : i]; // (now and then a different name)
                s += ':';
                value(s, depth + 1);
            }
            s += '}';
        }
        s += ']';
    }
    void value(std::string &s, int depth) {
        ws(s);
        if (depth < 3 && pick(10) == 0) {
            shaped(s, depth);
            ws(s);
            return;
        }
        size_t k = depth > 5 ? 3 + pick(5) : pick(8);
        if (k == 0 || k == 1) {
            s += '{';
            size_t n = pick(k == 0 ? 4 : 20);
            for (size_t i = 0; i < n; i++) {
                if (i)
                    s += ',';
                ws(s);
                name(s);
                ws(s);
                s += ':';
                value(s, depth + 1);
            }
            ws(s);
            s += '}';
        } else if (k == 2) {
            s += '[';
            size_t n = pick(6);
            for (size_t i = 0; i < n; i++) {
                if (i)
                    s += ',';
                value(s, depth + 1);
            }
            ws(s);
            s += ']';
        } else if (k == 3 || k == 4) {
            number(s);
        } else if (k == 5 || k == 6) {
            str(s);
        } else {
            static const char *l[] = {"true", "false", "null"};
            s += l[pick(3)];
        }
        ws(s);
    }
    std::mt19937 rng_;
};

} // namespace

TEST(JcsTape, RandomDocumentsAgreeWithTheStreamingWriter) {
    std::mt19937 rng(12345);
    size_t accepted = 0;
    for (uint32_t seed = 0; seed < 20000; seed++) {
        std::string doc = Gen(seed).doc();
        Outcome a = fast(doc), b = reference(doc);
        ASSERT_EQ(a, b) << doc;
        accepted += a.error.empty();
        ASSERT_EQ(fast(doc, true), reference(doc, true)) << doc;
        if (a.error.empty()) {
            ASSERT_EQ(fast(a.text), a) << doc; // a fixed point
        }
        // A mutation: a byte replaced, removed or inserted.
        std::string m = doc;
        if (!m.empty()) {
            static const char bytes[] = "{}[],:\"\\ 0-.e1au\x80\xc3";
            size_t at = rng() % m.size();
            char c = bytes[rng() % (sizeof bytes - 1)];
            switch (rng() % 3) {
            case 0:
                m[at] = c;
                break;
            case 1:
                m.erase(at, 1);
                break;
            default:
                m.insert(m.begin() + static_cast<long>(at), c);
            }
            ASSERT_EQ(fast(m), reference(m)) << m;
            ASSERT_EQ(fast(m, true), reference(m, true)) << m;
        }
    }
    EXPECT_GT(accepted, 5000u);
}
