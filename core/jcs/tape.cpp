// The tape's tokenizer (pass 1): the padded text (TapeState::in) into tokens whose canonical
// bytes are spans of the text or of side; at each '}' the object's member order is recorded
// (tape_order.cpp). Only errors look at the end of the text: the zero bytes after it end every
// token. Objects in arrays that repeat the last object's shape are matched whole (shape()).
#include "internal.hpp"

#include "cpp_only.hpp" // last include: core/ never sees postgres.h

namespace idem::jcs::detail {

IDEM_NOINLINE Tok *tape_room(TapeState &t, Tok *tk, const Options &o) {
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

namespace {

// Sets up the first tape_room: at once when the buffers kept from the last document have
// room for what tape_room would have made sure of.
void tape_start(TapeState &t, const Options &o) {
    t.next_poll = 4096;
    const size_t cap = t.toks.capacity();
    if (cap >= 64 && t.names.capacity() >= cap && t.opens.capacity() >= cap &&
        t.order.capacity() >= cap)
        t.stop = cap > 4096 ? t.toks.b_ + 4096 : t.toks.c_;
    else
        tape_room(t, t.toks.b_, o);
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

// The closing quote of the string token whose opening quote is at q, when the string holds
// only printable ASCII without '\\' (the common case: its canonical form is its text); else
// nullptr. The text is padded (TapeState::in): 16 bytes may be read past its end.
inline const unsigned char *plain_string_end(const unsigned char *q,
                                             const unsigned char *e) noexcept {
    const unsigned char *s = q + 1;
#ifdef __SSE2__
    const __m128i quote = _mm_set1_epi8('"');
    const __m128i bslash = _mm_set1_epi8('\\');
    const __m128i space = _mm_set1_epi8(0x20);
    for (;;) {
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

// Pass 1 over one text. The members are the parse state; each state is a function (all
// inlined into run(), where the state stays in registers) that returns the next state.
class TapeLexer {
  public:
    TapeLexer(Reader &r, TapeState &t, const Options &o, uint32_t *noff)
        : r_(r), t_(t), o_(o), p_(r.p_), b_(r.b_), e_(r.e_), tk_(t.toks.b_), stop_(t.stop),
          noff_(noff) {}
    IDEM_INLINE void run();

  private:
    using T = TapeState;
    enum Next { kValue, kKey, kShape, kScalar, kAfter, kDone };
    // A new token (at t_.stop: tape_room grows the tape or polls).
    IDEM_INLINE Tok *token(uint32_t kind) {
        if (tk_ == stop_) {
            tk_ = tape_room(t_, tk_, o_);
            stop_ = t_.stop;
        }
        Tok *const k = tk_++;
        k->kind = kind;
        return k;
    }
    IDEM_INLINE void ws() {
        while (*p_ <= ' ' && json_ws(*p_))
            p_++;
    }
    IDEM_INLINE uint32_t offset(const unsigned char *q) const {
        return static_cast<uint32_t>(q - b_);
    }
    IDEM_INLINE uint32_t index(const Tok *k) const { return static_cast<uint32_t>(k - t_.toks.b_); }
    IDEM_INLINE Next step(Next next);
    IDEM_INLINE Next value();
    IDEM_INLINE Next string();
    IDEM_INLINE Next open(bool object);
    IDEM_INLINE Next literal();
    IDEM_INLINE Next number();
    IDEM_INLINE Next key();
    IDEM_INLINE bool predicted_name(Tok *k, T::Name *nm);
    IDEM_INLINE void name(Tok *k, T::Name *nm);
    IDEM_INLINE Next colon();
    IDEM_INLINE Next shape();
    IDEM_INLINE bool shape_value(const unsigned char *q);
    IDEM_INLINE Next shape_close();
    IDEM_INLINE Next shape_miss();
    IDEM_INLINE Next scalar();
    IDEM_INLINE Next after();
    IDEM_INLINE Next close(T::Open op, unsigned char c);
    // The tokens of the first j members that matched the shape (see shape_tokens).
    IDEM_INLINE void shape_flush(size_t j) {
        tk_ = shape_tokens(t_, tk_, noff_, j, o_);
        stop_ = t_.stop;
    }

    Reader &r_;
    TapeState &t_;
    const Options &o_;
    const unsigned char *p_;
    const unsigned char *const b_;
    const unsigned char *const e_;
    Tok *tk_;   // where the next token goes
    Tok *stop_; // (t_.stop)
    // The value to parse is an object member's (else an array element's or the root).
    bool member_ = false;
    size_t cur_ = 0;        // the names of the innermost open object start at names[cur_]
    size_t sj_ = 0;         // (shape) the members of an object in an array that matched,
    T::Span *sv_ = nullptr; // their value spans (in vals)
    uint32_t *const noff_;  // and the text offsets of their names (kShapeMax of them)
};

void TapeLexer::run() {
    for (Next next = kValue; next != kDone;)
        next = step(next);
    t_.toks.e_ = tk_;
}

// The state `next` (kDone excluded).
TapeLexer::Next TapeLexer::step(Next next) {
    switch (next) {
    case kValue:
        return value();
    case kKey:
        return key();
#ifdef __SSE2__
    case kShape:
        return shape();
#endif
    case kScalar:
        return scalar();
    default:
        return after();
    }
}

// A value at p_.
TapeLexer::Next TapeLexer::value() {
    switch (*p_) {
    case ' ':
    case '\n':
    case '\r':
    case '\t':
        p_++;
        ws();
        return kValue;
    case '"':
        return string();
    case '{':
        return open(true);
    case '[':
        return open(false);
    case 't':
    case 'f':
    case 'n':
        return literal();
    default:
        if (*p_ == '-' || is_digit(*p_))
            return number();
        r_.bad_value(p_);
    }
}

// A string value at p_.
TapeLexer::Next TapeLexer::string() {
    Tok *k = token(T::InText);
    const unsigned char *q = p_;
    if (const unsigned char *c = plain_string_end(q, e_)) {
        p_ = c + 1;
        k->off = offset(q);
        k->len = static_cast<uint32_t>(p_ - q);
    } else if (const unsigned char *c2 = string_value(t_, k, q, b_, e_)) {
        p_ = c2;
    } else {
        std::string_view unused;
        p_ = string_slow(r_, t_, k, q, &unused);
    }
    return kScalar;
}

// The '{' or '[' at p_.
TapeLexer::Next TapeLexer::open(bool object) {
    Tok *k = token(object ? T::Object : T::Array);
    if (t_.opens.size() >= o_.max_depth)
        too_deep(o_.max_depth);
    const uint32_t idx = index(k);
    p_++;
    if (!object || (*p_ != '}' && *p_ != '"'))
        ws();
    if (*p_ == (object ? '}' : ']')) {
        p_++;
        k->off = 0;
        k->len = 0;
        k->end = idx + 1;
        return kAfter;
    }
    if (!object) {
        *t_.opens.e_++ = {idx, T::kNotObject}; // (room: see tape_room)
        member_ = false;
        return kValue;
    }
    cur_ = t_.names.size();
    *t_.opens.e_++ = {idx, static_cast<uint32_t>(cur_)};
#ifdef __SSE2__
    if (!member_ && t_.chunk_n != 0 && t_.opens.size() >= 2) { // (an element of an array)
        sj_ = 0;
        t_.vals.reserve_more(T::kShapeMax);
        sv_ = t_.vals.e_;
        return kShape;
    }
#endif
    return kKey;
}

// true, false or null at p_.
TapeLexer::Next TapeLexer::literal() {
    Tok *k = token(T::InText);
    // (4-byte compares: the padded text has zero bytes past its end, which match none)
    const size_t len = *p_ == 'f' ? 5 : 4;
    const char *const word = *p_ == 't' ? "true" : *p_ == 'f' ? "alse" : "null";
    uint32_t got, want;
    std::memcpy(&got, p_ + len - 4, 4);
    std::memcpy(&want, word, 4);
    if (got != want)
        r_.fail_at(p_, "invalid JSON literal");
    k->off = offset(p_);
    k->len = static_cast<uint32_t>(len);
    p_ += len;
    return kAfter;
}

// A number at p_ (a '-' or a digit).
TapeLexer::Next TapeLexer::number() {
    Tok *k = token(T::InText);
    const unsigned char *end;
    size_t len;
    if (const unsigned char *span = number_span(p_, &end, &len)) {
        p_ = end;
        k->off = offset(span);
        k->len = static_cast<uint32_t>(len);
    } else {
        p_ = number_slow(r_, t_, k, p_, o_.exact_numbers);
    }
    return kScalar;
}

// A member name at p_ (or whitespace before it).
TapeLexer::Next TapeLexer::key() {
    if (*p_ != '"') {
        ws();
        if (*p_ != '"')
            r_.bad_name(p_);
    }
    Tok *k = token(T::InText);
    T::Name *nm = t_.names.e_++; // (room: see tape_room)
#ifdef __SSE2__
    if (predicted_name(k, nm))
        return kValue;
#endif
    name(k, nm);
    return colon();
}

#ifdef __SSE2__
// The j-th member of the last recorded shape: when the text at p_ starts with the same bytes
// as its name and what followed up to its value, it parses the same way (p_ moves to the value).
bool TapeLexer::predicted_name(Tok *k, T::Name *nm) {
    const size_t j = static_cast<size_t>(nm - t_.names.b_) - cur_;
    if (j >= t_.chunk_n)
        return false;
    const unsigned cl = t_.shape_clen[j];
    const unsigned want = (1u << cl) - 1;
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i *>(p_));
    const __m128i y = _mm_load_si128(reinterpret_cast<const __m128i *>(t_.shape_chunk[j]));
    const unsigned m = static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(x, y)));
    if ((m & want) != want || cl == 0)
        return false;
    k->off = offset(p_);
    k->len = t_.shape_nlen[j];
    nm->key = t_.shape_keys[j];
    nm->ref = index(k);
    p_ += cl;
    member_ = true;
    return true;
}
#endif

// The member name token at p_ and its key.
void TapeLexer::name(Tok *k, T::Name *nm) {
    const unsigned char *q = p_;
    const char *const limit = reinterpret_cast<const char *>(e_ + T::kPad);
    nm->ref = index(k);
    if (const unsigned char *c = plain_string_end(q, e_)) {
        p_ = c + 1;
        k->off = offset(q);
        k->len = static_cast<uint32_t>(p_ - q);
        nm->key = name_key(reinterpret_cast<const char *>(q) + 1, c - q - 1, limit);
        return;
    }
    std::string_view v;
    p_ = string_slow(r_, t_, k, q, &v);
    if (v.data() == nullptr) { // (no escapes: the name is in the text)
        nm->key = name_key(reinterpret_cast<const char *>(q) + 1, p_ - q - 2, limit);
        return;
    }
    // Escaped: the unescaped name goes to side, for the full comparisons.
    nm->key = name_key(v.data(), v.size(), v.data() + v.size());
    const uint32_t len = static_cast<uint32_t>(v.size());
    nm->ref |= static_cast<uint64_t>(t_.side.size()) << 32; // (never 0)
    t_.side.append(reinterpret_cast<const char *>(&len), 4);
    t_.side.append(v.data(), v.size());
}

// The ':' after a member name (and the usual space after it).
TapeLexer::Next TapeLexer::colon() {
    if (*p_ != ':') {
        ws();
        if (*p_ != ':')
            r_.bad_colon(p_);
    }
    p_++;
    if (*p_ == ' ')
        p_++;
    member_ = true;
    return kValue;
}

#ifdef __SSE2__
// An object in an array whose first sj_ members matched the last recorded shape (see
// TapeState::shape_chunk) name for name, with string or number values; p_ is at the next
// member. A member that does not match, or another value, goes on through key or value with
// the tokens that those would have written (shape_flush).
TapeLexer::Next TapeLexer::shape() {
    const unsigned cl = t_.shape_clen[sj_];
    const unsigned want = (1u << cl) - 1;
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i *>(p_));
    const __m128i y = _mm_load_si128(reinterpret_cast<const __m128i *>(t_.shape_chunk[sj_]));
    const unsigned m = static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(x, y)));
    if ((m & want) != want || cl == 0) {
        shape_flush(sj_);
        return kKey;
    }
    noff_[sj_] = offset(p_);
    p_ += cl;
    if (!shape_value(p_))
        return shape_miss();
    if (++sj_ < t_.chunk_n) {
        if (*p_ == ',') {
            p_++;
            if (*p_ == ' ')
                p_++;
            return kShape;
        }
    } else if (*p_ == '}') {
        return shape_close();
    }
    // Something else follows the value: on through scalar, as the tokens would have been.
    shape_flush(sj_);
    member_ = true;
    return kScalar;
}

