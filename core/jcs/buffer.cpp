// The canonicaliser's growable buffers: Buffer (bytes), Pod (trivially copyable elements) and
// the tape's set of them, which the writer keeps for reuse.
#include "internal.hpp"

#include <cstdlib>
#include <new>

#include "cpp_only.hpp" // last include: core/ never sees postgres.h

namespace idem::jcs::detail {

void Buffer::grow(size_t n) {
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

size_t pod_grow(void **b, size_t size, size_t cap, size_t n, size_t elem) {
    if (n > (SIZE_MAX / elem) / 2 - size)
        throw std::bad_alloc();
    size_t want = cap < 64 ? 64 : cap * 2;
    if (want < size + n)
        want = size + n;
    void *p = std::realloc(*b, want * elem);
    if (p == nullptr)
        throw std::bad_alloc();
    *b = p;
    return want;
}

bool TapeState::shrink() noexcept {
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

void TapeState::clear() noexcept {
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

std::string_view TapeState::pad(std::string_view text) {
    in.clear();
    char *c = in.room(text.size() + kPad);
    if (!text.empty())
        std::memcpy(c, text.data(), text.size());
    std::memset(c + text.size(), 0, kPad);
    in.set_end(c + text.size());
    return in.view();
}

} // namespace idem::jcs::detail
