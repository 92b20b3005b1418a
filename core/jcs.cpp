// RFC 8785 canonical JSON: the streaming writer, the strict I-JSON parser and number formatting.
#include "jcs.hpp"

#include "error.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <stdexcept>
#include <system_error>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

namespace idem::jcs {

namespace {

constexpr const char *kMalformed = sqlstate::invalid_text_representation; // 22P02
constexpr const char *kBadUtf8 = sqlstate::character_not_in_repertoire;   // 22021

// Length of the well-formed UTF-8 sequence (2..4 bytes) starting at s[0] >= 0x80, or 0 if the
// bytes are not well-formed (overlong forms, surrogates, > U+10FFFF, truncated).
size_t utf8_seq_len(const unsigned char *s, size_t avail) noexcept {
    unsigned c = s[0];
    auto cont = [&](size_t i) { return i < avail && (s[i] & 0xC0) == 0x80; };
    if (c >= 0xC2 && c <= 0xDF)
        return cont(1) ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        if (avail < 2)
            return 0;
        unsigned c1 = s[1];
        if (c == 0xE0 && (c1 < 0xA0 || c1 > 0xBF))
            return 0; // overlong
        if (c == 0xED && (c1 < 0x80 || c1 > 0x9F))
            return 0; // UTF-16 surrogate
        return cont(1) && cont(2) ? 3 : 0;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (avail < 2)
            return 0;
        unsigned c1 = s[1];
        if (c == 0xF0 && (c1 < 0x90 || c1 > 0xBF))
            return 0; // overlong
        if (c == 0xF4 && (c1 < 0x80 || c1 > 0x8F))
            return 0; // above U+10FFFF
        return cont(1) && cont(2) && cont(3) ? 4 : 0;
    }
    return 0;
}

// Offset of the first byte that is not well-formed UTF-8, or npos.
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

[[noreturn]] void bad_utf8(size_t at) {
    throw Error(kBadUtf8, "invalid UTF-8 in JSON text",
                "The byte sequence at byte " + std::to_string(at) + " is not well-formed UTF-8.");
}

// 1 for bytes that a JCS string must escape: control characters, '"' and '\'.
struct EscapeTable {
    unsigned char t[256];
    constexpr EscapeTable() : t() {
        for (int i = 0; i < 0x20; i++)
            t[i] = 1;
        t[static_cast<unsigned char>('"')] = 1;
        t[static_cast<unsigned char>('\\')] = 1;
    }
};
constexpr EscapeTable kEscape;

// The number of leading bytes of p[0..n) that are no control character, '"' or '\\' (with
// StopAtHigh, and also below 0x80). SSE2 checks 16 bytes per step.
// Padded: a zero byte follows p[0..n) and 16 bytes may be read past it (it stops the run).
template <bool StopAtHigh, bool Padded = false>
inline size_t plain_prefix(const unsigned char *p, size_t n) noexcept {
    size_t i = 0;
#ifdef __SSE2__
    const __m128i quote = _mm_set1_epi8('"');
    const __m128i bslash = _mm_set1_epi8('\\');
    const __m128i ctl = _mm_set1_epi8(0x1F);
    for (; Padded || i + 16 <= n; i += 16) {
        __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i *>(p + i));
        __m128i bad =
            _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, bslash)),
                         _mm_cmpeq_epi8(_mm_min_epu8(x, ctl), x)); // x <= 0x1F
        unsigned m = static_cast<unsigned>(_mm_movemask_epi8(bad));
        if (StopAtHigh)
            m |= static_cast<unsigned>(_mm_movemask_epi8(x)); // bytes >= 0x80
        if (m != 0)
            return i + static_cast<size_t>(__builtin_ctz(m));
    }
#endif
    while (i < n && !kEscape.t[p[i]] && (!StopAtHigh || p[i] < 0x80))
        i++;
    return i;
}

// The number of leading bytes of p[0..n) that a JCS string copies unchanged.
inline size_t safe_prefix(const char *p, size_t n) noexcept {
    return plain_prefix<false>(reinterpret_cast<const unsigned char *>(p), n);
}

