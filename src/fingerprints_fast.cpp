// The fast path of idem_canonical_json and idem_fingerprint (see fingerprints_fast.hpp).
//
// jsonb stores object keys sorted by (length, bytes); each object's keys are sorted again by
// UTF-16 code units (indices only, the keys stay in the jsonb) and every member is written once,
// in that order, with no event stream and no member copies. Strings, keys and numbers go through
// the core's noexcept writers (write_quoted, write_decimal; IDEM_NOTHROW) or, where the core can
// throw, through call_cpp. A numeric is canonicalised from its stored base-10000 digits
// (fast_numeric_direct) and only falls back to numeric_out where that cannot be done exactly.
//
// Boundary: everything here is C-style code with POD locals only (no C++ object with a
// destructor is alive in these frames), so PostgreSQL errors (palloc, CHECK_FOR_INTERRUPTS,
// check_stack_depth, numeric_out) may pass through it.
#include "fingerprints_fast.hpp"

#include "jcs.hpp"

#include <algorithm>

extern "C" {
#include "miscadmin.h"
#include "utils/fmgrprotos.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
}

namespace idem::pg::fingerprints {
namespace {

// The buffer kept for documents whose jsonb is at most kBigDoc bytes.
CanonBuf g_buf = {nullptr, 0, 0, nullptr};
constexpr size_t kBigDoc = size_t(256) << 10;
constexpr size_t kKeepBuf = size_t(1) << 20; // g_buf is freed when it grows beyond this

void buf_grow(CanonBuf *b, size_t extra) {
    if (extra > MaxAllocHugeSize - b->len)
        ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
                        errmsg("canonical JSON text is too long")));
    size_t need = b->len + extra;
    size_t cap = b->cap > 0 ? b->cap : 8192;
    while (cap < need)
        cap = cap > MaxAllocHugeSize / 2 ? need : cap * 2;
    if (b->data == nullptr)
        b->data = static_cast<char *>(MemoryContextAllocHuge(b->cxt, cap));
    else
        b->data = static_cast<char *>(repalloc_huge(b->data, cap));
    b->cap = cap;
}

// Room for extra more bytes; returns the write position.
inline char *buf_reserve(CanonBuf *b, size_t extra) {
    if (b->cap - b->len < extra)
        buf_grow(b, extra);
    return b->data + b->len;
}

inline void buf_put(CanonBuf *b, const char *s, size_t n) {
    memcpy(buf_reserve(b, n), s, n);
    b->len += n;
}

inline void buf_putc(CanonBuf *b, char c) {
    *buf_reserve(b, 1) = c;
    b->len++;
}

// Nesting deeper than this leaves the fast path (the iterator path handles any depth).
constexpr int kFastMaxDepth = 200;

struct FastWalk {
    CanonBuf *buf;
    bool exact;
    bool too_deep;
    uint32 ticks;
};

// Writes a JCS string; large strings are escaped in pieces so that the buffer never needs the
// 6x worst case of the whole string at once.
void fast_string(CanonBuf *b, const char *s, size_t n) {
    constexpr size_t kPiece = 65536;
    if (n <= kPiece) {
        char *o = buf_reserve(b, IDEM_NOTHROW(idem::jcs::quoted_bound(n)));
        b->len = IDEM_NOTHROW(idem::jcs::write_quoted(o, s, n)) - b->data;
        return;
    }
    buf_putc(b, '"');
    for (size_t off = 0; off < n; off += kPiece) {
        size_t m = n - off < kPiece ? n - off : kPiece;
        char *o = buf_reserve(b, IDEM_NOTHROW(idem::jcs::quoted_bound(m)));
        b->len = IDEM_NOTHROW(idem::jcs::write_escaped(o, s + off, m)) - b->data;
        CHECK_FOR_INTERRUPTS();
    }
    buf_putc(b, '"');
}

