// The tape's pass 2: every token written once, each object's members in the order pass 1
// recorded, with the punctuation between them; and, when fingerprinting, each finished 128
// bytes or so handed to SHA-256 on the way.
#include "internal.hpp"

#include "cpp_only.hpp" // last include: core/ never sees postgres.h

namespace idem::jcs::detail {

namespace {

// Copies a span of n bytes at src, of which 32 bytes may be read, to o; returns the end. Room
// for 32 bytes more than n at o.
IDEM_INLINE char *copy_span(char *o, const char *src, size_t n) noexcept {
    if (n <= 32) {
        std::memcpy(o, src, 16);
        std::memcpy(o + 16, src + 16, 16);
    } else {
        std::memcpy(o, src, n);
    }
    return o + n;
}

// Pass 2 over one tape. The members are the write state; each state is a function (all
// inlined into run(), where the state stays in registers) that returns the next state.
// (Text spans are disjoint parts of the text, side spans of side; at most 2 bytes of
// punctuation per token; copy_span writes up to 32 bytes past the end.)
class TapeWriter {
  public:
    TapeWriter(TapeState &t, const char *const *base, char *o, HashFeed &hash)
        : t_(t), base_(base), toks_(t.toks.b_), order_(t.order.b_), o_(o), hash_(hash),
          hash_at_(hash.at) {}
    IDEM_INLINE char *run();

  private:
    using T = TapeState;
    enum Next { kValue, kMembers, kElements, kUp, kDone };
    IDEM_INLINE void copy(const Tok &k) { o_ = copy_span(o_, base_[k.kind] + k.off, k.len); }
    IDEM_INLINE Next step(Next next);
    IDEM_INLINE Next value();
    IDEM_INLINE void shaped(const Tok &k);
    IDEM_INLINE Next members();
    IDEM_INLINE Next elements();
    IDEM_INLINE Next up();
    IDEM_INLINE void feed();

    TapeState &t_;
    const char *const *const base_; // [InText]: the text, [InSide]: side
    const Tok *const toks_;
    const uint32_t *const order_;
    char *o_;           // where the next byte goes
    uint32_t i_ = 0;    // the value to write
    uint32_t next_ = 0; // the token after the value just written
    HashFeed &hash_;
    const char *hash_at_;
};

char *TapeWriter::run() {
    for (Next next = kValue; next != kDone;)
        next = step(next);
    return o_;
}

// The state `next` (kDone excluded).
TapeWriter::Next TapeWriter::step(Next next) {
    switch (next) {
    case kValue:
        return value();
    case kMembers:
        return members();
    case kElements:
        return elements();
    default:
        return up();
    }
}

// The value whose token is i_.
TapeWriter::Next TapeWriter::value() {
    const Tok &k = toks_[i_];
    next_ = i_ + 1;
    if (k.kind <= T::InSide) {
        copy(k);
        return kUp;
    }
    if (k.kind == T::Shaped) {
        shaped(k);
        return kUp;
    }
    if (k.kind == T::Object) {
        *o_++ = '{';
        if (k.len == 0) {
            *o_++ = '}';
            next_ = k.end;
            return kUp;
        }
        t_.emit.push_back({order_ + k.off, k.len, k.end, 1});
        return kMembers;
    }
    *o_++ = '[';
    if (k.end == i_ + 1) {
        *o_++ = ']';
        next_ = k.end;
        return kUp;
    }
    t_.emit.push_back({nullptr, 0, k.end, 0});
    i_++;
    return kElements;
}

// A Shaped object: the recorded names (each with its ':') and the values in recorded order.
void TapeWriter::shaped(const Tok &k) {
    const T::ShapeRec &r = t_.recs.b_[k.len];
    const T::Span *const vs = t_.vals.b_ + k.off;
    const char *name = base_[T::InSide] + r.names;
    *o_++ = '{';
    for (uint32_t m = 0; m < r.n; m++) {
        o_ = copy_span(o_, name, r.name_len[m]);
        name += r.name_len[m];
        const T::Span v = vs[r.text_index[m]];
        o_ = copy_span(o_, base_[T::InText] + v.off, v.len);
        *o_++ = ',';
    }
    o_[-1] = '}';
}

// The object on top has f.left > 0 members to write, the next at f.ord.
TapeWriter::Next TapeWriter::members() {
    // (ord and left stay in registers: the byte stores at o_ may alias f for the compiler)
    T::Emit &f = t_.emit.back();
    const uint32_t *ord = f.ord;
    uint32_t left = f.left;
    for (;;) {
        const uint32_t kt = *ord++;
        copy(toks_[kt]);
        *o_++ = ':';
        left--;
        const Tok &v = toks_[kt + 1];
        if (v.kind > T::InSide) {
            f.ord = ord;
            f.left = left;
            i_ = kt + 1;
            return kValue;
        }
        copy(v);
        if (left == 0)
            break;
        *o_++ = ',';
    }
    *o_++ = '}';
    next_ = f.end;
    t_.emit.pop_back();
    return kUp;
}

// The array on top has its next element at i_.
TapeWriter::Next TapeWriter::elements() {
    const uint32_t end = t_.emit.back().end;
    for (;;) {
        const Tok &v = toks_[i_];
        if (v.kind > T::InSide)
            return kValue;
        copy(v);
        if (++i_ == end)
            break;
        *o_++ = ',';
    }
    *o_++ = ']';
    next_ = end;
    t_.emit.pop_back();
    return kUp;
}

// The value before token next_ is complete: on with its container, or done.
TapeWriter::Next TapeWriter::up() {
    if (o_ >= hash_at_)
        feed();
    if (t_.emit.empty())
        return kDone;
    T::Emit &f = t_.emit.back();
    if (f.object) {
        if (f.left != 0) {
            *o_++ = ',';
            return kMembers;
        }
        *o_++ = '}';
    } else {
        if (next_ != f.end) {
            *o_++ = ',';
            i_ = next_;
            return kElements;
        }
        *o_++ = ']';
    }
    next_ = f.end;
    t_.emit.pop_back();
    return kUp;
}

// Hands the whole 64-byte blocks written and not yet hashed to SHA-256.
void TapeWriter::feed() {
    const size_t upto = static_cast<size_t>(o_ - hash_.o0) & ~size_t(63);
    hash_.sha->update(hash_.o0 + hash_.hashed, upto - hash_.hashed);
    hash_.hashed = upto;
    hash_at_ = hash_.o0 + upto + HashFeed::kRun;
}

} // namespace

IDEM_NOINLINE char *write_tape(TapeState &t, const char *text, char *o, HashFeed &hash) {
    t.side.room(32); // (so that copy_span may read 32 bytes from any side span)
    const char *const base[2] = {text, t.side.data()};
    return TapeWriter(t, base, o, hash).run();
}

} // namespace idem::jcs::detail