// Writes the escape sequence of byte c (one that kEscape marks) at o; returns the end.
inline char *write_escape(char *o, unsigned char c) noexcept {
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

// Appends the JCS (ECMAScript JSON.stringify) quoted form of UTF-8 s; returns its length.
size_t append_quoted(detail::Buffer &out, std::string_view s) {
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

// The quoted form as a std::string (for messages).
std::string quoted_string(std::string_view s) {
    detail::Buffer b;
    append_quoted(b, s);
    return std::string(b.view());
}

// The parts of a JSON number in RFC 8259 syntax.
struct NumberParts {
    bool negative = false;
    std::string_view int_digits; // no leading zeros except a lone "0"
    std::string_view frac_digits;
    bool has_exp = false;
    bool exp_negative = false;
    std::string_view exp_digits;
};

[[noreturn]] void bad_number(std::string_view text) {
    std::string shown(text.substr(0, 64));
    throw Error(kMalformed, "invalid JSON number",
                "The text \"" + shown + "\" is not a JSON number.",
                "JSON numbers look like -12.5e3; NaN and Infinity are not JSON.");
}

NumberParts split_number(std::string_view t) {
    NumberParts n;
    size_t i = 0, len = t.size();
    auto digit = [&](size_t k) { return k < len && t[k] >= '0' && t[k] <= '9'; };
    if (i < len && t[i] == '-') {
        n.negative = true;
        i++;
    }
    size_t s = i;
    if (!digit(i))
        bad_number(t);
    if (t[i] == '0') {
        i++;
    } else {
        while (digit(i))
            i++;
    }
    n.int_digits = t.substr(s, i - s);
    if (i < len && t[i] == '.') {
        i++;
        s = i;
        if (!digit(i))
            bad_number(t);
        while (digit(i))
            i++;
        n.frac_digits = t.substr(s, i - s);
    }
    if (i < len && (t[i] == 'e' || t[i] == 'E')) {
        n.has_exp = true;
        i++;
        if (i < len && (t[i] == '+' || t[i] == '-')) {
            n.exp_negative = t[i] == '-';
            i++;
        }
        s = i;
        if (!digit(i))
            bad_number(t);
        while (digit(i))
            i++;
        n.exp_digits = t.substr(s, i - s);
    }
    if (i != len)
        bad_number(t);
    return n;
}

// Exponent digits as a number, saturating at 10^15 (far beyond any meaningful exponent).
int64_t exp_value(const NumberParts &n) {
    int64_t e = 0;
    for (char c : n.exp_digits) {
        e = e * 10 + (c - '0');
        if (e > 1000000000000000LL) {
            e = 1000000000000000LL;
            break;
        }
    }
    return n.exp_negative ? -e : e;
}

// ECMAScript Number::toString layout for significant digits d (k digits, no leading or
// trailing zeros) whose decimal point sits n digits from the left: value = 0.d * 10^n. Writes
// at o (room for k + 40 bytes when -10^13 < n < 10^13) and returns the end.
char *layout(char *o, bool negative, const char *d, size_t k, int64_t n) noexcept {
    if (negative)
        *o++ = '-';
    int64_t kk = static_cast<int64_t>(k);
    if (kk <= n && n <= 21) {
        std::memcpy(o, d, k);
        o += k;
        std::memset(o, '0', static_cast<size_t>(n - kk));
        o += n - kk;
    } else if (0 < n && n <= 21) {
        std::memcpy(o, d, static_cast<size_t>(n));
        o += n;
        *o++ = '.';
        std::memcpy(o, d + n, k - static_cast<size_t>(n));
        o += k - static_cast<size_t>(n);
    } else if (-6 < n && n <= 0) {
        *o++ = '0';
        *o++ = '.';
        std::memset(o, '0', static_cast<size_t>(-n));
        o += -n;
        std::memcpy(o, d, k);
        o += k;
    } else {
        *o++ = d[0];
        if (k > 1) {
            *o++ = '.';
            std::memcpy(o, d + 1, k - 1);
            o += k - 1;
        }
        int64_t e = n - 1;
        *o++ = 'e';
        *o++ = e < 0 ? '-' : '+';
        o = std::to_chars(o, o + 24, e < 0 ? -e : e).ptr;
    }
    return o;
}

// The significant digits of n (int_digits ++ frac_digits without leading and trailing zeros),
// as a range of the two parts, and the decimal point position relative to their start.
struct Significant {
    size_t count = 0; // 0 for a zero value
    int64_t point = 0;
};

Significant significant(const NumberParts &n) {
    std::string_view a = n.int_digits, b = n.frac_digits;
    size_t total = a.size() + b.size();
    auto at = [&](size_t i) { return i < a.size() ? a[i] : b[i - a.size()]; };
    size_t z = 0;
    while (z < total && at(z) == '0')
        z++;
    Significant r;
    if (z == total)
        return r;
    size_t e = total;
    while (at(e - 1) == '0')
        e--;
    r.count = e - z;
    r.point = static_cast<int64_t>(a.size()) + exp_value(n) - static_cast<int64_t>(z);
    return r;
}

// Copies the significant digits of n into d (which holds sig.count bytes).
void copy_significant(const NumberParts &n, char *d) {
    std::string_view a = n.int_digits, b = n.frac_digits;
    size_t total = a.size() + b.size(), k = 0;
    bool started = false;
    for (size_t i = 0; i < total; i++) {
        char c = i < a.size() ? a[i] : b[i - a.size()];
        if (c != '0')
            started = true;
        if (started)
            d[k++] = c;
    }
    while (k > 0 && d[k - 1] == '0')
        k--;
}

// ES layout of the exact decimal value: every significant digit kept.
char *format_significant(const NumberParts &n, const Significant &sig, char *o) {
    if (sig.count == 0) {
        *o++ = '0'; // 0, -0, 0.000e5 ...
        return o;
    }
    if (sig.point > 1000000000000LL || sig.point < -1000000000000LL)
        throw Error(sqlstate::numeric_value_out_of_range, "JSON number exponent out of range",
                    "Exponents beyond 10^12 are not supported.");
    char small[64];
    std::string big;
    char *d = small;
    if (n.int_digits.size() + n.frac_digits.size() > sizeof small) {
        big.resize(n.int_digits.size() + n.frac_digits.size());
        d = &big[0];
    }
    copy_significant(n, d);
    return layout(o, n.negative, d, sig.count, sig.point);
}

// Exact-mode canonical number: every significant digit kept, ES layout.
char *format_exact(const NumberParts &n, char *o) {
    return format_significant(n, significant(n), o);
}

char *format_strict(std::string_view text, const NumberParts &n, char *o) {
    // Integers of up to 15 digits are exact doubles that ECMAScript prints unchanged.
    if (n.frac_digits.empty() && !n.has_exp && n.int_digits.size() <= 15) {
        if (n.int_digits.size() == 1 && n.int_digits[0] == '0') {
            *o++ = '0'; // also -0
            return o;
        }
        std::memcpy(o, text.data(), text.size());
        return o + text.size();
    }
    // Fast path: a decimal with at most 15 significant digits in the normal double range. Two
    // such decimals never round to the same double (10^15 < 2^53), so the shortest decimal
    // that round-trips, which ECMAScript prints, is the decimal itself without its trailing
    // zeros: no binary conversion needed. (Subnormals have less precision: excluded.)
    Significant sig = significant(n);
    if (sig.count == 0) {
        *o++ = '0';
        return o;
    }
    if (sig.count <= 15 && sig.point - 1 >= -307 && sig.point - 1 <= 307)
        return format_significant(n, sig, o);
    double v = 0;
    auto r = std::from_chars(text.data(), text.data() + text.size(), v);
    if (r.ec == std::errc::result_out_of_range) {
        if (sig.point - 1 < 0) {
            *o++ = '0'; // underflows to (-)0 as in ECMAScript
            return o;
        }
        std::string shown(text.substr(0, 64));
        throw Error(sqlstate::numeric_value_out_of_range,
                    "JSON number is out of range for RFC 8785",
                    "The number " + shown + " exceeds the largest IEEE-754 double.",
                    "Use exact_numbers => true to fingerprint it exactly.");
    }
    if (r.ec != std::errc() || r.ptr != text.data() + text.size())
        bad_number(text);
    return write_double(v, o);
}

} // namespace

char *write_double(double v, char *o) {
    if (v == 0) {
        *o++ = '0';
        return o;
    }
    if (!(v - v == 0))
        throw Error(sqlstate::numeric_value_out_of_range, "NaN and Infinity are not JSON numbers");
    bool neg = v < 0;
    if (neg)
        v = -v;
    char buf[40];
    auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
    // buf = d[.ddd]e(+|-)xx
    char digits[24];
    size_t k = 0;
    const char *p = buf;
    digits[k++] = *p++;
    if (*p == '.') {
        p++;
        while (*p != 'e')
            digits[k++] = *p++;
    }
    p++; // 'e'
    bool eneg = *p == '-';
    p++;
    int e = 0;
    while (p < r.ptr)
        e = e * 10 + (*p++ - '0');
    if (eneg)
        e = -e;
    return layout(o, neg, digits, k, static_cast<int64_t>(e) + 1);
}

void format_double(double v, std::string &out) {
    char buf[64];
    char *e = write_double(v, buf);
    out.append(buf, static_cast<size_t>(e - buf));
}

char *write_number(std::string_view text, bool exact, char *out) {
    NumberParts n = split_number(text);
    return exact ? format_exact(n, out) : format_strict(text, n, out);
}

void format_number(std::string_view text, bool exact, std::string &out) {
    size_t old = out.size();
    out.resize(old + number_bound(text.size()));
    char *e = write_number(text, exact, &out[old]);
    out.resize(static_cast<size_t>(e - out.data()));
}

char *write_escaped(char *out, const char *s, size_t n) noexcept {
    for (;;) {
        size_t run = safe_prefix(s, n);
        std::memcpy(out, s, run);
        out += run;
        if (run == n)
            break;
        out = write_escape(out, static_cast<unsigned char>(s[run]));
        s += run + 1;
        n -= run + 1;
    }
    return out;
}

char *write_decimal(char *out, bool negative, const char *digits, size_t k,
                    int64_t point) noexcept {
    return layout(out, negative, digits, k, point);
}

// ---------------------------------------------------------------------------------------------
// Buffer

void detail::Buffer::grow(size_t n) {
    if (n > SIZE_MAX / 2 - size_)
        throw std::bad_alloc();
    size_t cap = cap_ < 256 ? 256 : cap_;
    while (cap - size_ < n)
        cap *= 2;
    void *p = std::realloc(data_, cap);
    if (p == nullptr)
        throw std::bad_alloc();
    data_ = static_cast<char *>(p);
    cap_ = cap;
}

// ---------------------------------------------------------------------------------------------
// Tape: the state of the two-pass text canonicaliser, kept by the writer for reuse.

namespace {

// A growable array of trivially copyable T (no value-initialisation, appends inline).
template <class T> class Pod {
  public:
    Pod() = default;
    ~Pod() { std::free(b_); }
    Pod(const Pod &) = delete;
    Pod &operator=(const Pod &) = delete;
    T *b_ = nullptr; // begin
    T *e_ = nullptr; // end
    T *c_ = nullptr; // end of capacity
    size_t size() const noexcept { return static_cast<size_t>(e_ - b_); }
    size_t capacity() const noexcept { return static_cast<size_t>(c_ - b_); }
    bool empty() const noexcept { return e_ == b_; }
    void clear() noexcept { e_ = b_; }
    void release() noexcept {
        std::free(b_);
        b_ = e_ = c_ = nullptr;
    }
    // Room for n more elements.
    void reserve_more(size_t n) {
        if (static_cast<size_t>(c_ - e_) < n)
            grow(n);
    }
    void push_back(const T &v) {
        if (e_ == c_)
            grow(1);
        *e_++ = v;
    }
    T &back() noexcept { return e_[-1]; }
    void pop_back() noexcept { e_--; }

  private:
    void grow(size_t n) {
        size_t size = this->size(), cap = capacity();
        if (n > (SIZE_MAX / sizeof(T)) / 2 - size)
            throw std::bad_alloc();
        size_t want = cap < 64 ? 64 : cap * 2;
        if (want < size + n)
            want = size + n;
        void *p = std::realloc(b_, want * sizeof(T));
        if (p == nullptr)
            throw std::bad_alloc();
        b_ = static_cast<T *>(p);
        e_ = b_ + size;
        c_ = b_ + want;
    }
};

} // namespace

struct detail::TapeState {
    // Shaped: an object in an array that matched the recorded shape whole (see shape in
    // run_tape); off: its members' value spans in vals, in text order; len: its ShapeRec.
    enum Kind : uint32_t { InText = 0, InSide = 1, Object = 2, Array = 3, Shaped = 4 };
    // One per value and member name, in text order. Spans hold canonical bytes.
    struct Tok {
        uint32_t off;  // span: offset in the text (InText) or side (InSide); object: in order
        uint32_t len;  // span: length; object: member count
        uint32_t end;  // containers: index of the token after their last member or element
        uint32_t kind; // Kind
    };
    // An open container.
    struct Open {
        uint32_t tok;
        uint32_t names; // objects: their names start at names[names]; arrays: kNotObject
    };
    static constexpr uint32_t kNotObject = 0xFFFFFFFF;
    // A container being written.
    struct Emit {
        const uint32_t *ord; // objects: the next member name token in order
        uint32_t left;       // objects: members still to write
        uint32_t end;
        uint32_t object;
    };
    Pod<Tok> toks;
    // The member names of the open objects. key: the first 8 bytes of the unescaped name as a
    // big-endian integer (see name_key); ref: the name's token in the low 32 bits, and for an
    // escaped name the side offset of [uint32 length][unescaped bytes] in the high ones.
    struct Name {
        uint64_t key;
        uint64_t ref;
    };
    Pod<Name> names;
    Pod<uint32_t> order; // each object's member name tokens, sorted
    Pod<Open> opens;
    Pod<Emit> emit;
    Buffer side; // canonical forms that differ from the text, unescaped escaped names
    // A copy of the text followed by kPad zero bytes: pass 1 reads past the end without
    // bounds checks (a zero byte ends every token, and only errors look at the end again);
    // pass 2 copies any text span 32 bytes at a time.
    static constexpr size_t kPad = 64;
    Buffer in;
    size_t next_poll = 0;
    Tok *stop = nullptr; // (see tape_room)
    // The key sequence of the last small object whose keys were all distinct, and its sorted
    // order (member indices): an object with the same keys in the same sequence (arrays of
    // objects of one shape) takes that order without sorting.
    static constexpr size_t kShapeMax = 8;
    uint64_t shape_keys[kShapeMax];
    uint8_t shape_order[kShapeMax];
    size_t shape_n = 0;
    // Of the same object, each member's name token and what followed it up to its value (e.g.
    // `"qty": `) when that is at most 16 bytes of text and the name has no escapes: the bytes
    // (zero-padded), their length (0: none) and the token's length.
    alignas(16) unsigned char shape_chunk[kShapeMax][16];
    uint8_t shape_clen[kShapeMax];
    uint8_t shape_nlen[kShapeMax];
    size_t chunk_n = 0; // shape_n when the chunks were recorded (objects in arrays), else 0
    // What pass 2 needs to write a Shaped object: the members' names, each followed by ':',
    // in sorted order and back to back in side (from names), their lengths, and each member's
    // index in text order.
    struct ShapeRec {
        uint32_t names;
        uint32_t n;
        uint8_t name_len[kShapeMax];
        uint8_t text_index[kShapeMax];
    };
    Pod<ShapeRec> recs;
    uint32_t rec = kNotObject; // the ShapeRec of the recorded shape, once one was needed
    struct Span {
        uint32_t off;
        uint32_t len;
    };
    Pod<Span> vals; // the value spans (text) of Shaped objects' members
    // Frees the buffers grown past what is kept for reuse; true if it freed any.
    bool shrink() noexcept {
        constexpr size_t kKeep = size_t(1) << 16; // elements
        bool freed = false;
        auto pod = [&](auto &v) {
            if (v.capacity() > kKeep) {
                v.release();
                freed = true;
            }
        };
        pod(toks);
        pod(order);
        pod(names);
        pod(opens);
        pod(emit);
        pod(vals);
        pod(recs);
        for (Buffer *buf : {&side, &in})
            if (buf->capacity() > (size_t(1) << 20)) {
                buf->release();
                freed = true;
            }
        return freed;
    }
    // Empties every buffer, keeping its capacity (CanonicalWriter::reset shrinks first).
    void clear() noexcept {
        toks.clear();
        names.clear();
        order.clear();
        opens.clear();
        emit.clear();
        vals.clear();
        recs.clear();
        rec = kNotObject;
        side.clear();
        in.clear();
        shape_n = 0;
        chunk_n = 0;
    }
};

// ---------------------------------------------------------------------------------------------
// CanonicalWriter

struct CanonicalWriter::Member {
    size_t key_off;
    size_t key_len;
    size_t start; // out_ offset of the escaped name (after any comma)
    size_t end;   // out_ offset after the value
    bool kept;
    bool key_in_out; // key_off is an offset in out_ (else in keys_)
};

struct CanonicalWriter::Frame {
    bool object = false;
    bool drop = false;    // this container is removed by a filter
    bool partial = false; // include filter: only children on include paths are kept
    size_t open_pos = 0;  // out_ offset after '{' or '['
    size_t value_start = 0;
    size_t members_begin = 0;
    size_t keys_begin = 0;
    uint32_t kept = 0;
    int64_t next_index = 0;
    std::vector<uint32_t> ex, in; // exclude/include paths matched so far and longer than here
};

CanonicalWriter::CanonicalWriter(Options opts) {
    reset(std::move(opts));
}
CanonicalWriter::~CanonicalWriter() = default;

static std::vector<std::vector<int64_t>> path_indices(const std::vector<Path> &paths) {
    std::vector<std::vector<int64_t>> r;
    r.reserve(paths.size());
    for (const Path &p : paths) {
        std::vector<int64_t> v;
        v.reserve(p.size());
        for (const std::string &el : p) {
            int64_t idx = -1;
            if (!el.empty() && el.size() <= 18 &&
                std::all_of(el.begin(), el.end(), [](char c) { return c >= '0' && c <= '9'; }))
                idx = std::stoll(el);
            v.push_back(idx);
        }
        r.push_back(std::move(v));
    }
    return r;
}

void CanonicalWriter::reset(Options opts) {
    for (const Path &p : opts.exclude)
        if (p.empty())
            throw Error(sqlstate::invalid_parameter_value, "an exclude path must not be empty",
                        "Excluding the empty path would remove the whole document.");
    opts_ = std::move(opts);
    ex_idx_ = path_indices(opts_.exclude);
    in_idx_ = path_indices(opts_.include);
    reset();
}

// Frees the buffers that the last document grew past what is kept for reuse (reset() does it
// too, when the next document starts); true if it freed any (the document is then gone).
bool CanonicalWriter::shrink() noexcept {
    constexpr size_t kKeep = size_t(1) << 20; // bytes
    bool freed = tape_ && tape_->shrink();
    if (out_.capacity() > kKeep) {
        out_.release();
        freed = true;
    }
    if (scratch_.capacity() > kKeep) {
        scratch_.release();
        freed = true;
    }
    if (keys_.capacity() > kKeep) {
        std::string().swap(keys_);
        freed = true;
    }
    if (members_.capacity() * sizeof(Member) > kKeep) {
        std::vector<Member>().swap(members_);
        freed = true;
    }
    if (frames_.capacity() * sizeof(Frame) > kKeep) {
        depth_ = 0;
        std::vector<Frame>().swap(frames_);
        freed = true;
    }
    if (freed)
        done_ = false;
    return freed;
}

void CanonicalWriter::reset() {
    filtering_ = !opts_.exclude.empty() || !opts_.include.empty();
    done_ = false;
    expect_key_ = false;
    depth_ = 0;
    ticks_ = 0;
    if (may_have_grown_)
        shrink(); // (keeps the buffers' capacity for reuse, but not after a huge document)
    may_have_grown_ = true;
    out_.clear();
    scratch_.clear();
    keys_.clear();
    if (tape_)
        tape_->clear();
    hashing_ = false;
    hashed_ = 0;
    out_.room(256); // never a null data pointer
    scratch_.room(256);
    members_.clear();
}

void CanonicalWriter::misuse(const char *what) const {
    throw std::logic_error(std::string("CanonicalWriter: ") + what);
}

void CanonicalWriter::tick() {
    if (++ticks_ >= 4096) {
        ticks_ = 0;
        if (opts_.interrupted != nullptr && opts_.interrupted())
            throw Interrupted();
    }
}

// Computes the filter state (pend_*) of the child `name` (object member) or `index` (array
// element) of parent, whose children have path length depth_.
void CanonicalWriter::child_filter(const Frame &parent, std::string_view name, int64_t index) {
    pend_drop_ = parent.drop;
    pend_partial_ = false;
    if (!filtering_)
        return;
    pend_ex_.clear();
    pend_in_.clear();
    const size_t k = depth_ - 1; // path element compared at this level
    const size_t len = depth_;   // path length of the child
    auto match = [&](const std::vector<Path> &paths, const std::vector<std::vector<int64_t>> &idx,
                     uint32_t i) {
        return parent.object ? paths[i][k] == name : idx[i][k] == index;
    };
    for (uint32_t i : parent.ex) {
        if (!match(opts_.exclude, ex_idx_, i))
            continue;
        if (opts_.exclude[i].size() == len)
            pend_drop_ = true;
        else
            pend_ex_.push_back(i);
    }
    if (parent.partial) {
        bool full = false;
        for (uint32_t i : parent.in) {
            if (!match(opts_.include, in_idx_, i))
                continue;
            if (opts_.include[i].size() == len)
                full = true;
            else
                pend_in_.push_back(i);
        }
        if (full)
            pend_partial_ = false;
        else if (!pend_in_.empty())
            pend_partial_ = true;
        else
            pend_drop_ = true;
    }
}

// Called before any value: handles the root, array elements and commas.
void CanonicalWriter::before_value() {
    tick();
    if (depth_ == 0) {
        if (done_)
            misuse("a second top-level value");
        pend_drop_ = false;
        pend_partial_ = false;
        pend_start_ = 0;
        if (filtering_) {
            pend_ex_.clear();
            pend_in_.clear();
            for (uint32_t i = 0; i < opts_.exclude.size(); i++)
                pend_ex_.push_back(i);
            bool whole = false;
            for (uint32_t i = 0; i < opts_.include.size(); i++) {
                if (opts_.include[i].empty())
                    whole = true;
                else
                    pend_in_.push_back(i);
            }
            pend_partial_ = !opts_.include.empty() && !whole;
        }
        return;
    }
    Frame &f = frames_[depth_ - 1];
    if (f.object) {
        if (expect_key_)
            misuse("a value where a member name is expected");
        return; // key() has prepared the member
    }
    pend_start_ = out_.size();
    if (f.kept > 0)
        out_.push_back(',');
    child_filter(f, {}, f.next_index++);
}

// Records that the current child value (written from out_ offset start) is complete.
void CanonicalWriter::child_done(bool kept, size_t start) {
    if (depth_ == 0) {
        done_ = true;
        return;
    }
    Frame &f = frames_[depth_ - 1];
    if (kept)
        f.kept++;
    else
        out_.resize_down(start);
    if (f.object) {
        Member &m = members_.back();
        m.kept = kept;
        m.end = out_.size();
        expect_key_ = true;
    }
}

void CanonicalWriter::push_frame(bool object) {
    if (depth_ >= opts_.max_depth)
        throw Error(sqlstate::statement_too_complex, "JSON nesting is too deep",
                    "More than " + std::to_string(opts_.max_depth) + " nested arrays or objects.");
    if (frames_.size() == depth_)
        frames_.emplace_back();
    Frame &f = frames_[depth_];
    f.object = object;
    f.drop = pend_drop_;
    f.partial = pend_partial_;
    f.value_start = pend_start_;
    out_.push_back(object ? '{' : '[');
    f.open_pos = out_.size();
    f.members_begin = members_.size();
    f.keys_begin = keys_.size();
    f.kept = 0;
    f.next_index = 0;
    if (filtering_) {
        f.ex.swap(pend_ex_);
        f.in.swap(pend_in_);
    }
    depth_++;
    expect_key_ = object;
}

void CanonicalWriter::begin_object() {
    before_value();
    push_frame(true);
}

void CanonicalWriter::begin_array() {
    before_value();
    push_frame(false);
}

void CanonicalWriter::key(std::string_view name) {
    tick();
    if (depth_ == 0 || !frames_[depth_ - 1].object || !expect_key_)
        misuse("a member name outside an object");
    if (validate_utf8_) {
        size_t bad = find_bad_utf8(name);
        if (bad != std::string_view::npos)
            bad_utf8(bad);
    }
    Frame &f = frames_[depth_ - 1];
    pend_start_ = out_.size();
    if (f.kept > 0)
        out_.push_back(',');
    const size_t start = out_.size();
    const size_t quoted = append_quoted(out_, name);
    // Filled in place (a Member built on the stack and copied stalls on store forwarding).
    Member &m = members_.emplace_back();
    m.key_len = name.size();
    m.start = start;
    m.end = 0;
    m.kept = false;
    if (!filtering_ && quoted == name.size() + 2) {
        // Nothing was escaped: the name stays readable in out_ until end_object (only filters
        // cut bytes out of out_ before then).
        m.key_off = start + 1;
        m.key_in_out = true;
    } else {
        m.key_off = keys_.size();
        m.key_in_out = false;
        keys_.append(name.data(), name.size());
    }
    out_.push_back(':');
    child_filter(f, name, -1);
    expect_key_ = false;
}

void CanonicalWriter::end_object() {
    tick();
    if (depth_ == 0 || !frames_[depth_ - 1].object || !expect_key_)
        misuse("end_object without a matching begin_object");
    Frame &f = frames_[depth_ - 1];
    const size_t count = members_.size() - f.members_begin;
    if (count > 1) { // (0 or 1 members: nothing to order or compare)
        Member *mb = members_.data() + f.members_begin;
        Member *me = members_.data() + members_.size();
        const char *kb = keys_.data();
        const char *ob = out_.data();
        auto name = [kb, ob](const Member &m) {
            return std::string_view((m.key_in_out ? ob : kb) + m.key_off, m.key_len);
        };
        bool ordered = true;
        for (Member *m = mb + 1; m < me; m++) {
            if (compare_utf16(name(m[-1]), name(*m)) >= 0) {
                ordered = false;
                break;
            }
        }
        if (!ordered) {
            std::sort(mb, me, [&](const Member &a, const Member &b) {
                return compare_utf16(name(a), name(b)) < 0;
            });
            for (Member *m = mb + 1; m < me; m++) {
                if (name(m[-1]) == name(*m)) {
                    std::string shown = quoted_string(name(*m).substr(0, 200));
                    throw Error(kMalformed, "duplicate member name in JSON object",
                                "The name " + shown + " occurs more than once (after unescaping).",
                                "I-JSON (RFC 7493) forbids duplicate names.");
                }
            }
            // Reordering copies the object once; nested unordered objects are copied once per
            // level, so poll the interrupt callback for big ones.
            if (out_.size() - f.open_pos > 65536 && opts_.interrupted != nullptr &&
                opts_.interrupted())
                throw Interrupted();
            scratch_.clear();
            scratch_.append(out_.data() + f.open_pos, out_.size() - f.open_pos);
            out_.resize_down(f.open_pos);
            bool first = true;
            for (Member *m = mb; m < me; m++) {
                if (!m->kept)
                    continue;
                if (!first)
                    out_.push_back(',');
                first = false;
                out_.append(scratch_.data() + (m->start - f.open_pos), m->end - m->start);
            }
        }
    }
    out_.push_back('}');
    members_.resize(f.members_begin);
    keys_.resize(f.keys_begin);
    bool kept = !f.drop && !(f.partial && f.kept == 0);
    size_t start = f.value_start;
    depth_--;
    expect_key_ = false;
    child_done(kept || depth_ == 0, start);
}

void CanonicalWriter::end_array() {
    tick();
    if (depth_ == 0 || frames_[depth_ - 1].object)
        misuse("end_array without a matching begin_array");
    Frame &f = frames_[depth_ - 1];
    out_.push_back(']');
    bool kept = !f.drop && !(f.partial && f.kept == 0);
    size_t start = f.value_start;
    depth_--;
    expect_key_ = false;
    child_done(kept || depth_ == 0, start);
}

// Scalars are kept unless a filter drops them; a scalar on an include path that continues
// deeper does not hold what the path names, so it is dropped (the root is always kept).
#define IDEM_SCALAR(write)                                                                         \
    do {                                                                                           \
        before_value();                                                                            \
        size_t start_ = pend_start_;                                                               \
        bool kept_ = depth_ == 0 || (!pend_drop_ && !pend_partial_);                               \
        write;                                                                                     \
        child_done(kept_, start_);                                                                 \
    } while (0)

void CanonicalWriter::string(std::string_view value) {
    if (validate_utf8_) {
        size_t bad = find_bad_utf8(value);
        if (bad != std::string_view::npos)
            bad_utf8(bad);
    }
    IDEM_SCALAR(append_quoted(out_, value));
}

void CanonicalWriter::number(std::string_view text) {
    IDEM_SCALAR(out_.set_end(
        write_number(text, opts_.exact_numbers, out_.room(number_bound(text.size())))));
}

void CanonicalWriter::boolean(bool value) {
    IDEM_SCALAR(value ? out_.append("true", 4) : out_.append("false", 5));
}

void CanonicalWriter::null() {
    IDEM_SCALAR(out_.append("null", 4));
}

#undef IDEM_SCALAR

std::string_view CanonicalWriter::result() const {
    if (!done_)
        misuse("result() before the document is complete");
    return out_.view();
}

// Makes sha_ ready for a new digest (no reset if it has been fed nothing since its last one).
void CanonicalWriter::fresh_sha() {
    if (!sha_)
        sha_ = std::make_unique<Sha256>();
    else if (!sha_fresh_)
        sha_->reset();
    sha_fresh_ = false;
}

// SHA-256 of the result, continuing a digest fingerprint_into started (one reused context).
Digest CanonicalWriter::digest() {
    std::string_view r = result();
    if (!hashing_) {
        fresh_sha();
        hashed_ = 0;
    }
    hashing_ = false;
    sha_->update(r.data() + hashed_, r.size() - hashed_);
    return sha_->finish();
}

// ---------------------------------------------------------------------------------------------
// Parser

namespace {

class Parser {
  public:
    Parser(std::string_view text, CanonicalWriter &w)
        : p_(reinterpret_cast<const unsigned char *>(text.data())), b_(p_), e_(p_ + text.size()),
          w_(w) {}
    void run();
    // Parses the whole text into t (cleared first): tokens, sorted member orders, side bytes.
    void run_tape(detail::TapeState &t, const Options &o);

  private:
    [[noreturn]] void fail(const char *msg, const char *hint = nullptr) const {
        throw Error(kMalformed, msg, "At byte " + std::to_string(p_ - b_) + " of the JSON text.",
                    hint ? hint : "");
    }
    void ws() {
        while (p_ < e_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t'))
            p_++;
    }
    std::string_view string();
    unsigned hex4();
    void literal(const char *word, size_t len);
    void number();
    const unsigned char *string_slow(detail::TapeState &t, detail::TapeState::Tok *k,
                                     const unsigned char *q, std::string_view *value);
    const unsigned char *number_slow(detail::TapeState &t, detail::TapeState::Tok *k,
                                     const unsigned char *s, bool exact);

    const unsigned char *p_;
    const unsigned char *b_;
    const unsigned char *e_;
    CanonicalWriter &w_;
    std::string sbuf_;
    std::string stack_; // 'o' / 'a' per open container
};

unsigned Parser::hex4() {
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

// The number of leading bytes of p[0..n) that a JSON string token holds as they are: printable
// ASCII other than '"' and '\\'.
inline size_t plain_run(const unsigned char *p, size_t n) noexcept {
    return plain_prefix<true>(p, n);
}

// Reads a string token (p_ at the opening quote) and returns its unescaped bytes: a view of the
// input when the token has no escapes, else of sbuf_ (valid until the next call).
std::string_view Parser::string() {
    p_++;
    const unsigned char *start = p_;
    bool copying = false; // an escape was seen: the bytes are collected in sbuf_
    std::string &out = sbuf_;
    for (;;) {
        const unsigned char *run = p_;
        p_ += plain_run(p_, static_cast<size_t>(e_ - p_));
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
                bad_utf8(p_ - b_);
            if (copying)
                out.append(reinterpret_cast<const char *>(p_), l);
            p_ += l;
            continue;
        }
        // backslash
        if (!copying) {
            copying = true;
            out.assign(reinterpret_cast<const char *>(start), p_ - start);
        }
        p_++;
        if (p_ >= e_)
            fail("unterminated JSON string");
        c = *p_++;
        switch (c) {
        case '"':
        case '\\':
        case '/':
            out.push_back(static_cast<char>(c));
            break;
        case 'b':
            out.push_back('\b');
            break;
        case 'f':
            out.push_back('\f');
            break;
        case 'n':
            out.push_back('\n');
            break;
        case 'r':
            out.push_back('\r');
            break;
        case 't':
            out.push_back('\t');
            break;
        case 'u': {
            unsigned cp = hex4();
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                if (e_ - p_ >= 2 && p_[0] == '\\' && p_[1] == 'u') {
                    p_ += 2;
                    unsigned lo = hex4();
                    if (lo < 0xDC00 || lo > 0xDFFF) {
                        p_ -= 6;
                        fail("lone surrogate in JSON string",
                             "A \\uD800-\\uDBFF escape must be followed by a \\uDC00-\\uDFFF one.");
                    }
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                } else {
                    fail("lone surrogate in JSON string",
                         "A \\uD800-\\uDBFF escape must be followed by a \\uDC00-\\uDFFF one.");
                }
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                p_ -= 6;
                fail("lone surrogate in JSON string",
                     "A \\uDC00-\\uDFFF escape must follow a \\uD800-\\uDBFF one.");
            }
            append_utf8(out, cp);
            break;
        }
        default:
            p_ -= 2;
            fail("invalid escape in JSON string");
        }
    }
}

void Parser::literal(const char *word, size_t len) {
    if (static_cast<size_t>(e_ - p_) < len || std::memcmp(p_, word, len) != 0)
        fail("invalid JSON literal");
    p_ += len;
}

void Parser::number() {
    const unsigned char *s = p_;
    if (p_ < e_ && *p_ == '-')
        p_++;
    if (p_ < e_ && (*p_ == 'I' || *p_ == 'N'))
        fail("NaN and Infinity are not JSON numbers", "I-JSON allows only finite numbers.");
    while (p_ < e_ && ((*p_ >= '0' && *p_ <= '9') || *p_ == '.' || *p_ == 'e' || *p_ == 'E' ||
                       *p_ == '+' || *p_ == '-'))
        p_++;
    std::string_view t(reinterpret_cast<const char *>(s), p_ - s);
    try {
        w_.number(t);
    } catch (const Error &e) {
        if (std::strcmp(e.sqlstate(), kMalformed) != 0)
            throw;
        p_ = s;
        fail("invalid JSON number");
    }
}

void Parser::run() {
    enum State { Value, Key, After } st = Value;
    stack_.clear();
    for (;;) {
        ws();
        if (st == Value) {
            if (p_ >= e_)
                fail("unexpected end of JSON text");
            switch (*p_) {
            case '{':
                p_++;
                w_.begin_object();
                ws();
                if (p_ < e_ && *p_ == '}') {
                    p_++;
                    w_.end_object();
                    st = After;
                } else {
                    stack_.push_back('o');
                    st = Key;
                }
                continue;
            case '[':
                p_++;
                w_.begin_array();
                ws();
                if (p_ < e_ && *p_ == ']') {
                    p_++;
                    w_.end_array();
                    st = After;
                } else {
                    stack_.push_back('a');
                    st = Value;
                }
                continue;
            case '"':
                w_.string(string());
                break;
            case 't':
                literal("true", 4);
                w_.boolean(true);
                break;
            case 'f':
                literal("false", 5);
                w_.boolean(false);
                break;
            case 'n':
                literal("null", 4);
                w_.null();
                break;
            case 'N':
            case 'I':
                fail("NaN and Infinity are not JSON numbers", "I-JSON allows only finite numbers.");
            default:
                if (*p_ == '-' || (*p_ >= '0' && *p_ <= '9')) {
                    number();
                    break;
                }
                if (*p_ == 0xEF && e_ - p_ >= 3 && p_[1] == 0xBB && p_[2] == 0xBF)
                    fail("byte order mark in JSON text", "Send JSON text without a BOM.");
                fail("unexpected character in JSON text");
            }
            st = After;
        } else if (st == Key) {
            if (p_ >= e_ || *p_ != '"')
                fail("expected a member name (a string) in JSON object");
            w_.key(string());
            ws();
            if (p_ >= e_ || *p_ != ':')
                fail("expected ':' after a member name in JSON object");
            p_++;
            st = Value;
        } else { // After
            if (stack_.empty()) {
                if (p_ != e_)
                    fail("unexpected text after the JSON value");
                return;
            }
            if (p_ >= e_)
                fail("unexpected end of JSON text");
            char top = stack_.back();
            if (*p_ == ',') {
                p_++;
                st = top == 'o' ? Key : Value;
            } else if (top == 'o' && *p_ == '}') {
                p_++;
                stack_.pop_back();
                w_.end_object();
            } else if (top == 'a' && *p_ == ']') {
                p_++;
                stack_.pop_back();
                w_.end_array();
            } else {
                fail(top == 'o' ? "expected ',' or '}' in JSON object"
                                : "expected ',' or ']' in JSON array");
            }
        }
    }
}

// The sort key of a member name s[0..n): its first 8 bytes as a big-endian integer,
// zero-padded, with the UTF-8 lead bytes EE and EF (U+E000..U+FFFF) raised to FE and FF (bytes
// that UTF-8 never uses) so that they sort after F0..F4 (the supplementary planes, which UTF-16
// writes as surrogates D800..DFFF). Integer order is then UTF-16 code unit order of the names
// wherever the keys differ; equal keys need a full comparison. Bytes up to limit may be read.
inline uint64_t name_key(const char *s, size_t n, const char *limit) noexcept {
    uint64_t w = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ && defined(__GNUC__)
    if (limit - s >= 8) { // (one load; w stays in a register)
        std::memcpy(&w, s, 8);
        w = __builtin_bswap64(w);
        if (n < 8)
            w &= ~(~uint64_t(0) >> (8 * n));
    } else {
        for (size_t i = 0; i < 8; i++)
            w = (w << 8) | (i < n ? static_cast<unsigned char>(s[i]) : 0u);
    }
#else
    (void)limit;
    for (size_t i = 0; i < 8; i++)
        w = (w << 8) | (i < n ? static_cast<unsigned char>(s[i]) : 0u);
#endif
    if ((w & 0x8080808080808080u) != 0) {
        for (int sh = 0; sh < 64; sh += 8) {
            uint64_t c = (w >> sh) & 0xFF;
            if (c == 0xEE || c == 0xEF)
                w += uint64_t(0x10) << sh;
        }
    }
    return w;
}

// name_key of a name in the padded text (8 bytes may be read from s).
inline uint64_t name_key(const char *s, size_t n) noexcept {
    return name_key(s, n, s + 8);
}

[[noreturn]] void too_deep(unsigned max_depth) {
    throw Error(sqlstate::statement_too_complex, "JSON nesting is too deep",
                "More than " + std::to_string(max_depth) + " nested arrays or objects.");
}

[[noreturn]] void duplicate_name(std::string_view name) {
    std::string shown = quoted_string(name.substr(0, 200));
    throw Error(kMalformed, "duplicate member name in JSON object",
                "The name " + shown + " occurs more than once (after unescaping).",
                "I-JSON (RFC 7493) forbids duplicate names.");
}

inline bool is_digit(unsigned char c) noexcept {
    return static_cast<unsigned char>(c - '0') < 10;
}

// Bytes that a number token takes in (the token is then checked as a whole).
struct NumberCharTable {
    bool t[256];
    constexpr NumberCharTable() : t() {
        for (unsigned char c :
             {'0', '1', '2', '3', '4', '5', '6', '7', '8', '9', '.', 'e', 'E', '+', '-'})
            t[c] = true;
    }
};
constexpr NumberCharTable kNumberChar;
inline bool number_char(unsigned char c) noexcept {
    return kNumberChar.t[c];
}

inline bool json_ws(unsigned char c) noexcept {
    return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

// The closing quote of the string token whose opening quote is at q, when the string holds
// only printable ASCII without '\\' (the common case: its canonical form is its text); else
// nullptr. padded: the text ends with a zero byte and 16 bytes may be read past it.
template <bool padded = false>
inline const unsigned char *plain_string_end(const unsigned char *q,
                                             const unsigned char *e) noexcept {
    const unsigned char *s = q + 1;
#ifdef __SSE2__
    const __m128i quote = _mm_set1_epi8('"');
    const __m128i bslash = _mm_set1_epi8('\\');
    const __m128i space = _mm_set1_epi8(0x20);
    while (padded || e - s >= 16) {
        // The end comes from the quotes alone (the shortest dependency chain for the next
        // token); other stops are checked beside it.
        __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i *>(s));
        const unsigned qm = static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(x, quote)));
        // (signed compare: bytes below 0x20 and bytes >= 0x80)
        const unsigned bad = static_cast<unsigned>(
            _mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(x, bslash), _mm_cmplt_epi8(x, space))));
        if (qm != 0) {
            if ((bad & ((qm & (0u - qm)) - 1)) != 0) // (a stop before the first quote)
                return nullptr;
            return s + __builtin_ctz(qm);
        }
        if (bad != 0)
            return nullptr;
        s += 16;
    }