// A numeric's digits read directly from its stored form (the on-disk format of
// src/backend/utils/adt/numeric.c, which pg_upgrade keeps stable): a 2-byte header (short
// format: flag 0x8000, sign 0x2000, weight in the low 7 bits, sign-extended from 0x0040) or a
// 2-byte sign/dscale word (sign 0x4000) plus an int16 weight, then base-10000 digits; the
// value is sum(d[i] * 10000^(weight - i)). Writes the canonical number and returns true, or
// returns false (NaN/Inf, a packed header, more than 64 decimal digits, or a strict-mode value
// that needs the binary double conversion) so that the caller uses numeric_out.
bool fast_numeric_direct(FastWalk *w, Numeric num) {
    const char *p = reinterpret_cast<const char *>(num);
    if (VARATT_IS_1B(p))
        return false;
    size_t size = VARSIZE(p);
    uint16 h;
    memcpy(&h, p + VARHDRSZ, sizeof h);
    bool negative;
    int weight;
    size_t hdr;
    if ((h & 0xC000) == 0x8000) { // short format
        negative = (h & 0x2000) != 0;
        weight = (h & 0x0040) ? static_cast<int>(h & 0x003F) - 64 : static_cast<int>(h & 0x003F);
        hdr = VARHDRSZ + sizeof(uint16);
    } else if ((h & 0xC000) == 0x0000 || (h & 0xC000) == 0x4000) { // long format
        negative = (h & 0xC000) == 0x4000;
        int16 wt;
        memcpy(&wt, p + VARHDRSZ + sizeof(uint16), sizeof wt);
        weight = wt;
        hdr = VARHDRSZ + sizeof(uint16) + sizeof(int16);
    } else {
        return false; // NaN, +-Infinity
    }
    if (size < hdr)
        return false;
    size_t ndigits = (size - hdr) / sizeof(int16);
    if (ndigits > 16)
        return false;
    char d[64];
    size_t k = 0;
    for (size_t i = 0; i < ndigits; i++) {
        int16 g;
        memcpy(&g, p + hdr + i * sizeof(int16), sizeof g);
        if (g < 0 || g > 9999)
            return false;
        d[k++] = static_cast<char>('0' + g / 1000);
        d[k++] = static_cast<char>('0' + g / 100 % 10);
        d[k++] = static_cast<char>('0' + g / 10 % 10);
        d[k++] = static_cast<char>('0' + g % 10);
    }
    // value = 0.d * 10^(4 * (weight + 1)); strip leading and trailing zeros.
    size_t z = 0;
    while (z < k && d[z] == '0')
        z++;
    if (z == k) {
        buf_putc(w->buf, '0');
        return true;
    }
    while (d[k - 1] == '0')
        k--;
    size_t count = k - z;
    int64 point = 4 * (static_cast<int64>(weight) + 1) - static_cast<int64>(z);
    // Strict mode: up to 15 significant digits in the normal double range print as they are
    // (the rule of format_number's fast path); anything else needs the double conversion.
    if (!w->exact && (count > 15 || point - 1 < -307 || point - 1 > 307))
        return false;
    char *o = buf_reserve(w->buf, count + 40);
    w->buf->len =
        IDEM_NOTHROW(idem::jcs::write_decimal(o, negative, d + z, count, point)) - w->buf->data;
    return true;
}

void fast_numeric(FastWalk *w, Numeric num) {
    if (fast_numeric_direct(w, num))
        return;
    char *s = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(num)));
    size_t n = strlen(s);
    char *o = buf_reserve(w->buf, IDEM_NOTHROW(idem::jcs::number_bound(n)));
    bool exact = w->exact;
    char *end = call_cpp([&] { return idem::jcs::write_number(std::string_view(s, n), exact, o); });
    w->buf->len = end - w->buf->data;
    pfree(s);
}

bool fast_container(FastWalk *w, const JsonbContainer *c, int depth);

// Writes the value of child entry e whose data starts at base + off (length len).
bool fast_value(FastWalk *w, JEntry e, const char *base, uint32 off, uint32 len, int depth) {
    if ((++w->ticks & 4095) == 0)
        CHECK_FOR_INTERRUPTS();
    if (JBE_ISSTRING(e)) {
        fast_string(w->buf, base + off, len);
    } else if (JBE_ISNUMERIC(e)) {
        fast_numeric(w, reinterpret_cast<Numeric>(const_cast<char *>(base + INTALIGN(off))));
    } else if (JBE_ISNULL(e)) {
        buf_put(w->buf, "null", 4);
    } else if (JBE_ISBOOL_TRUE(e)) {
        buf_put(w->buf, "true", 4);
    } else if (JBE_ISBOOL_FALSE(e)) {
        buf_put(w->buf, "false", 5);
    } else if (JBE_ISCONTAINER(e)) {
        return fast_container(w, reinterpret_cast<const JsonbContainer *>(base + INTALIGN(off)),
                              depth + 1);
    } else {
        elog(ERROR, "unexpected jsonb entry type %u", static_cast<unsigned>(e & JENTRY_TYPEMASK));
    }
    return true;
}

// An object member during the sort: the key's bytes in the jsonb and the member's position.
struct KeyRef {
    const char *s;
    uint32 len;
    uint32 idx;
};

inline bool key_less(const KeyRef &a, const KeyRef &b) {
    std::string_view x(a.s, a.len), y(b.s, b.len);
    return IDEM_NOTHROW(idem::jcs::compare_utf16(x, y)) < 0;
}

