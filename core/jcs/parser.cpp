// The streaming tokenizer: raw JSON text, strictly (RFC 8259 grammar, I-JSON), into the
// CanonicalWriter's events. It takes texts with include/exclude filters and texts too big for
// the tape (dispatch.cpp); it reads the text in place, with bounds checks.
#include "internal.hpp"

#include "cpp_only.hpp" // last include: core/ never sees postgres.h

namespace idem::jcs {

namespace {

using detail::Reader;

class StreamParser : Reader {
  public:
    StreamParser(std::string_view text, CanonicalWriter &w) : Reader(text), w_(w) {}
    void run();

  private:
    void ws() {
        while (p_ < e_ && detail::json_ws(*p_))
            p_++;
    }
    bool value();
    bool open(bool object);
    void key();
    bool next();
    void literal(const char *word, size_t len);

    CanonicalWriter &w_;
    std::string stack_; // 'o' / 'a' per open container
};

// Values, each followed by what closes containers and separates members and elements.
void StreamParser::run() {
    stack_.clear();
    do {
        ws();
        while (value()) // (a container opened: its first member or element follows)
            ws();
    } while (next());
}

// A value at p_ (after whitespace): a scalar, an empty container, or the start of a container
// (then true; of an object, its first member's name has been read).
bool StreamParser::value() {
    switch (p_ < e_ ? *p_ : 0) {
    case '{':
        return open(true);
    case '[':
        return open(false);
    case '"':
        w_.string(string());
        return false;
    case 't':
        literal("true", 4);
        w_.boolean(true);
        return false;
    case 'f':
        literal("false", 5);
        w_.boolean(false);
        return false;
    case 'n':
        literal("null", 4);
        w_.null();
        return false;
    default:
        if (p_ >= e_ || (*p_ != '-' && !detail::is_digit(*p_)))
            bad_value(p_);
        const unsigned char *s = p_;
        const std::string_view text = number_token(s);
        number_at(s, [&] { w_.number(text); });
        return false;
    }
}

// The '{' or '[' at p_: false when the container is empty (and closed).
bool StreamParser::open(bool object) {
    p_++;
    object ? w_.begin_object() : w_.begin_array();
    ws();
    if (p_ < e_ && *p_ == (object ? '}' : ']')) {
        p_++;
        object ? w_.end_object() : w_.end_array();
        return false;
    }
    stack_.push_back(object ? 'o' : 'a');
    if (object)
        key();
    return true;
}

// A member name at p_ (after whitespace), and the ':' after it.
void StreamParser::key() {
    if (p_ >= e_ || *p_ != '"')
        bad_name(p_);
    w_.key(string());
    ws();
    if (p_ >= e_ || *p_ != ':')
        bad_colon(p_);
    p_++;
}

// After a value: the ends of containers up to a ',' (true: a value follows, after the name
// when in an object) or to the end of the text (false).
bool StreamParser::next() {
    for (;;) {
        ws();
        if (stack_.empty()) {
            expect_end(p_);
            return false;
        }
        const bool object = stack_.back() == 'o';
        const unsigned char c = p_ < e_ ? *p_ : 0;
        if (p_ >= e_ || (c != ',' && c != (object ? '}' : ']')))
            bad_after(p_, object);
        p_++;
        if (c == ',') {
            ws();
            if (object)
                key();
            return true;
        }
        stack_.pop_back();
        object ? w_.end_object() : w_.end_array();
    }
}

void StreamParser::literal(const char *word, size_t len) {
    if (static_cast<size_t>(e_ - p_) < len || std::memcmp(p_, word, len) != 0)
        fail("invalid JSON literal");
    p_ += len;
}

} // namespace

namespace detail {

void parse_streaming(std::string_view text, CanonicalWriter &w) {
    StreamParser(text, w).run();
}

} // namespace detail

} // namespace idem::jcs
