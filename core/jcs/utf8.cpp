// UTF-8 checks and JCS string escaping (RFC 8785 §3.2.2.2: as ECMAScript JSON.stringify).
#include "internal.hpp"

#include <algorithm>

#include "cpp_only.hpp" // last include: core/ never sees postgres.h

namespace idem::jcs {

namespace detail {

size_t find_bad_utf8(std::string_view s) noexcept {
    const auto *p = reinterpret_cast<const unsigned char *>(s.data());
    size_t n = s.size(), i = 0;
    while (i < n) {
        if (p[i] < 0x80) {
            i++;
            continue;
        }
        size_t l = utf8_seq_len(p + i, n - i);
        if (l == 0)
            return i;
        i += l;
    }
    return std::string_view::npos;
}

namespace {

// The invalid sequence at s[at] as PostgreSQL's "invalid byte sequence" error shows one: its
// first byte and the continuation bytes (10xxxxxx) of the length that byte announces, in hex
// ("0xe2 0x82" for a truncated euro sign, "0xff" for a byte UTF-8 never uses).
std::string shown_sequence(std::string_view s, size_t at) {
    static const char hex[] = "0123456789abcdef";
    const auto *p = reinterpret_cast<const unsigned char *>(s.data()) + at;
    const size_t avail = s.size() - at;
    const unsigned c = p[0];
    const size_t len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
    std::string r;
    for (size_t i = 0; i < len && i < avail && (i == 0 || (p[i] & 0xC0) == 0x80); i++) {
        if (i > 0)
            r.push_back(' ');
        r += "0x";
        r.push_back(hex[p[i] >> 4]);
        r.push_back(hex[p[i] & 0xF]);
    }
    return r;
}

} // namespace

void bad_utf8(std::string_view s, size_t at, const char *where) {
    throw Error(kBadUtf8, "invalid UTF-8 in JSON text",
                "At byte " + std::to_string(at) + " of " + where + ": the byte sequence " +
                    shown_sequence(s, at) + " is not well-formed UTF-8.",
                "JSON text must be UTF-8 (RFC 8259).");
}

void check_utf8(std::string_view s) {
    size_t bad = find_bad_utf8(s);
    if (bad != std::string_view::npos)
        bad_utf8(s, bad, "a string");
}

void check_text_utf8(std::string_view text) {
    size_t bad = find_bad_utf8(text);
    if (bad != std::string_view::npos)
        bad_utf8(text, bad);
}

char *write_escape(char *o, unsigned char c) noexcept {
    static const char hex[] = "0123456789abcdef";
    *o++ = '\\';
    switch (c) {
    case '"':
        *o++ = '"';
        break;
    case '\\':
        *o++ = '\\';
        break;
    case '\b':
        *o++ = 'b';
        break;
    case '\f':
        *o++ = 'f';
        break;
    case '\n':
        *o++ = 'n';
        break;
    case '\r':
        *o++ = 'r';
        break;
    case '\t':
        *o++ = 't';
        break;
    default:
        o[0] = 'u';
        o[1] = '0';
        o[2] = '0';
        o[3] = hex[c >> 4];
        o[4] = hex[c & 0xF];
        o += 5;
    }
    return o;
}

size_t append_quoted(Buffer &out, std::string_view s) {
    constexpr size_t kPiece = 65536; // so that a huge string never needs 6x its size at once
    size_t before = out.size();
    if (s.size() <= kPiece) {
        out.set_end(write_quoted(out.room(quoted_bound(s.size())), s.data(), s.size()));
        return out.size() - before;
    }
    out.push_back('"');
    for (size_t off = 0; off < s.size(); off += kPiece) {
        size_t m = std::min(kPiece, s.size() - off);
        out.set_end(write_escaped(out.room(6 * m), s.data() + off, m));
    }
    out.push_back('"');
    return out.size() - before;
}

std::string quoted_string(std::string_view s) {
    Buffer b;
    append_quoted(b, s);
    return std::string(b.view());
}

void append_utf8(std::string &out, unsigned cp) {
    if (cp < 0x80) {
        out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
}

} // namespace detail

char *write_escaped(char *out, const char *s, size_t n) noexcept {
    for (;;) {
        // (the leading bytes that a JCS string copies unchanged)
        size_t run = detail::plain_prefix<false>(reinterpret_cast<const unsigned char *>(s), n);
        std::memcpy(out, s, run);
        out += run;
        if (run == n)
            break;
        out = detail::write_escape(out, static_cast<unsigned char>(s[run]));
        s += run + 1;
        n -= run + 1;
    }
    return out;
}

} // namespace idem::jcs
