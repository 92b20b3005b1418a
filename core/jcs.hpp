// RFC 8785 JSON Canonicalization Scheme (JCS): a streaming canonical writer, a strict I-JSON
// (RFC 7493) parser for raw JSON text, ECMAScript number formatting, an exact-number mode and
// include/exclude path filters. Server-independent (never includes postgres.h). The code is in
// core/jcs/ (internal.hpp says which file does what).
//
// Which input takes which path (all give the same bytes and the same errors; the SQL callers
// are in src/fingerprints.cpp and src/fingerprints_fast.cpp):
// | input                                          | path                                        |
// |------------------------------------------------|---------------------------------------------|
// | raw text, no include/exclude, up to 16 MiB     | the tape: pass 1 tokenises (jcs/tape.cpp,   |
// | (idem_fingerprint(text), idem_canonical_json(  | tape_order.cpp), pass 2 writes in order     |
// | text); parse_into, fingerprint_into, *_text)   | (tape_write.cpp), hashing as it goes        |
// | raw text with include/exclude, or over 16 MiB  | the streaming tokenizer (jcs/parser.cpp)    |
// |                                                | feeding the events below                    |
// | events: begin_object, key, string, ... (jsonb  | CanonicalWriter: objects reordered as they  |
// | with filters, or in a non-UTF8 database)       | close, filters applied (jcs/writer.cpp)     |
// | jsonb, no filters, UTF8 database               | none of these: src/ walks the jsonb and     |
// |                                                | calls write_quoted, write_decimal, ...      |
// The two tokenizers share their errors, strings and numbers (jcs/reader.cpp). The tape stays
// because in SQL it is much faster than the streaming tokenizer (bench/fingerprint.sh's
// queries, 110 B to 15 KiB rows: idem_fingerprint(j::text) takes 1.2-1.9x as long through the
// streaming one, idem_fingerprint of a stored text 1.2-3.4x); the streaming one stays for
// filters and for texts whose tape would be too big.
//
// Limits: nesting deeper than Options::max_depth (default 10000, more than PostgreSQL's jsonb
// parser accepts with the default max_stack_depth) raises SQLSTATE 54001. Nothing recurses: the
// parser and the writer keep explicit stacks, so depth never threatens the C stack.
#pragma once

#include "crypto.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace idem::jcs {

// A path as the #> operator takes it: object member names, or array indices written in decimal.
using Path = std::vector<std::string>;

struct Options {
    // false: RFC 8785 exactly (numbers are IEEE-754 doubles printed as ECMAScript does).
    // true: exact-number mode: the decimal value is kept exactly (distinct values give distinct
    // text), printed with ECMAScript's layout rules and all significant digits.
    bool exact_numbers = false;
    // Nesting deeper than this raises 54001.
    unsigned max_depth = 10000;
    // Polled every few thousand tokens; returning true makes the work throw idem::Interrupted.
    bool (*interrupted)() = nullptr;
    // Members/elements at these paths are removed before canonicalisation.
    std::vector<Path> exclude;
    // When non-empty, only these paths (and their ancestors) are kept. An empty list means "no
    // include filter" (never "keep nothing").
    std::vector<Path> include;
};

namespace detail {

// A growable byte buffer whose appends inline (std::string's do not); capacity is kept by clear().
class Buffer {
  public:
    Buffer() = default;
    ~Buffer() { std::free(data_); }
    Buffer(const Buffer &) = delete;
    Buffer &operator=(const Buffer &) = delete;

    size_t size() const noexcept { return size_; }
    size_t capacity() const noexcept { return cap_; }
    const char *data() const noexcept { return data_; }
    char *data() noexcept { return data_; }
    std::string_view view() const noexcept { return std::string_view(data_, size_); }
    void clear() noexcept { size_ = 0; }
    // Frees the memory.
    void release() noexcept {
        std::free(data_);
        data_ = nullptr;
        size_ = cap_ = 0;
    }
    // Room for n more bytes; returns the write position (the size is unchanged).
    char *room(size_t n) {
        if (cap_ - size_ < n)
            grow(n);
        return data_ + size_;
    }
    // Sets the size after writing at room() (or shrinks).
    void set_end(const char *end) noexcept { size_ = static_cast<size_t>(end - data_); }
    void resize_down(size_t n) noexcept { size_ = n; }
    void swap(Buffer &o) noexcept {
        std::swap(data_, o.data_);
        std::swap(size_, o.size_);
        std::swap(cap_, o.cap_);
    }
    void push_back(char c) {
        *room(1) = c;
        size_++;
    }
    void append(const char *s, size_t n) {
        std::memcpy(room(n), s, n);
        size_ += n;
    }

