// What the parts of the canonicaliser (core/jcs/*.cpp) share; callers include jcs.hpp only.
//   utf8.cpp        UTF-8 checks, JCS string escaping
//   number.cpp      JSON number text -> ECMAScript form (strict and exact mode)
//   buffer.cpp      Buffer, Pod and the tape's buffers
//   writer.cpp      CanonicalWriter: events -> canonical text (filters, member order)
//   reader.cpp      Reader: what both tokenizers share (errors, strings, numbers)
//   parser.cpp      the streaming tokenizer: text -> CanonicalWriter events
//   tape.cpp        the tape's tokenizer (pass 1): padded text -> tokens
//   tape_tokens.cpp the tape's out-of-line token readers (escaped strings, numbers, shapes)
//   tape_order.cpp  the tape's objects: member order, duplicates
//   tape_write.cpp  the tape's pass 2: tokens -> canonical text
//   dispatch.cpp    which text takes which path (jcs.hpp's table), the entry points
#pragma once

#include "error.hpp"
#include "jcs.hpp"

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#if defined(__GNUC__)
#define IDEM_INLINE inline __attribute__((always_inline))
#define IDEM_NOINLINE __attribute__((noinline))
#else
#define IDEM_INLINE inline
#define IDEM_NOINLINE
#endif

namespace idem::jcs::detail {

constexpr const char *kMalformed = sqlstate::invalid_text_representation; // 22P02
constexpr const char *kBadUtf8 = sqlstate::character_not_in_repertoire;   // 22021

// ---------------------------------------------------------------------------------------------
// UTF-8 and escaping (utf8.cpp)

// Length of the well-formed UTF-8 sequence (2..4 bytes) starting at s[0] >= 0x80, or 0 if the
// bytes are not well-formed (overlong forms, surrogates, > U+10FFFF, truncated).
inline size_t utf8_seq_len(const unsigned char *s, size_t avail) noexcept {
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
size_t find_bad_utf8(std::string_view s) noexcept;
// Throws 22021 for the invalid sequence at s[at]; where: what s is, for the detail.
[[noreturn]] void bad_utf8(std::string_view s, size_t at, const char *where = "the JSON text");
// Throws 22021 if s (a string of the writer's events) is not well-formed UTF-8.
void check_utf8(std::string_view s);
// Throws 22021 for the first invalid sequence of a JSON text, if it has one: what a text
// that failed to parse answers when it is not UTF-8 (dispatch.cpp).
void check_text_utf8(std::string_view text);

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
inline constexpr EscapeTable kEscape;

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

// Writes the escape sequence of byte c (one that kEscape marks) at o; returns the end.
char *write_escape(char *o, unsigned char c) noexcept;
// Appends the JCS (ECMAScript JSON.stringify) quoted form of UTF-8 s; returns its length.
size_t append_quoted(Buffer &out, std::string_view s);
// The quoted form as a std::string (for messages).
std::string quoted_string(std::string_view s);
// Appends code point cp (< 0x110000, no surrogate) as UTF-8.
void append_utf8(std::string &out, unsigned cp);

// ---------------------------------------------------------------------------------------------
// Errors both tokenizers and the writer raise (reader.cpp)

[[noreturn]] void too_deep(unsigned max_depth);          // 54001
[[noreturn]] void duplicate_name(std::string_view name); // 22P02

// ---------------------------------------------------------------------------------------------
// Token bytes

inline bool json_ws(unsigned char c) noexcept {
    return c == ' ' || c == '\n' || c == '\r' || c == '\t';
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
inline constexpr NumberCharTable kNumberChar;
inline bool number_char(unsigned char c) noexcept {
    return kNumberChar.t[c];
}

// ---------------------------------------------------------------------------------------------
// Reader (reader.cpp): the text being read, and what both tokenizers do alike: errors that
// name a byte offset, strings with escapes, number tokens, the errors of the grammar.

class Reader {
  public:
    explicit Reader(std::string_view text)
        : p_(reinterpret_cast<const unsigned char *>(text.data())), b_(p_), e_(p_ + text.size()) {}

    // 22P02 naming the byte at p_ (fail) or at (fail_at).
    [[noreturn]] void fail(const char *msg, const char *hint = nullptr) const;
    [[noreturn]] void fail_at(const unsigned char *at, const char *msg, const char *hint = nullptr);
    // The errors for the byte at `at` where a value must start (none can), where a member name
    // must start, where a ':' must follow a name, and after a member or element of the
    // innermost open object (object) or array (!object).
    [[noreturn]] void bad_value(const unsigned char *at);
    [[noreturn]] void bad_name(const unsigned char *at);
    [[noreturn]] void bad_colon(const unsigned char *at);
    [[noreturn]] void bad_after(const unsigned char *at, bool object);
    // The text after the top-level value, at `at`: fails unless it is the end.
    void expect_end(const unsigned char *at);

    // Reads the string token at p_ (its opening quote; p_ moves past the closing one) and
    // returns its unescaped bytes: a view of the text when the token has no escapes, else of a
    // buffer that the next call reuses.
    std::string_view string();
    // Reads the number token at s (a '-' or a digit; p_ moves past it) and returns its text.
    // NaN and Infinity fail; other malformed numbers are left to write_number.
    std::string_view number_token(const unsigned char *s);
    // Calls write(), which writes the number token at s: its 22P02 becomes this text's
    // "invalid JSON number" at s.
    template <class Write> void number_at(const unsigned char *s, Write &&write) {
        try {
            write();
        } catch (const Error &err) {
            if (std::strcmp(err.sqlstate(), kMalformed) != 0)
                throw;
            fail_at(s, "invalid JSON number");
        }
    }

    const unsigned char *p_; // the read position
    const unsigned char *const b_;
    const unsigned char *const e_;

  private:
    unsigned hex4();
    void escape(std::string &out);
    unsigned low_surrogate(unsigned high);
    std::string sbuf_;
};

// The streaming tokenizer (parser.cpp): parses text strictly into w's events (the caller has
// reset w).
void parse_streaming(std::string_view text, CanonicalWriter &w);

// ---------------------------------------------------------------------------------------------
// Pod (buffer.cpp): a growable array of trivially copyable T (no value-initialisation,
// appends inline).

// Grows the array [*b, *b + size) of capacity cap elements of `elem` bytes for n more;
// returns the new capacity.
size_t pod_grow(void **b, size_t size, size_t cap, size_t n, size_t elem);

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
        const size_t size = this->size();
        void *b = b_;
        const size_t cap = pod_grow(&b, size, capacity(), n, sizeof(T));
        b_ = static_cast<T *>(b);
        e_ = b_ + size;
        c_ = b_ + cap;
    }
};

// ---------------------------------------------------------------------------------------------
// The tape (tape*.cpp): the two-pass canonicaliser of unfiltered texts, kept by the writer for
// reuse. Pass 1 (tape.cpp) reads the padded text into tokens whose canonical bytes are spans
// of the text or of `side`, and at each '}' records the object's member order (tape_order.cpp);
// pass 2 (tape_write.cpp) writes every token once, members in that order.

struct TapeState {
    // Shaped: an object in an array that matched the recorded shape whole (see
    // TapeLexer::shape); off: its members' value spans in vals, in text order; len: its ShapeRec.
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