// The value of the sj_-th member at q, when it is a string or number span of the text (p_
// moves past it).
bool TapeLexer::shape_value(const unsigned char *q) {
    if (*q == '"') {
        const unsigned char *c = plain_string_end(q, e_);
        if (!c)
            return false;
        p_ = c + 1;
        sv_[sj_] = {offset(q), static_cast<uint32_t>(p_ - q)};
        return true;
    }
    if (*q != '-' && !is_digit(*q))
        return false;
    const unsigned char *end;
    size_t len;
    const unsigned char *span = number_span(q, &end, &len);
    if (!span)
        return false;
    p_ = end;
    sv_[sj_] = {offset(span), static_cast<uint32_t>(len)};
    return true;
}

// The '}' at p_ after all members, in the recorded sequence: the same distinct names, so the
// recorded order; the object becomes one Shaped token.
TapeLexer::Next TapeLexer::shape_close() {
    p_++;
    if (t_.rec == T::kNotObject)
        record_shape(t_);
    Tok &ok = t_.toks.b_[t_.opens.back().tok];
    ok.kind = T::Shaped;
    ok.off = static_cast<uint32_t>(sv_ - t_.vals.b_);
    ok.len = t_.rec;
    t_.vals.e_ = sv_ + sj_;
    t_.opens.pop_back();
    return kAfter;
}