  private:
    void grow(size_t n);
    char *data_ = nullptr;
    size_t size_ = 0;
    size_t cap_ = 0;
};

// Reusable state of the two-pass text canonicaliser (jcs/internal.hpp).
struct TapeState;

} // namespace detail

// Builds canonical JSON from a stream of events. Object members are buffered and sorted by
// their names' UTF-16 code units at end_object; duplicate names raise 22P02. Strings must be
// UTF-8: the writer checks them only when set_validate_utf8(true) (the parser always does).
// Reusable: reset() keeps the buffers' capacity.
class CanonicalWriter {
  public:
    explicit CanonicalWriter(Options opts = {});
    ~CanonicalWriter();
    CanonicalWriter(const CanonicalWriter &) = delete;
    CanonicalWriter &operator=(const CanonicalWriter &) = delete;

    // Starts a new document with new options (buffers are kept).
    void reset(Options opts);
    // Starts a new document with the current options.
    void reset();
    const Options &options() const noexcept { return opts_; }
    // When true, string() and key() check that their bytes are well-formed UTF-8 (22021).
    void set_validate_utf8(bool v) noexcept { validate_utf8_ = v; }

    void begin_object();
    void key(std::string_view name); // unescaped UTF-8
    void end_object();
    void begin_array();
    void end_array();
    void string(std::string_view value); // unescaped UTF-8
    // A JSON number in RFC 8259 syntax (e.g. numeric_out's text); 22P02 if malformed,
    // 22003 if it overflows a double in strict mode.
    void number(std::string_view text);
    void boolean(bool value);
    void null();

    // Frees the buffers that the last document grew past what is kept for reuse (over 1 MiB;
    // reset() does the same when the next document starts). Returns true if it freed any; the
    // document is then gone (result() throws).
    bool shrink() noexcept;

    // True once a complete top-level value has been written.
    bool done() const noexcept { return done_; }
    // The canonical UTF-8 text; valid until the next reset. Throws if the document is incomplete.
    std::string_view result() const;
    // SHA-256 of result() (bytes already hashed by fingerprint_into are not hashed again).
    Digest digest();

  private:
    friend void parse_into(std::string_view text, CanonicalWriter &w);
    friend Digest fingerprint_into(std::string_view text, CanonicalWriter &w);
    struct Frame;
    struct Member;
    // parse_into without filters: a tape of tokens, then one ordered write of out_ (hash:
    // feeding what is written to sha_ as it goes).
    void parse_tape(std::string_view text, bool hash);
    void fresh_sha(); // sha_, ready for a new digest
    void parse(std::string_view text, bool hash);
    void order_members(const Frame &f);
    void before_value();
    void child_filter(const Frame &parent, std::string_view name, int64_t index);
    void child_done(bool kept, size_t start);
    void push_frame(bool object);
    void tick();
    void write_string(std::string_view s);
    [[noreturn]] void misuse(const char *what) const;

    Options opts_;
    bool validate_utf8_ = false;
    bool done_ = false;
    bool filtering_ = false;
    bool expect_key_ = false;
    unsigned ticks_ = 0;
    detail::Buffer out_;
    std::string keys_;       // unescaped member names of the open objects (when not in out_)
    detail::Buffer scratch_; // used when members are reordered
    std::vector<Member> members_;
    std::vector<Frame> frames_; // frames_[0..depth_) are live; kept for their capacity
    size_t depth_ = 0;
    // Filter state of the value about to be written (computed in key()/before_value()).
    std::vector<uint32_t> pend_ex_, pend_in_;
    bool pend_drop_ = false;
    bool pend_partial_ = false;
    size_t pend_start_ = 0;
    // Array indices parsed from the paths (-1 when the element is not an index).
    std::vector<std::vector<int64_t>> ex_idx_, in_idx_;
    std::unique_ptr<detail::TapeState> tape_; // created by the first parse_tape
    std::unique_ptr<Sha256> sha_;             // created by the first digest or fingerprint_into
    bool hashing_ = false;                    // sha_ holds the digest of out_[0, hashed_) so far
    bool sha_fresh_ = false;                  // sha_ has been fed nothing since its last reset
    size_t hashed_ = 0;
    // False when no buffer can have grown past what shrink() keeps since it last ran (after a
    // text of at most 4 KiB through the tape): reset() then need not look.
    bool may_have_grown_ = true;
};