#endif
    while (s < e && *s >= 0x20 && *s < 0x80 && *s != '"' && *s != '\\')
        s++;
    return s < e && *s == '"' ? s : nullptr;
}

// The canonical span of the number token at s, when it is a part of the text: a number without
// exponent whose text is already its ECMAScript form apart from trailing zeros in its fraction.
// It has at most 15 significant digits (so the decimal is the shortest one that round-trips
// through a double, and exact mode keeps the same digits) and a magnitude in the fixed-notation
// range (>= 1e-6; < 1e15 here). Sets *end to the end of the token. nullptr: use write_number.
// The text must end with a zero byte (TapeState::in): no bounds checks.
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
inline const unsigned char *
number_span(const unsigned char *s, const unsigned char **end, size_t *len) noexcept {
    const unsigned char *q = s + (*s == '-');
    const unsigned char *r = q;
    while (is_digit(*r))
        r++;
    const size_t il = static_cast<size_t>(r - q);
    if (il == 0 || (il > 1 && *q == '0'))
        return nullptr;
    if (*r == '.') {
        const unsigned char *f = ++r;
        while (is_digit(*r))
            r++;
        if (r == f || number_char(*r))
            return nullptr;
        *end = r;
        const unsigned char *fe = r;
        while (fe > f && fe[-1] == '0')
            fe--;
        if (fe != f) {
            if (*q != '0') {
                if (il + static_cast<size_t>(fe - f) > 15)
                    return nullptr;
            } else {
                const unsigned char *d = f;
                while (*d == '0') // (fe[-1] != '0': stops before fe)
                    d++;
                if (d - f > 5 || fe - d > 15)
                    return nullptr;
            }
            *len = static_cast<size_t>(fe - s);
            return s;
        }
        // A zero fraction: an integer value.
    } else {
        if (number_char(*r))
            return nullptr;
        *end = r;
    }
    if (*q == '0') {
        *len = 1; // "0" for -0, 0.0, -0.000 ...
        return q;
    }
    if (il > 15)
        return nullptr;
    *len = static_cast<size_t>(q + il - s);
    return s;
}

