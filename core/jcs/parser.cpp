// The streaming tokenizer: raw JSON text, strictly (RFC 8259 grammar, I-JSON), into the
// CanonicalWriter's events. It takes texts with include/exclude filters and texts too big for
// the tape (dispatch.cpp); it reads the text in place, with bounds checks.
#include "internal.hpp"

namespace idem::jcs {

namespace {

using detail::Reader;

class StreamParser : Reader {
  public:
    StreamParser(std::string_view text, CanonicalWriter &w) : Reader(text), w_(w) {}
    void run();

  private:
    enum Next { kValue, kKey, kAfter, kDone };
    void ws() {
        while (p_ < e_ && detail::json_ws(*p_))
            p_++;
    }
    Next value();
    Next open(bool object);
    Next key();
    Next after();
    void literal(const char *word, size_t len);

    CanonicalWriter &w_;
    std::string stack_; // 'o' / 'a' per open container
};

void StreamParser::run() {
    stack_.clear();
    Next next = kValue;
    while (next != kDone) {
        ws();
        switch (next) {
        case kValue:
            next = value();
            break;
        case kKey:
            next = key();
            break;
        default:
            next = after();
        }
    }
}

// A value at p_ (after whitespace).
StreamParser::Next StreamParser::value() {
    switch (p_ < e_ ? *p_ : 0) {
    case '{':
        return open(true);
    case '[':
        return open(false);
    case '"':
        w_.string(string());
        return kAfter;
    case 't':
        literal("true", 4);
        w_.boolean(true);
        return kAfter;
    case 'f':
        literal("false", 5);
        w_.boolean(false);
        return kAfter;
    case 'n':
        literal("null", 4);
        w_.null();
        return kAfter;
    default:
        if (p_ >= e_ || (*p_ != '-' && !detail::is_digit(*p_)))
            bad_value(p_);
        const unsigned char *s = p_;
        const std::string_view text = number_token(s);
        number_at(s, [&] { w_.number(text); });
        return kAfter;
    }
}

// The '{' or '[' at p_.
StreamParser::Next StreamParser::open(bool object) {
    p_++;
    object ? w_.begin_object() : w_.begin_array();
    ws();
    if (p_ < e_ && *p_ == (object ? '}' : ']')) {
        p_++;
        object ? w_.end_object() : w_.end_array();
        return kAfter;
    }
    stack_.push_back(object ? 'o' : 'a');
    return object ? kKey : kValue;
}

// A member name at p_ (after whitespace), and the ':' after it.
StreamParser::Next StreamParser::key() {
    if (p_ >= e_ || *p_ != '"')
        bad_name(p_);
    w_.key(string());
    ws();
    if (p_ >= e_ || *p_ != ':')
        bad_colon(p_);
    p_++;
    return kValue;
}

// After a value (and whitespace): a ',', the innermost container's end, or the text's.
StreamParser::Next StreamParser::after() {
    if (stack_.empty()) {
        expect_end(p_);
        return kDone;
    }
    const bool object = stack_.back() == 'o';
    const unsigned char c = p_ < e_ ? *p_ : 0;
    if (p_ >= e_ || (c != ',' && c != (object ? '}' : ']')))
        bad_after(p_, object);
    p_++;
    if (c == ',')
        return object ? kKey : kValue;
    stack_.pop_back();
    object ? w_.end_object() : w_.end_array();
    return kAfter;
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
