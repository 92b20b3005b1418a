// The tape's out-of-line token readers (pass 1, tape.cpp): strings with escapes or bytes
// >= 0x80, numbers not already in their canonical form, and the tokens of a shape that stopped
// matching.
#include "internal.hpp"

#include "cpp_only.hpp" // last include: core/ never sees postgres.h

namespace idem::jcs::detail {

namespace {

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
bool string_rest_into(const unsigned char *&p, char *&o, const unsigned char *e) noexcept {
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

} // namespace

// A string token at q that plain_string_end does not take: decoded by the Reader and, when it
// has escapes, written canonically to side (k becomes InSide). Returns the end of the token;
// *value is the unescaped text when it is not in the input (valid until the next string),
// else null.
const unsigned char *string_slow(Reader &r, TapeState &t, Tok *k, const unsigned char *q,
                                 std::string_view *value) {
    r.p_ = q;
    std::string_view v = r.string();
    if (v.data() == reinterpret_cast<const char *>(q) + 1) { // UTF-8 without escapes
        k->off = static_cast<uint32_t>(q - r.b_);
        k->len = static_cast<uint32_t>(r.p_ - q);
        *value = {};
    } else {
        k->kind = TapeState::InSide;
        k->off = static_cast<uint32_t>(t.side.size());
        k->len = static_cast<uint32_t>(append_quoted(t.side, v));
        *value = v;
    }
    return r.p_;
}

// A number token at s that number_span does not take: through write_number into side.
const unsigned char *number_slow(Reader &r, TapeState &t, Tok *k, const unsigned char *s,
                                 bool exact) {
    const std::string_view text = r.number_token(s);
    const size_t off = t.side.size();
    r.number_at(s, [&] {
        t.side.set_end(write_number(text, exact, t.side.room(number_bound(text.size()))));
    });
    k->kind = TapeState::InSide;
    k->off = static_cast<uint32_t>(off);
    k->len = static_cast<uint32_t>(t.side.size() - off);
    return r.p_;
}

// A string value at q (in the padded text) with escapes or bytes >= 0x80: written
// canonically to side as it is decoded (k becomes InSide), or kept as a text span when it has
// no escapes. Returns the end of the token, or null (side unchanged) for what string_slow must
// decide: errors, surrogate escapes.
const unsigned char *string_value(TapeState &t, Tok *k, const unsigned char *q,
                                  const unsigned char *b, const unsigned char *e) {
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
    k->kind = TapeState::InSide;
    k->off = static_cast<uint32_t>(at);
    k->len = static_cast<uint32_t>(t.side.size() - at);
    return p;
}

// Writes the tokens and names of the first j members of an object in an array that matched
// the recorded shape (names at noff, values at vals' end), as key and value would have;
// returns the new token write position.
Tok *shape_tokens(TapeState &t, Tok *tk, const uint32_t *noff, size_t j, const Options &o) {
    using T = TapeState;
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
void record_shape(TapeState &t) {
    using T = TapeState;
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

} // namespace idem::jcs::detail