#if defined(__GNUC__)
#define IDEM_INLINE inline __attribute__((always_inline))
#define IDEM_NOINLINE __attribute__((noinline))
#define IDEM_LIKELY(x) __builtin_expect(!!(x), 1)
#else
#define IDEM_INLINE inline
#define IDEM_NOINLINE
#define IDEM_LIKELY(x) (x)
#endif

// Grows the tape or polls the interrupt callback (every 4096 tokens); returns the new write
// position (tokens are written at tk until tk == stop).
IDEM_NOINLINE detail::TapeState::Tok *tape_room(detail::TapeState &t, detail::TapeState::Tok *tk,
                                                const Options &o) {
    t.toks.e_ = tk;
    if (t.toks.size() >= t.next_poll) {
        t.next_poll += 4096;
        if (o.interrupted != nullptr && o.interrupted())
            throw Interrupted();
    }
    t.toks.reserve_more(1);
    // Every name, open container and order entry is (or names) a token: with room for as many
    // as the tape, they need no checks of their own.
    const size_t cap = t.toks.capacity();
    t.names.reserve_more(cap - t.names.size());
    t.opens.reserve_more(cap - t.opens.size());
    t.order.reserve_more(cap - t.order.size());
    t.stop = t.toks.b_ + t.next_poll < t.toks.c_ ? t.toks.b_ + t.next_poll : t.toks.c_;
    return t.toks.e_;
}

