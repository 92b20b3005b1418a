// Reader: what the streaming tokenizer (parser.cpp) and the tape's (tape.cpp) do alike: the
// grammar's errors (22P02 naming a byte offset), strings with escapes, number tokens; and the
// errors that the writer raises too.
#include "internal.hpp"

#include "cpp_only.hpp" // last include: core/ never sees postgres.h

namespace idem::jcs::detail {

void too_deep(unsigned max_depth) {
    throw Error(sqlstate::statement_too_complex, "JSON nesting is too deep",
                "More than " + std::to_string(max_depth) + " nested arrays or objects.");
}

void duplicate_name(std::string_view name) {
    std::string shown = quoted_string(name.substr(0, 200));
    throw Error(kMalformed, "duplicate member name in JSON object",
                "The name " + shown + " occurs more than once (after unescaping).",
                "I-JSON (RFC 7493) forbids duplicate names.");
}

void Reader::fail(const char *msg, const char *hint) const {
    throw Error(kMalformed, msg, "At byte " + std::to_string(p_ - b_) + " of the JSON text.",
                hint ? hint : "");
}

void Reader::fail_at(const unsigned char *at, const char *msg, const char *hint) {
    p_ = at;
    fail(msg, hint);
}

void Reader::bad_value(const unsigned char *at) {
    if (at >= e_)
        fail_at(at, "unexpected end of JSON text");
    if (*at == 'N' || *at == 'I')
        fail_at(at, "NaN and Infinity are not JSON numbers", "I-JSON allows only finite numbers.");
    if (*at == 0xEF && e_ - at >= 3 && at[1] == 0xBB && at[2] == 0xBF)
        fail_at(at, "byte order mark in JSON text", "Send JSON text without a BOM.");
    fail_at(at, "unexpected character in JSON text");
}

void Reader::bad_name(const unsigned char *at) {
    fail_at(at, "expected a member name (a string) in JSON object");
}

void Reader::bad_colon(const unsigned char *at) {
    fail_at(at, "expected ':' after a member name in JSON object");
}

void Reader::bad_after(const unsigned char *at, bool object) {
    if (at >= e_)
        fail_at(at, "unexpected end of JSON text");
    fail_at(at,
            object ? "expected ',' or '}' in JSON object" : "expected ',' or ']' in JSON array");
}

void Reader::expect_end(const unsigned char *at) {
    if (at != e_)
        fail_at(at, "unexpected text after the JSON value");
}

unsigned Reader::hex4() {
    if (e_ - p_ < 4)
        fail("incomplete \\u escape in JSON string");
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned c = p_[i], d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else
            fail("invalid \\u escape in JSON string");
        v = v * 16 + d;
    }
    p_ += 4;
    return v;
}

// The code point of the pair whose \uD800-\uDBFF escape (high) was just read; p_ is after it.
unsigned Reader::low_surrogate(unsigned high) {
    const char *hint = "A \\uD800-\\uDBFF escape must be followed by a \\uDC00-\\uDFFF one.";
    if (e_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u')
        fail("lone surrogate in JSON string", hint);
    p_ += 2;
    unsigned lo = hex4();
    if (lo < 0xDC00 || lo > 0xDFFF)
        fail_at(p_ - 6, "lone surrogate in JSON string", hint);
    return 0x10000 + ((high - 0xD800) << 10) + (lo - 0xDC00);
}

// Decodes the escape sequence at p_ (its backslash) and appends its bytes to out.
void Reader::escape(std::string &out) {
    static const char kEscaped[] = "\"\\/bfnrt", kMeaning[] = "\"\\/\b\f\n\r\t";
    p_++;
    if (p_ >= e_)
        fail("unterminated JSON string");
    const unsigned char c = *p_++;
    if (c == 'u') {
        unsigned cp = hex4();
        if (cp >= 0xD800 && cp <= 0xDBFF)
            cp = low_surrogate(cp);
        else if (cp >= 0xDC00 && cp <= 0xDFFF)
            fail_at(p_ - 6, "lone surrogate in JSON string",
                    "A \\uDC00-\\uDFFF escape must follow a \\uD800-\\uDBFF one.");
        append_utf8(out, cp);
        return;
    }
    const void *m = std::memchr(kEscaped, c, sizeof kEscaped - 1);
    if (m == nullptr)
        fail_at(p_ - 2, "invalid escape in JSON string");
    out.push_back(kMeaning[static_cast<const char *>(m) - kEscaped]);
}

std::string_view Reader::string() {
    p_++;
    const unsigned char *start = p_;
    bool copying = false; // an escape was seen: the bytes are collected in sbuf_
    std::string &out = sbuf_;
    for (;;) {
        const unsigned char *run = p_;
        // (printable ASCII other than '"' and '\\': held as it is)
        p_ += plain_prefix<true>(p_, static_cast<size_t>(e_ - p_));
        if (copying)
            out.append(reinterpret_cast<const char *>(run), p_ - run);
        if (p_ >= e_)
            fail("unterminated JSON string");
        unsigned c = *p_;
        if (c == '"') {
            p_++;
            if (copying)
                return out;
            return std::string_view(reinterpret_cast<const char *>(start), p_ - 1 - start);
        }
        if (c < 0x20)
            fail("unescaped control character in JSON string",
                 "Characters below U+0020 must be written as escapes such as \\n or \\u0001.");
        if (c >= 0x80) {
            size_t l = utf8_seq_len(p_, e_ - p_);
            if (l == 0)
                bad_utf8(std::string_view(reinterpret_cast<const char *>(b_),
                                          static_cast<size_t>(e_ - b_)),
                         static_cast<size_t>(p_ - b_));
            if (copying)
                out.append(reinterpret_cast<const char *>(p_), l);
            p_ += l;
            continue;
        }
        if (!copying) { // (a backslash)
            copying = true;
            out.assign(reinterpret_cast<const char *>(start), p_ - start);
        }
        escape(out);
    }
}

std::string_view Reader::number_token(const unsigned char *s) {
    const unsigned char *p = s;
    if (*p == '-')
        p++;
    if (p < e_ && (*p == 'I' || *p == 'N'))
        fail_at(p, "NaN and Infinity are not JSON numbers", "I-JSON allows only finite numbers.");
    while (p < e_ && number_char(*p))
        p++;
    p_ = p;
    return std::string_view(reinterpret_cast<const char *>(s), static_cast<size_t>(p - s));
}

} // namespace idem::jcs::detail