bool fast_object(FastWalk *w, const JsonbContainer *c, uint32 n, int depth) {
    constexpr uint32 kLocal = 16;
    KeyRef local_keys[kLocal];
    uint32 local_off[2 * kLocal + 1];
    KeyRef *keys = n <= kLocal ? local_keys : static_cast<KeyRef *>(palloc(n * sizeof(KeyRef)));
    uint32 *off = n <= kLocal ? local_off
                              : static_cast<uint32 *>(palloc((2 * size_t(n) + 1) * sizeof(uint32)));
    // Keys are children 0..n-1, values n..2n-1; their data follows the JEntry array in order.
    const char *base = reinterpret_cast<const char *>(&c->children[2 * n]);
    uint32 o = 0;
    for (uint32 i = 0; i < 2 * n; i++) {
        off[i] = o;
        JBE_ADVANCE_OFFSET(o, c->children[i]);
    }
    off[2 * n] = o;
    for (uint32 i = 0; i < n; i++)
        keys[i] = KeyRef{base + off[i], off[i + 1] - off[i], i};
    // Insertion sort for small objects (jsonb's order is often close), std::sort otherwise.
    if (n <= 24) {
        for (uint32 i = 1; i < n; i++) {
            KeyRef k = keys[i];
            uint32 j = i;
            while (j > 0 && key_less(k, keys[j - 1])) {
                keys[j] = keys[j - 1];
                j--;
            }
            keys[j] = k;
        }
    } else {
        std::sort(keys, keys + n, key_less);
    }
    buf_putc(w->buf, '{');
    bool ok = true;
    for (uint32 j = 0; j < n && ok; j++) {
        if (j > 0)
            buf_putc(w->buf, ',');
        fast_string(w->buf, keys[j].s, keys[j].len);
        buf_putc(w->buf, ':');
        uint32 v = n + keys[j].idx;
        ok = fast_value(w, c->children[v], base, off[v], off[v + 1] - off[v], depth);
    }
    buf_putc(w->buf, '}');
    if (keys != local_keys) {
        pfree(keys);
        pfree(off);
    }
    return ok;
}

bool fast_array(FastWalk *w, const JsonbContainer *c, uint32 n, int depth) {
    const char *base = reinterpret_cast<const char *>(&c->children[n]);
    buf_putc(w->buf, '[');
    uint32 o = 0;
    for (uint32 i = 0; i < n; i++) {
        uint32 start = o;
        JBE_ADVANCE_OFFSET(o, c->children[i]);
        if (i > 0)
            buf_putc(w->buf, ',');
        if (!fast_value(w, c->children[i], base, start, o - start, depth))
            return false;
    }
    buf_putc(w->buf, ']');
    return true;
}

// Writes container c at nesting depth `depth` (the root is 1); false when too deep.
bool fast_container(FastWalk *w, const JsonbContainer *c, int depth) {
    if (depth > kFastMaxDepth) {
        w->too_deep = true;
        return false;
    }
    check_stack_depth();
    uint32 n = JsonContainerSize(c);
    if (JsonContainerIsObject(c))
        return fast_object(w, c, n, depth);
    if (JsonContainerIsScalar(c)) { // a raw scalar: a one-element array marked scalar
        const char *base = reinterpret_cast<const char *>(&c->children[1]);
        uint32 o = 0;
        JBE_ADVANCE_OFFSET(o, c->children[0]);
        return fast_value(w, c->children[0], base, 0, o, depth - 1);
    }
    return fast_array(w, c, n, depth);
}

} // namespace

// Walks jb from its root container (see fingerprints_fast.hpp).
CanonBuf *fast_canonical(Jsonb *jb, bool exact) {
    CanonBuf *b = &g_buf;
    if (VARSIZE(jb) > kBigDoc) {
        b = static_cast<CanonBuf *>(palloc(sizeof(CanonBuf)));
        *b = CanonBuf{nullptr, 0, 0, CurrentMemoryContext};
    } else {
        if (g_buf.cap > kKeepBuf) { // left by a failed call
            pfree(g_buf.data);
            g_buf = CanonBuf{nullptr, 0, 0, nullptr};
        }
        g_buf.cxt = TopMemoryContext;
        g_buf.len = 0;
    }
    FastWalk w{b, exact, false, 0};
    bool ok = fast_container(&w, &jb->root, 1);
    Assert(ok || w.too_deep);
    return ok ? b : nullptr;
}

// Keeps the small buffer for the next call unless it grew too large (see fingerprints_fast.hpp).
void release_buf(CanonBuf *b) {
    if (b != &g_buf || g_buf.cap > kKeepBuf) {
        if (b->data != nullptr)
            pfree(b->data);
        *b = CanonBuf{nullptr, 0, 0, nullptr};
    }
}

} // namespace idem::pg::fingerprints