// Sets up the first tape_room: at once when the buffers kept from the last document have
// room for what tape_room would have made sure of.
inline void tape_start(detail::TapeState &t, const Options &o) {
    t.next_poll = 4096;
    const size_t cap = t.toks.capacity();
    if (cap >= 64 && t.names.capacity() >= cap && t.opens.capacity() >= cap &&
        t.order.capacity() >= cap)
        t.stop = cap > 4096 ? t.toks.b_ + 4096 : t.toks.c_;
    else
        tape_room(t, t.toks.b_, o);
}

// The unescaped name of a member (see TapeState::names).
std::string_view member_name(const detail::TapeState &t, const unsigned char *text, uint64_t ref) {
    uint32_t hi = static_cast<uint32_t>(ref >> 32);
    if (hi == 0) {
        const detail::TapeState::Tok &k = t.toks.b_[static_cast<uint32_t>(ref)];
        return std::string_view(reinterpret_cast<const char *>(text) + k.off + 1, k.len - 2);
    }
    uint32_t len;
    std::memcpy(&len, t.side.data() + hi, 4);
    return std::string_view(t.side.data() + hi + 4, len);
}

// Compares two member names whose keys are equal (a full comparison).
IDEM_NOINLINE int tied_compare(const detail::TapeState &t, const unsigned char *text, uint64_t ra,
                               uint64_t rb) {
    return compare_utf16(member_name(t, text, ra), member_name(t, text, rb));
}