// The sj_-th member's name matched, its value (at p_) is another kind: on through value.
TapeLexer::Next TapeLexer::shape_miss() {
    shape_flush(sj_);
    Tok *k = token(T::InText);
    T::Name *nm = t_.names.e_++; // (room: see tape_room)
    k->off = noff_[sj_];
    k->len = t_.shape_nlen[sj_];
    nm->key = t_.shape_keys[sj_];
    nm->ref = index(k);
    member_ = true;
    return kValue;
}
#endif

// A string or number is complete; a member's value is usually followed by ", " and a name.
TapeLexer::Next TapeLexer::scalar() {
    if (member_ && *p_ == ',') {
        p_++;
        if (*p_ == ' ')
            p_++;
        return kKey;
    }
    return kAfter;
}

// After a value: a ',', the end of the innermost container, or the end of the text.
TapeLexer::Next TapeLexer::after() {
    if (t_.opens.empty()) {
        ws();
        r_.expect_end(p_);
        return kDone;
    }
    if (json_ws(*p_))
        ws();
    const T::Open op = t_.opens.back();
    const unsigned char c = *p_;
    if (c != ',')
        return close(op, c);
    p_++;
    if (*p_ == ' ') // (the usual ", ")
        p_++;
    if (op.names != T::kNotObject) {
        cur_ = op.names;
        return kKey;
    }
    member_ = false;
    return kValue;
}

// The end (c, at p_) of the innermost container op.
TapeLexer::Next TapeLexer::close(T::Open op, unsigned char c) {
    const bool object = op.names != T::kNotObject;
    if (c != (object ? '}' : ']'))
        r_.bad_after(p_, object);
    p_++;
    const uint32_t end = index(tk_);
    if (object)
        close_object(t_, b_, op.tok, op.names, end,
                     t_.opens.size() >= 2 && t_.opens.e_[-2].names == T::kNotObject);
    else
        t_.toks.b_[op.tok].end = end;
    t_.opens.pop_back();
    return kAfter;
}

} // namespace

IDEM_NOINLINE void tape_pass1(Reader &r, TapeState &t, const Options &o) {
    tape_start(t, o);
    uint32_t noff[TapeState::kShapeMax];
    TapeLexer(r, t, o, noff).run();
}

} // namespace idem::jcs::detail