    // Frees the buffers grown past what is kept for reuse; true if it freed any (buffer.cpp).
    bool shrink() noexcept;
    // Empties every buffer, keeping its capacity (CanonicalWriter::reset shrinks first).
    void clear() noexcept;
    // Copies text into `in`, followed by kPad zero bytes; returns the copy.
    std::string_view pad(std::string_view text);
};

using Tok = TapeState::Tok;

// Pass 1 (tape.cpp): r's text (padded: TapeState::in) into t's tokens, orders, side bytes.
void tape_pass1(Reader &r, TapeState &t, const Options &o);

// Grows the tape or polls the interrupt callback (every 4096 tokens); returns the new write
// position (tokens are written at tk until tk == t.stop). (tape.cpp)
Tok *tape_room(TapeState &t, Tok *tk, const Options &o);

// The out-of-line token readers of pass 1 (tape_tokens.cpp); see there.
const unsigned char *string_value(TapeState &t, Tok *k, const unsigned char *q,
                                  const unsigned char *b, const unsigned char *e);
const unsigned char *string_slow(Reader &r, TapeState &t, Tok *k, const unsigned char *q,
                                 std::string_view *value);
const unsigned char *number_slow(Reader &r, TapeState &t, Tok *k, const unsigned char *s,
                                 bool exact);
Tok *shape_tokens(TapeState &t, Tok *tk, const uint32_t *noff, size_t j, const Options &o);
void record_shape(TapeState &t);

// Closes the object whose token is ot and whose member names start at names[first]: sorts
// them (22P02 for duplicates) and appends their tokens to order; end: the next token;
// in_array: the object is an array element (its shape is worth recording). (tape_order.cpp)
void close_object(TapeState &t, const unsigned char *text, uint32_t ot, uint32_t first,
                  uint32_t end, bool in_array);

// Where pass 2 hands the canonical text to SHA-256 while writing: whenever the text written
// from o0 passes `at`, its whole 64-byte blocks not yet hashed (from o0 + hashed) go to sha.
struct HashFeed {
    static constexpr size_t kRun = 128; // bytes between hand-overs (measured against 64 and 256)
    Sha256 *sha = nullptr;              // null: no hashing
    const char *o0 = nullptr;
    size_t hashed = 0;
    const char *at = reinterpret_cast<const char *>(UINTPTR_MAX);
};

// Pass 2 (tape_write.cpp): writes the canonical text of t (text: the padded text) at o (room
// for the text, side, 2 bytes per token and 64 more); returns the end.
char *write_tape(TapeState &t, const char *text, char *o, HashFeed &hash);

} // namespace idem::jcs::detail