// Closes the object whose token is ot and whose member names start at names[first]: sorts
// them (22P02 for duplicates) and appends their tokens to order. end: the next token.
void close_object(detail::TapeState &t, const unsigned char *text, uint32_t ot, uint32_t first,
                  uint32_t end, bool in_array) {
    using T = detail::TapeState;
    T::Name *const nb = t.names.b_ + first, *const ne = t.names.e_;
    const size_t n = static_cast<size_t>(ne - nb);
    T::Tok &k = t.toks.b_[ot];
    k.off = static_cast<uint32_t>(t.order.size());
    k.len = static_cast<uint32_t>(n);
    k.end = end;
    uint32_t *ord = t.order.e_; // (room: see tape_room)
    if (n >= 2 && n <= T::kShapeMax) {
        uint8_t perm[T::kShapeMax] = {};
        bool same = n == t.shape_n;
        for (size_t i = 0; i < n && same; i++)
            same = nb[i].key == t.shape_keys[i];
        if (same) {
            std::memcpy(perm, t.shape_order, T::kShapeMax); // (a fixed size: no call)
        } else {
            // Insertion sort of member indices by key; equal keys (rare: long common prefixes,
            // duplicates) are ordered by tied_compare. Equal names meet there (they end up
            // adjacent); the error then names the first duplicate in sorted order, as the
            // streaming writer does.
            // (The keys are sorted beside the indices: no indirect loads.)
            bool ties = false, duplicates = false;
            uint64_t ks[T::kShapeMax];
            ks[0] = nb[0].key;
            perm[0] = 0;
            for (size_t i = 1; i < n; i++) {
                const uint64_t key = nb[i].key;
                size_t j = i;
                while (j > 0) {
                    const uint64_t pk = ks[j - 1];
                    if (pk < key)
                        break;
                    if (pk == key) {
                        ties = true;
                        const int c = tied_compare(t, text, nb[perm[j - 1]].ref, nb[i].ref);
                        duplicates |= c == 0;
                        if (c <= 0)
                            break;
                    }
                    ks[j] = pk;
                    perm[j] = perm[j - 1];
                    j--;
                }
                ks[j] = key;
                perm[j] = static_cast<uint8_t>(i);
            }
            if (duplicates)
                for (size_t i = 1; i < n; i++) {
                    std::string_view a = member_name(t, text, nb[perm[i - 1]].ref);
                    std::string_view b = member_name(t, text, nb[perm[i]].ref);
                    if (a == b)
                        duplicate_name(b);
                }
            t.shape_n = 0;
            t.chunk_n = 0;
            t.rec = T::kNotObject;
            if (!ties) { // (distinct keys: the order depends on them alone)
                for (size_t i = 0; i < n; i++)
                    t.shape_keys[i] = nb[i].key;
                if (in_array) { // (objects in arrays often repeat their names)
                    for (size_t i = 0; i < n; i++) {
                        const T::Tok &nk = t.toks.b_[static_cast<uint32_t>(nb[i].ref)];
                        t.shape_clen[i] = 0;
                        if ((nb[i].ref >> 32) != 0 || nk.kind != T::InText)
                            continue;
                        // The name and what followed it up to its value, as key passed them.
                        const unsigned char *const q = text + nk.off;
                        const unsigned char *v = q + nk.len;
                        if (*v != ':')
                            while (json_ws(*v))
                                v++;
                        v++;
                        if (*v == ' ')
                            v++;
                        if (v - q <= 16) {
                            std::memcpy(t.shape_chunk[i], q, 16); // (padded text)
                            t.shape_clen[i] = static_cast<uint8_t>(v - q);
                            t.shape_nlen[i] = static_cast<uint8_t>(nk.len);
                        }
                    }
                    t.chunk_n = n;
                }
                std::memcpy(t.shape_order, perm, T::kShapeMax);
                t.shape_n = n;
            }
        }
        for (size_t i = 0; i < n; i++)
            ord[i] = static_cast<uint32_t>(nb[perm[i]].ref);
        t.order.e_ = ord + n;
        t.names.e_ = nb;
        return;
    }
    if (n <= 32) {
        // Insertion sort by key; equal keys (rare: long common prefixes, duplicates) are
        // ordered by tied_compare. Equal names meet there (they end up adjacent); the error
        // then names the first duplicate in sorted order, as the streaming writer does.
        bool duplicates = false;
        for (size_t i = 1; i < n; i++) {
            const uint64_t key = nb[i].key, ref = nb[i].ref;
            size_t j = i;
            while (j > 0) {
                const uint64_t pk = nb[j - 1].key;
                if (pk < key)
                    break;
                if (pk == key) {
                    const int c = tied_compare(t, text, nb[j - 1].ref, ref);
                    duplicates |= c == 0;
                    if (c <= 0)
                        break;
                }
                nb[j].key = pk;
                nb[j].ref = nb[j - 1].ref;
                j--;
            }
            nb[j].key = key;
            nb[j].ref = ref;
        }
        if (duplicates)
            for (size_t i = 1; i < n; i++)
                if (nb[i - 1].key == nb[i].key &&
                    member_name(t, text, nb[i - 1].ref) == member_name(t, text, nb[i].ref))
                    duplicate_name(member_name(t, text, nb[i].ref));
    } else {
        std::sort(nb, ne, [&](const T::Name &x, const T::Name &y) {
            if (x.key != y.key)
                return x.key < y.key;
            return compare_utf16(member_name(t, text, x.ref), member_name(t, text, y.ref)) < 0;
        });
        for (size_t i = 1; i < n; i++)
            if (nb[i - 1].key == nb[i].key &&
                member_name(t, text, nb[i - 1].ref) == member_name(t, text, nb[i].ref))
                duplicate_name(member_name(t, text, nb[i].ref));
    }
    for (size_t i = 0; i < n; i++)
        ord[i] = static_cast<uint32_t>(nb[i].ref);
    t.order.e_ = ord + n;
    t.names.e_ = nb;
}

// A string token at q that plain_string_end does not take: decoded and, when it has escapes,
// written canonically to side (k becomes InSide). Returns the end of the token; *value is the
// unescaped text when it is not in the input (valid until the next string), else null.
IDEM_NOINLINE const unsigned char *Parser::string_slow(detail::TapeState &t,
                                                       detail::TapeState::Tok *k,
                                                       const unsigned char *q,
                                                       std::string_view *value) {
    p_ = q;
    std::string_view v = string();
    if (v.data() == reinterpret_cast<const char *>(q) + 1) { // UTF-8 without escapes
        k->off = static_cast<uint32_t>(q - b_);
        k->len = static_cast<uint32_t>(p_ - q);
        *value = {};
    } else {
        k->kind = detail::TapeState::InSide;
        k->off = static_cast<uint32_t>(t.side.size());
        k->len = static_cast<uint32_t>(append_quoted(t.side, v));
        *value = v;
    }
    return p_;
}

// A number token at s that number_span does not take: through write_number into side.
IDEM_NOINLINE const unsigned char *Parser::number_slow(detail::TapeState &t,
                                                       detail::TapeState::Tok *k,
                                                       const unsigned char *s, bool exact) {
    const unsigned char *p = s;
    if (*p == '-')
        p++;
    if (p < e_ && (*p == 'I' || *p == 'N')) {
        p_ = p;
        fail("NaN and Infinity are not JSON numbers", "I-JSON allows only finite numbers.");
    }
    while (p < e_ && number_char(*p))
        p++;
    std::string_view text(reinterpret_cast<const char *>(s), p - s);
    const size_t off = t.side.size();
    try {
        t.side.set_end(write_number(text, exact, t.side.room(number_bound(text.size()))));
    } catch (const Error &err) {
        if (std::strcmp(err.sqlstate(), kMalformed) != 0)
            throw;
        p_ = s;
        fail("invalid JSON number");
    }
    k->kind = detail::TapeState::InSide;
    k->off = static_cast<uint32_t>(off);
    k->len = static_cast<uint32_t>(t.side.size() - off);
    return p;
}

// The escape sequence at p (a '\\' in the padded text) written canonically at o (at most 6
// bytes, never more than the sequence); both advance. false: an invalid escape or a
// surrogate (left to the full parser, which joins pairs and reports lone ones).
inline bool escape_into(const unsigned char *&p, char *&o) noexcept {
    // The value of a hexadecimal digit, or -1.
    auto hex = [](unsigned c) -> int {
        if (c - '0' < 10)
            return static_cast<int>(c - '0');
        c |= 0x20;
        return c - 'a' < 6 ? static_cast<int>(c - 'a' + 10) : -1;
    };
    const unsigned c = p[1];
    switch (c) {
    case '"':
    case '\\':
    case 'b':
    case 'f':
    case 'n':
    case 'r':
    case 't':
        *o++ = '\\';
        *o++ = static_cast<char>(c);
        p += 2;
        return true;
    case '/':
        *o++ = '/';
        p += 2;
        return true;
    case 'u': {
        const int h0 = hex(p[2]), h1 = hex(p[3]), h2 = hex(p[4]), h3 = hex(p[5]);
        if ((h0 | h1 | h2 | h3) < 0) // (zero padding is no digit)
            return false;
        const unsigned cp = static_cast<unsigned>((h0 << 12) | (h1 << 8) | (h2 << 4) | h3);
        if (cp >= 0xD800 && cp <= 0xDFFF)
            return false;
        p += 6;
        if (cp < 0x80) {
            if (kEscape.t[cp])
                o = write_escape(o, static_cast<unsigned char>(cp));
            else
                *o++ = static_cast<char>(cp);
        } else if (cp < 0x800) {
            *o++ = static_cast<char>(0xC0 | (cp >> 6));
            *o++ = static_cast<char>(0x80 | (cp & 0x3F));
        } else {
            *o++ = static_cast<char>(0xE0 | (cp >> 12));
            *o++ = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            *o++ = static_cast<char>(0x80 | (cp & 0x3F));
        }
        return true;
    }
    default:
        return false;
    }
}

// Copies n bytes from src to o 16 at a time (up to 15 more are read and written).
inline void copy_chunks(char *o, const char *src, size_t n) noexcept {
    for (size_t i = 0; i < n; i += 16)
        std::memcpy(o + i, src + i, 16);
}

// The rest of a string at p (in the padded text, after its opening quote or a part already
// written) written canonically at o, closing quote included: never longer than its text, and
// up to 15 bytes more are read and written. Both advance (p past the closing quote). false:
// errors and surrogate escapes, for the full string parser.
IDEM_NOINLINE bool string_rest_into(const unsigned char *&p, char *&o,
                                    const unsigned char *e) noexcept {
    for (;;) {
        const size_t n = plain_prefix<true, true>(p, static_cast<size_t>(e - p));
        copy_chunks(o, reinterpret_cast<const char *>(p), n);
        o += n;
        p += n;
        const unsigned c = *p;
        if (c == '"')
            break;
        if (c >= 0x80) {
            const size_t l = utf8_seq_len(p, static_cast<size_t>(e - p));
            if (l == 0)
                return false;
            std::memcpy(o, p, 4); // (the padded text has 4 bytes here)
            o += l;
            p += l;
            continue;
        }
        if (c != '\\' || !escape_into(p, o)) // (a control character, the end of the text)
            return false;
    }
    *o++ = '"';
    p++;
    return true;
}

// A string value at q (in the padded text) with escapes or bytes >= 0x80: written
// canonically to side in one pass (k becomes InSide), or kept as a text span when it has no
// escapes. Returns the end of the token, or null (side unchanged) for what string_slow must
// decide: errors, surrogate escapes.
IDEM_NOINLINE const unsigned char *string_value(detail::TapeState &t, detail::TapeState::Tok *k,
                                                const unsigned char *q, const unsigned char *b,
                                                const unsigned char *e) {
    // Up to the first escape the text is canonical: only checked.
    const unsigned char *p = q + 1;
    for (;;) {
        p += plain_prefix<true, true>(p, static_cast<size_t>(e - p));
        if (*p == '"') { // (UTF-8 beyond ASCII, no escapes: a span of the text)
            p++;
            k->off = static_cast<uint32_t>(q - b);
            k->len = static_cast<uint32_t>(p - q);
            return p;
        }
        if (*p < 0x80)
            break;
        const size_t l = utf8_seq_len(p, static_cast<size_t>(e - p));
        if (l == 0)
            return nullptr;
        p += l;
    }
    if (*p != '\\') // (a control character, or the end of the text)
        return nullptr;
    // From there on it is written to side (with room for the rest of the text: the canonical
    // string is never longer than its text).
    const size_t at = t.side.size();
    const size_t head = static_cast<size_t>(p - q);
    char *o = t.side.room(static_cast<size_t>(e - q) + 64);
    copy_chunks(o, reinterpret_cast<const char *>(q), head);
    o += head;
    if (!string_rest_into(p, o, e))
        return nullptr; // (side's size is unchanged)
    t.side.set_end(o);
    k->kind = detail::TapeState::InSide;
    k->off = static_cast<uint32_t>(at);
    k->len = static_cast<uint32_t>(t.side.size() - at);
    return p;
}