// Parses raw JSON text strictly (RFC 8259 grammar, I-JSON: no duplicate member names after
// unescaping, no lone surrogates, well-formed UTF-8, no NaN/Infinity, numbers within double
// range in strict mode) and feeds it to w. w is reset with its current options first. A text
// that is not well-formed UTF-8 is 22021 naming its first invalid sequence, wherever it is and
// whatever else is wrong with the text (a grammar error before it, a number out of range, the
// depth limit).
void parse_into(std::string_view text, CanonicalWriter &w);

// The canonical form of raw JSON text.
std::string canonicalize_text(std::string_view text, const Options &opts = {});

// SHA-256 of the canonical form of raw JSON text.
Digest fingerprint_text(std::string_view text, const Options &opts = {});

// parse_into, then w.digest(), with the hashing done while the canonical text is written: for
// unfiltered texts of 512 bytes or more (through the tape), each finished 128 bytes or so go to
// SHA-256 at once, so that the CPU overlaps the (latency-bound) SHA-256 rounds with the
// writing. The digest is started (its context reset) before the text is parsed. Same result
// and errors as parse_into then digest().
Digest fingerprint_into(std::string_view text, CanonicalWriter &w);

// ECMAScript Number.prototype.toString of a finite double (RFC 8785 §3.2.2.3); -0 gives "0".
// Appends to out.
void format_double(double v, std::string &out);
// The same, written at out (room for 40 bytes); returns the end.
char *write_double(double v, char *out);

// Appends the canonical number for JSON number text (strict or exact mode) to out.
void format_number(std::string_view text, bool exact, std::string &out);

// Room that write_number needs for number text of n bytes.
constexpr size_t number_bound(size_t n) noexcept {
    return n + 40;
}
// The canonical number for JSON number text, written at out (room for
// number_bound(text.size()) bytes); returns the end. Throws like format_number.
char *write_number(std::string_view text, bool exact, char *out);

// Writes the ECMAScript layout of the decimal 0.d * 10^point (d = the k >= 1 significant digits,
// no leading or trailing zeros; |point| < 10^12) at out (room for k + 40 bytes); returns the end.
// This is the canonical form in exact mode, and in strict mode when k <= 15 and
// -306 <= point <= 308 (see format_number).
char *write_decimal(char *out, bool negative, const char *digits, size_t k, int64_t point) noexcept;

// Room that write_quoted needs for a string of n bytes.
constexpr size_t quoted_bound(size_t n) noexcept {
    return 6 * n + 2;
}
// Writes UTF-8 s[0..n) escaped as inside a JCS (ECMAScript JSON.stringify) string, without the
// quotes, at out (room for 6 * n bytes); returns the end. The bytes are not validated.
char *write_escaped(char *out, const char *s, size_t n) noexcept;
// The same with the quotes (room for quoted_bound(n) bytes).
inline char *write_quoted(char *out, const char *s, size_t n) noexcept {
    *out++ = '"';
    out = write_escaped(out, s, n);
    *out++ = '"';
    return out;
}

// Three-way comparison of two UTF-8 strings by their UTF-16 code units (RFC 8785 §3.2.3).
inline int compare_utf16(std::string_view a, std::string_view b) noexcept {
    size_t n = a.size() < b.size() ? a.size() : b.size();
    const auto *x = reinterpret_cast<const unsigned char *>(a.data());
    const auto *y = reinterpret_cast<const unsigned char *>(b.data());
    size_t i = 0;
    while (i < n && x[i] == y[i])
        i++;
    if (i == n)
        return a.size() < b.size() ? -1 : (a.size() > b.size() ? 1 : 0);
    unsigned cx = x[i], cy = y[i];
    // UTF-8 byte order is code point order; UTF-16 puts U+E000..U+FFFF (lead bytes EE, EF)
    // after the supplementary planes (lead bytes F0..F4, surrogate pairs D800..DFFF).
    if (cx >= 0xEE && cy >= 0xEE) {
        if (cx == 0xEE || cx == 0xEF)
            cx += 0x10;
        if (cy == 0xEE || cy == 0xEF)
            cy += 0x10;
    }
    return cx < cy ? -1 : 1;
}

} // namespace idem::jcs