// Writes the tokens and names of the first j members of an object in an array that matched
// the recorded shape (names at noff, values at vals' end), as key and value would have;
// returns the new token write position.
IDEM_NOINLINE detail::TapeState::Tok *shape_tokens(detail::TapeState &t, detail::TapeState::Tok *tk,
                                                   const uint32_t *noff, size_t j,
                                                   const Options &o) {
    using T = detail::TapeState;
    const T::Span *sv = t.vals.e_;
    for (size_t i = 0; i < j; i++) {
        for (int h = 0; h < 2; h++) {
            if (tk == t.stop)
                tk = tape_room(t, tk, o);
            T::Tok *k = tk++;
            k->kind = T::InText;
            if (h == 0) {
                k->off = noff[i];
                k->len = t.shape_nlen[i];
                T::Name *nm = t.names.e_++; // (room: see tape_room)
                nm->key = t.shape_keys[i];
                nm->ref = static_cast<uint32_t>(k - t.toks.b_);
            } else {
                k->off = sv[i].off;
                k->len = sv[i].len;
            }
        }
    }
    return tk;
}

// Records what pass 2 needs to write objects of the recorded shape (TapeState::ShapeRec).
IDEM_NOINLINE void record_shape(detail::TapeState &t) {
    using T = detail::TapeState;
    t.rec = static_cast<uint32_t>(t.recs.size());
    t.recs.reserve_more(1);
    T::ShapeRec &r = *t.recs.e_++;
    r.names = static_cast<uint32_t>(t.side.size());
    r.n = static_cast<uint32_t>(t.chunk_n);
    char *o = t.side.room(T::kShapeMax * 17);
    for (size_t i = 0; i < t.chunk_n; i++) {
        const size_t m = t.shape_order[i];
        std::memcpy(o, t.shape_chunk[m], t.shape_nlen[m]); // (at most 16 bytes)
        o += t.shape_nlen[m];
        *o++ = ':';
        r.name_len[i] = static_cast<uint8_t>(t.shape_nlen[m] + 1);
        r.text_index[i] = static_cast<uint8_t>(m);
    }
    t.side.set_end(o);
}

// Pass 1 over a text followed by a zero byte and more (TapeState::in): bytes are compared
// without bounds checks (the zero byte matches no token), and failures check for the end.
IDEM_NOINLINE void Parser::run_tape(detail::TapeState &t, const Options &o) {
    using T = detail::TapeState;
    const bool exact = o.exact_numbers;
    const size_t max_depth = o.max_depth;
    const unsigned char *p = p_;
    const unsigned char *const b = b_;
    const unsigned char *const e = e_;
    // Tokens are written at tk; at t.stop, tape_room grows the tape or polls.
    T::Tok *tk = t.toks.b_;
    T::Tok *stop = t.stop; // (set by tape_start)
#define IDEM_TOKEN(k, kind_)                                                                       \
    if (tk == stop) {                                                                              \
        tk = tape_room(t, tk, o);                                                                  \
        stop = t.stop;                                                                             \
    }                                                                                              \
    T::Tok *const k = tk++;                                                                        \
    k->kind = (kind_)
#define IDEM_FAIL(...)                                                                             \
    do {                                                                                           \
        p_ = p;                                                                                    \
        fail(__VA_ARGS__);                                                                         \
    } while (0)
#define IDEM_WS()                                                                                  \
    while (*p <= ' ' && json_ws(*p))                                                               \
    p++

    bool member =
        false; // the value to parse is an object member's (else an array element's or the root)
    size_t cur = 0;        // the names of the innermost open object start at names[cur]
    size_t sj = 0;         // (shape) the members of the object in an array that matched so far,
    T::Span *sv = nullptr; // their value spans (in vals)
    uint32_t noff[T::kShapeMax]; // and the text offsets of their names
value:
    switch (*p) {
    case ' ':
    case '\n':
    case '\r':
    case '\t':
        p++;
        IDEM_WS();
        goto value;
    case '"': {
        IDEM_TOKEN(k, T::InText);
        const unsigned char *q = p;
        if (const unsigned char *c = plain_string_end<true>(q, e)) {
            p = c + 1;
            k->off = static_cast<uint32_t>(q - b);
            k->len = static_cast<uint32_t>(p - q);
        } else if (const unsigned char *c2 = string_value(t, k, q, b, e)) {
            p = c2;
        } else {
            std::string_view unused;
            p = string_slow(t, k, q, &unused);
        }
        goto scalar;
    }
    case '{': {
        IDEM_TOKEN(k, T::Object);
        if (t.opens.size() >= max_depth)
            too_deep(o.max_depth);
        const uint32_t idx = static_cast<uint32_t>(k - t.toks.b_);
        p++;
        if (*p != '}' && *p != '"')
            IDEM_WS();
        if (*p == '}') {
            p++;
            k->off = 0;
            k->len = 0;
            k->end = idx + 1;
            goto after;
        }
        cur = t.names.size();
        *t.opens.e_++ = {idx, static_cast<uint32_t>(cur)}; // (room: see tape_room)
#ifdef __SSE2__
        if (!member && t.chunk_n != 0 && t.opens.size() >= 2) { // (an element of an array)
            sj = 0;
            t.vals.reserve_more(T::kShapeMax);
            sv = t.vals.e_;
            goto shape;
        }
#endif
        goto key;
    }
    case '[': {
        IDEM_TOKEN(k, T::Array);
        if (t.opens.size() >= max_depth)
            too_deep(o.max_depth);
        const uint32_t idx = static_cast<uint32_t>(k - t.toks.b_);
        p++;
        IDEM_WS();
        if (*p == ']') {
            p++;
            k->end = idx + 1;
            goto after;
        }
        *t.opens.e_++ = {idx, T::kNotObject};
        member = false;
        goto value;
    }
    case 't':
    case 'f':
    case 'n': {
        IDEM_TOKEN(k, T::InText);
        // (4-byte compares: the padded text has zero bytes past its end, which match none)
        const size_t len = *p == 'f' ? 5 : 4;
        const char *const word = *p == 't' ? "true" : *p == 'f' ? "alse" : "null";
        uint32_t got, want;
        std::memcpy(&got, p + len - 4, 4);
        std::memcpy(&want, word, 4);
        if (got != want)
            IDEM_FAIL("invalid JSON literal");
        k->off = static_cast<uint32_t>(p - b);
        k->len = static_cast<uint32_t>(len);
        p += len;
        goto after;
    }
    case 'N':
    case 'I':
        IDEM_FAIL("NaN and Infinity are not JSON numbers", "I-JSON allows only finite numbers.");
    default:
        if (*p == '-' || is_digit(*p)) {
            IDEM_TOKEN(k, T::InText);
            const unsigned char *end;
            size_t len;
            if (const unsigned char *span = number_span(p, &end, &len)) {
                p = end;
                k->off = static_cast<uint32_t>(span - b);
                k->len = static_cast<uint32_t>(len);
            } else {
                p = number_slow(t, k, p, exact);
            }
            goto scalar;
        }
        if (p >= e)
            IDEM_FAIL("unexpected end of JSON text");
        if (*p == 0xEF && e - p >= 3 && p[1] == 0xBB && p[2] == 0xBF)
            IDEM_FAIL("byte order mark in JSON text", "Send JSON text without a BOM.");
        IDEM_FAIL("unexpected character in JSON text");
    }

key:
    if (*p != '"') {
        IDEM_WS();
        if (*p != '"')
            IDEM_FAIL("expected a member name (a string) in JSON object");
    }
    {
        IDEM_TOKEN(k, T::InText);
        const uint32_t idx = static_cast<uint32_t>(k - t.toks.b_);
        const unsigned char *q = p;
        T::Name *nm = t.names.e_++; // (room: see tape_room)
#ifdef __SSE2__
        // The j-th member of the last recorded shape: when the text here starts with the same
        // bytes as its name and what followed up to its value, it parses the same way.
        const size_t j = static_cast<size_t>(nm - t.names.b_) - cur;
        if (j < t.chunk_n) {
            const unsigned cl = t.shape_clen[j];
            const unsigned want = (1u << cl) - 1;
            const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i *>(q));
            const __m128i y = _mm_load_si128(reinterpret_cast<const __m128i *>(t.shape_chunk[j]));
            const unsigned m = static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(x, y)));
            if ((m & want) == want && cl != 0) {
                k->off = static_cast<uint32_t>(q - b);
                k->len = t.shape_nlen[j];
                nm->key = t.shape_keys[j];
                nm->ref = idx;
                p = q + cl;
                member = true;
                goto value;
            }
        }
#endif
        if (const unsigned char *c = plain_string_end<true>(q, e)) {
            p = c + 1;
            k->off = static_cast<uint32_t>(q - b);
            k->len = static_cast<uint32_t>(p - q);
            nm->key = name_key(reinterpret_cast<const char *>(q) + 1, c - q - 1,
                               reinterpret_cast<const char *>(e + T::kPad));
            nm->ref = idx;
        } else {
            std::string_view v;
            p = string_slow(t, k, q, &v);
            if (v.data() == nullptr) {
                nm->key = name_key(reinterpret_cast<const char *>(q) + 1, p - q - 2,
                                   reinterpret_cast<const char *>(e + T::kPad));
                nm->ref = idx;
            } else {
                nm->key = name_key(v.data(), v.size(), v.data() + v.size());
                const uint32_t len = static_cast<uint32_t>(v.size());
                nm->ref = idx | static_cast<uint64_t>(t.side.size()) << 32; // (never 0)
                t.side.append(reinterpret_cast<const char *>(&len), 4);
                t.side.append(v.data(), v.size());
            }
        }
    }
    if (*p != ':') {
        IDEM_WS();
        if (*p != ':')
            IDEM_FAIL("expected ':' after a member name in JSON object");
    }
    p++;
    if (*p == ' ') // (the usual ": ")
        p++;
    member = true;
    goto value;

#ifdef __SSE2__
// An object in an array whose first sj members matched the last recorded shape (see
// TapeState::shape_chunk) name for name, with string or number values; p is at the next
// member. A member that does not match, or another value, goes on through key or value.
shape : {
    const unsigned cl = t.shape_clen[sj];
    const unsigned want = (1u << cl) - 1;
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i *>(p));
    const __m128i y = _mm_load_si128(reinterpret_cast<const __m128i *>(t.shape_chunk[sj]));
    const unsigned m = static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(x, y)));
    if ((m & want) != want || cl == 0) {
        tk = shape_tokens(t, tk, noff, sj, o);
        stop = t.stop;
        goto key;
    }
    noff[sj] = static_cast<uint32_t>(p - b);
    p += cl;
    const unsigned char *const q = p;
    if (*q == '"') {
        const unsigned char *c = plain_string_end<true>(q, e);
        if (!c)
            goto shape_value;
        p = c + 1;
        sv[sj] = {static_cast<uint32_t>(q - b), static_cast<uint32_t>(p - q)};
    } else if (*q == '-' || is_digit(*q)) {
        const unsigned char *end;
        size_t len;
        const unsigned char *span = number_span(q, &end, &len);
        if (!span)
            goto shape_value;
        p = end;
        sv[sj] = {static_cast<uint32_t>(span - b), static_cast<uint32_t>(len)};
    } else {
        goto shape_value;
    }
    if (++sj < t.chunk_n) {
        if (*p == ',') {
            p++;
            if (*p == ' ')
                p++;
            goto shape;
        }
    } else if (*p == '}') {
        // All members, in the recorded sequence: the same distinct names, the recorded order.
        p++;
        if (t.rec == T::kNotObject)
            record_shape(t);
        T::Tok &ok = t.toks.b_[t.opens.back().tok];
        ok.kind = T::Shaped;
        ok.off = static_cast<uint32_t>(sv - t.vals.b_);
        ok.len = t.rec;
        t.vals.e_ = sv + sj;
        t.opens.pop_back();
        goto after;
    }
    // Something else follows the value: on through scalar, as the tokens would have been.
    tk = shape_tokens(t, tk, noff, sj, o);
    stop = t.stop;
    member = true;
    goto scalar;
shape_value: // the j-th member's name matched, its value is another kind: on through value
    tk = shape_tokens(t, tk, noff, sj, o);
    stop = t.stop;
    {
        IDEM_TOKEN(k, T::InText);
        T::Name *nm = t.names.e_++; // (room: see tape_room)
        k->off = noff[sj];
        k->len = t.shape_nlen[sj];
        nm->key = t.shape_keys[sj];
        nm->ref = static_cast<uint32_t>(k - t.toks.b_);
    }
    member = true;
    goto value;
}
#endif

scalar: // a string or number is complete; a member's value is usually followed by ", " and a name
    if (member && *p == ',') {
        p++;
        if (*p == ' ')
            p++;
        goto key;
    }

after:
    if (t.opens.empty()) {
        IDEM_WS();
        if (p != e)
            IDEM_FAIL("unexpected text after the JSON value");
        t.toks.e_ = tk;
        return;
    }
    if (json_ws(*p))
        IDEM_WS();
    {
        const T::Open op = t.opens.back();
        const unsigned char c = *p;
        if (c == ',') {
            p++;
            if (*p == ' ') // (the usual ", ")
                p++;
            if (op.names != T::kNotObject) {
                cur = op.names;
                goto key;
            }
            member = false;
            goto value;
        }
        const uint32_t end = static_cast<uint32_t>(tk - t.toks.b_);
        if (op.names != T::kNotObject) {
            if (c != '}') {
                if (p >= e)
                    IDEM_FAIL("unexpected end of JSON text");
                IDEM_FAIL("expected ',' or '}' in JSON object");
            }
            p++;
            close_object(t, b, op.tok, op.names, end,
                         t.opens.size() >= 2 && t.opens.e_[-2].names == T::kNotObject);
        } else {
            if (c != ']') {
                if (p >= e)
                    IDEM_FAIL("unexpected end of JSON text");
                IDEM_FAIL("expected ',' or ']' in JSON array");
            }
            p++;
            t.toks.b_[op.tok].end = end;
        }
        t.opens.pop_back();
        goto after;
    }
#undef IDEM_TOKEN
#undef IDEM_FAIL
#undef IDEM_WS
}

// Copies a span of n bytes at src, of which 32 bytes may be read, to o; returns the end. Room
// for 32 bytes more than n at o.
inline char *copy_span(char *o, const char *src, size_t n) noexcept {
    if (n <= 32) {
        std::memcpy(o, src, 16);
        std::memcpy(o + 16, src + 16, 16);
    } else {
        std::memcpy(o, src, n);
    }
    return o + n;
}

} // namespace

// Copies text into t.in followed by kPad zero bytes; returns the copy.
static std::string_view pad_text(detail::TapeState &t, std::string_view text) {
    using T = detail::TapeState;
    t.in.clear();
    char *c = t.in.room(text.size() + T::kPad);
    if (!text.empty())
        std::memcpy(c, text.data(), text.size());
    std::memset(c + text.size(), 0, T::kPad);
    t.in.set_end(c + text.size());
    return t.in.view();
}

void CanonicalWriter::parse_tape(std::string_view text, bool hash) {
    using T = detail::TapeState;
    if (!tape_)
        tape_ = std::make_unique<T>();
    T &t = *tape_; // (cleared by reset(), which parse() calls first)
    text = pad_text(t, text);
    tape_start(t, opts_);
    Parser(text, *this).run_tape(t, opts_);
    // Second pass: write every token once, each object's members in their sorted order.
    // (Text spans are disjoint parts of the text, side spans of side; at most 2 bytes of
    // punctuation per token; copy_span writes up to 32 bytes past the end.)
    char *o = out_.room(text.size() + t.side.size() + 2 * t.toks.size() + 64);
    t.side.room(32); // (so that copy_span may read 32 bytes from any side span)
    const char *const base[2] = {text.data(), t.side.data()};
    const T::Tok *const toks = t.toks.b_;
    const uint32_t *const order = t.order.b_;
    uint32_t i = 0; // the value to write
    uint32_t next;  // the token after the value just written
    // With hash: whenever the text written passes hash_at, its whole 64-byte blocks not yet
    // hashed go to SHA-256 (kHashRun: measured against 64 and 256, bench/RESULTS.md).
    char *const o0 = o;
    constexpr size_t kHashRun = 128;
    const char *hash_at = reinterpret_cast<const char *>(UINTPTR_MAX);
    if (hash && text.size() >= 512) { // (smaller texts: nothing to gain, measured)
        fresh_sha();
        hashing_ = true;
        hash_at = o + kHashRun;
    }
#define IDEM_COPY(k) o = copy_span(o, base[(k).kind] + (k).off, (k).len)
value : {
    const T::Tok &k = toks[i];
    if (k.kind <= T::InSide) {
        IDEM_COPY(k);
        next = i + 1;
        goto up;
    }
    if (k.kind == T::Shaped) {
        const T::ShapeRec &r = t.recs.b_[k.len];
        const T::Span *const vs = t.vals.b_ + k.off;
        const char *name = base[1] + r.names;
        *o++ = '{';
        for (uint32_t m = 0; m < r.n; m++) {
            o = copy_span(o, name, r.name_len[m]);
            name += r.name_len[m];
            const T::Span v = vs[r.text_index[m]];
            o = copy_span(o, base[0] + v.off, v.len);
            *o++ = ',';
        }
        o[-1] = '}';
        next = i + 1;
        goto up;
    }
    if (k.kind == T::Object) {
        *o++ = '{';
        if (k.len == 0) {
            *o++ = '}';
            next = k.end;
            goto up;
        }
        t.emit.push_back({order + k.off, k.len, k.end, 1});
        goto members;
    }
    *o++ = '[';
    if (k.end == i + 1) {
        *o++ = ']';
        next = k.end;
        goto up;
    }
    t.emit.push_back({nullptr, 0, k.end, 0});
    i++;
    goto elements;
}
members : { // the object on top has f.left > 0 members to write, the next at f.ord
    // (ord and left stay in registers: the byte stores at o may alias f for the compiler)
    T::Emit &f = t.emit.back();
    const uint32_t *ord = f.ord;
    uint32_t left = f.left;
    for (;;) {
        const uint32_t kt = *ord++;
        IDEM_COPY(toks[kt]);
        *o++ = ':';
        left--;
        const T::Tok &v = toks[kt + 1];
        if (v.kind > T::InSide) {
            f.ord = ord;
            f.left = left;
            i = kt + 1;
            goto value;
        }
        IDEM_COPY(v);
        if (left == 0)
            break;
        *o++ = ',';
    }
    *o++ = '}';
    next = f.end;
    t.emit.pop_back();
    goto up;
}
elements : { // the array on top has its next element at i
    const uint32_t end = t.emit.back().end;
    for (;;) {
        const T::Tok &v = toks[i];
        if (v.kind > T::InSide)
            goto value;
        IDEM_COPY(v);
        if (++i == end)
            break;
        *o++ = ',';
    }
    *o++ = ']';
    next = end;
    t.emit.pop_back();
    goto up;
}
up: // the value before token next is complete
    if (o >= hash_at) {
        size_t upto = static_cast<size_t>(o - o0) & ~size_t(63);
        sha_->update(o0 + hashed_, upto - hashed_);
        hashed_ = upto;
        hash_at = o0 + upto + kHashRun;
    }
    if (t.emit.empty()) {
        out_.set_end(o);
        done_ = true;
        return;
    }
    {
        T::Emit &f = t.emit.back();
        if (f.object) {
            if (f.left != 0) {
                *o++ = ',';
                goto members;
            }
            *o++ = '}';
        } else {
            if (next != f.end) {
                *o++ = ',';
                i = next;
                goto elements;
            }
            *o++ = ']';
        }
        next = f.end;
        t.emit.pop_back();
        goto up;
    }
#undef IDEM_COPY
}

// Resets and parses text through the tape (hash: feeding sha_ while writing) or the streaming
// writer.
void CanonicalWriter::parse(std::string_view text, bool hash) {
    reset();
    // The tape's 32-bit offsets would cover texts up to 64 MiB (canonical numbers in the side
    // buffer can be ~20x their text); it takes up to 16 bytes per token, so bigger texts (and
    // filters) go through the streaming writer.
    if (!filtering_ && text.size() <= (size_t(16) << 20)) {
        parse_tape(text, hash);
        // A text of at most 4 KiB grows no buffer near what shrink() keeps (1 MiB, 64 Ki
        // tokens): the tape takes at most a token per byte, canonical numbers up to ~5 bytes
        // per byte of text (1e20: 21 digits), shape records 136 bytes per object.
        may_have_grown_ = text.size() > 4096;
        return;
    }
    try {
        Parser(text, *this).run();
    } catch (...) {
        done_ = false; // (the value may be complete before the error: text after it)
        throw;
    }
}

// Canonicalises text into w (see jcs.hpp).
void parse_into(std::string_view text, CanonicalWriter &w) {
    w.parse(text, false);
}

// Canonicalises text into w and returns its SHA-256, hashing while writing (see jcs.hpp).
Digest fingerprint_into(std::string_view text, CanonicalWriter &w) {
    // The digest is started first: its set-up (OpenSSL frees and allocates the context's
    // state) does not wait for the canonical text (bench/RESULTS.md: faster than after it).
    w.fresh_sha();
    w.sha_fresh_ = true;
    w.parse(text, true);
    return w.digest();
}

std::string canonicalize_text(std::string_view text, const Options &opts) {
    CanonicalWriter w(opts);
    parse_into(text, w);
    return std::string(w.result());
}

Digest fingerprint_text(std::string_view text, const Options &opts) {
    CanonicalWriter w(opts);
    return fingerprint_into(text, w);
}

} // namespace idem::jcs
