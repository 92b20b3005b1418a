// Request fingerprints and related primitives: idem_canonical_json, idem_fingerprint (RFC 8785 +
// SHA-256), idem_uuid_v7, idem_uuid_v7_time, idem_hmac_sha256, idem_secure_equal.
//
// Two jsonb paths: without path filters in a UTF8 database, a direct walker writes the canonical
// text from the jsonb containers into one reused buffer (see "Fast path" below); otherwise the
// jsonb is fed through JsonbIteratorNext to the core's streaming CanonicalWriter.
//
// Boundary: the canonical writer (core/jcs.hpp) is one heap object per backend, created with
// new inside run_cpp and reused (reset() at the start of every call), so no C++ object with a
// destructor lives in these frames while PostgreSQL code runs. Every call into the core that
// can throw goes through run_cpp; the jsonb walks themselves (JsonbIteratorNext, numeric_out,
// encoding conversion, the fast walker) are plain PostgreSQL-style code between those calls.
#include "pg_cpp.hpp"

#include "crypto.hpp"
#include "jcs.hpp"
#include "uuid7.hpp"

#include <algorithm>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

extern "C" {
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/fmgroids.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"
}

namespace {

using idem::pg::PendingError;
using idem::pg::raise;
using idem::pg::run_cpp;

idem::jcs::CanonicalWriter *g_writer = nullptr; // per backend, reused

bool g_trim_pending = false; // huge buffers were freed in this transaction

// At the end of a transaction in which a huge document's buffers were freed: gives the freed
// memory back to the system. glibc otherwise keeps it in the backend's heap (its mmap threshold
// rises with each large block freed, so later large blocks, the server's too, come from the
// heap); by then the statement's own memory is freed as well.
void trim_at_xact_end(XactEvent event, void *) {
    if (g_trim_pending &&
        (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT || event == XACT_EVENT_PREPARE)) {
        g_trim_pending = false;
#if defined(__GLIBC__)
        malloc_trim(0);
#endif
    }
}

// Asks for trim_at_xact_end.
void trim_heap() {
    static bool registered = false;
    if (!registered) {
        RegisterXactCallback(trim_at_xact_end, nullptr);
        registered = true;
    }
    g_trim_pending = true;
}

idem::UuidV7Generator *g_uuid = nullptr; // per backend: monotonic within the session

bool interrupted() {
    return idem::pg::interrupt_pending();
}

// One path of an exclude/include argument, as plain PostgreSQL memory.
struct PathSpec {
    int count;
    const char **el;
    int *len;
};
struct PathList {
    int n;
    PathSpec *paths;
};

// Reads argument argno (text[] of paths, possibly NULL) into pl. An entry that starts with '{'
// is a text-array literal ('{meta,trace_id}'); any other entry names one top-level member.
void collect_paths(FunctionCallInfo fcinfo, int argno, const char *argname, PathList *pl) {
    pl->n = 0;
    pl->paths = nullptr;
    if (PG_NARGS() <= argno || PG_ARGISNULL(argno))
        return;
    ArrayType *arr = PG_GETARG_ARRAYTYPE_P(argno);
    if (ARR_NDIM(arr) > 1)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("%s must be a one-dimensional text array", argname)));
    Datum *elems;
    bool *nulls;
    int n;
    deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
    pl->n = n;
    pl->paths = static_cast<PathSpec *>(palloc0(sizeof(PathSpec) * (n > 0 ? n : 1)));
    for (int i = 0; i < n; i++) {
        if (nulls[i])
            ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
                            errmsg("%s must not contain NULL paths", argname)));
        text *t = DatumGetTextPP(elems[i]);
        const char *s = VARDATA_ANY(t);
        int len = VARSIZE_ANY_EXHDR(t);
        PathSpec *ps = &pl->paths[i];
        if (len > 0 && s[0] == '{') {
            char *lit = text_to_cstring(t);
            // array_in needs an FmgrInfo (it caches in fn_extra): call it through one.
            ArrayType *pa = DatumGetArrayTypeP(OidInputFunctionCall(F_ARRAY_IN, lit, TEXTOID, -1));
            if (ARR_NDIM(pa) > 1)
                ereport(ERROR,
                        (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                         errmsg("path \"%s\" in %s is not a one-dimensional array", lit, argname)));
            Datum *pe;
            bool *pn;
            int pc;
            deconstruct_array(pa, TEXTOID, -1, false, TYPALIGN_INT, &pe, &pn, &pc);
            ps->count = pc;
            ps->el = static_cast<const char **>(palloc(sizeof(char *) * (pc > 0 ? pc : 1)));
            ps->len = static_cast<int *>(palloc(sizeof(int) * (pc > 0 ? pc : 1)));
            for (int j = 0; j < pc; j++) {
                if (pn[j])
                    ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
                                    errmsg("path \"%s\" in %s contains NULL", lit, argname)));
                text *e = DatumGetTextPP(pe[j]);
                ps->el[j] = VARDATA_ANY(e);
                ps->len[j] = VARSIZE_ANY_EXHDR(e);
            }
        } else {
            ps->count = 1;
            ps->el = static_cast<const char **>(palloc(sizeof(char *)));
            ps->len = static_cast<int *>(palloc(sizeof(int)));
            ps->el[0] = s;
            ps->len[0] = len;
        }
    }
}

// Path elements are compared with the member names as UTF-8.
const char *to_utf8(const char *s, int len, int *outlen) {
    if (GetDatabaseEncoding() == PG_UTF8 || GetDatabaseEncoding() == PG_SQL_ASCII) {
        *outlen = len;
        return s;
    }
    const char *r = pg_server_to_any(s, len, PG_UTF8);
    *outlen = r == s ? len : static_cast<int>(strlen(r));
    return r;
}

void convert_paths(PathList *pl) {
    for (int i = 0; i < pl->n; i++)
        for (int j = 0; j < pl->paths[i].count; j++)
            pl->paths[i].el[j] =
                to_utf8(pl->paths[i].el[j], pl->paths[i].len[j], &pl->paths[i].len[j]);
}

// The exclude and include arguments (1 and 2) of idem_fingerprint, as UTF-8 paths.
void filter_args(FunctionCallInfo fcinfo, PathList *ex, PathList *in) {
    collect_paths(fcinfo, 1, "exclude", ex);
    collect_paths(fcinfo, 2, "include", in);
    convert_paths(ex);
    convert_paths(in);
}

std::vector<idem::jcs::Path> to_core_paths(const PathList &pl) {
    std::vector<idem::jcs::Path> r;
    r.reserve(pl.n);
    for (int i = 0; i < pl.n; i++) {
        idem::jcs::Path p;
        p.reserve(pl.paths[i].count);
        for (int j = 0; j < pl.paths[i].count; j++)
            p.emplace_back(pl.paths[i].el[j], pl.paths[i].len[j]);
        r.push_back(std::move(p));
    }
    return r;
}

bool get_exact(FunctionCallInfo fcinfo, int argno) {
    if (PG_NARGS() <= argno)
        return false;
    if (PG_ARGISNULL(argno))
        ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
                        errmsg("exact_numbers must not be NULL")));
    return PG_GETARG_BOOL(argno);
}

// The per-backend writer, reset for a new document; raises on failure.
idem::jcs::CanonicalWriter *prepare_writer(bool exact, const PathList *ex, const PathList *in) {
    PendingError pe;
    idem::jcs::CanonicalWriter *w = nullptr;
    bool validate = GetDatabaseEncoding() != PG_UTF8;
    if (!run_cpp(pe, [&] {
            if (g_writer == nullptr)
                g_writer = new idem::jcs::CanonicalWriter();
            idem::jcs::Options o;
            o.exact_numbers = exact;
            o.interrupted = &interrupted;
            if (ex != nullptr)
                o.exclude = to_core_paths(*ex);
            if (in != nullptr)
                o.include = to_core_paths(*in);
            g_writer->reset(std::move(o));
            g_writer->set_validate_utf8(validate);
            w = g_writer;
        }))
        raise(pe);
    return w;
}

// Feeds the jsonb document to the writer with PostgreSQL's iterator.
void walk_jsonb(Jsonb *jb, idem::jcs::CanonicalWriter *w) {
    JsonbIterator *it = JsonbIteratorInit(&jb->root);
    JsonbValue v;
    JsonbIteratorToken tok;
    PendingError pe;
    bool raw_scalar = false;
    uint32 n = 0;
    const bool convert = GetDatabaseEncoding() != PG_UTF8;
    while ((tok = JsonbIteratorNext(&it, &v, false)) != WJB_DONE) {
        if ((++n & 4095) == 0)
            CHECK_FOR_INTERRUPTS();
        bool ok = true;
        switch (tok) {
        case WJB_BEGIN_ARRAY:
            if (v.val.array.rawScalar) {
                raw_scalar = true;
                break;
            }
            ok = run_cpp(pe, [&] { w->begin_array(); });
            break;
        case WJB_END_ARRAY:
            if (!raw_scalar)
                ok = run_cpp(pe, [&] { w->end_array(); });
            break;
        case WJB_BEGIN_OBJECT:
            ok = run_cpp(pe, [&] { w->begin_object(); });
            break;
        case WJB_END_OBJECT:
            ok = run_cpp(pe, [&] { w->end_object(); });
            break;
        case WJB_KEY: {
            int len = v.val.string.len;
            const char *s = convert ? to_utf8(v.val.string.val, len, &len) : v.val.string.val;
            ok = run_cpp(pe, [&] { w->key(std::string_view(s, len)); });
            break;
        }
        case WJB_VALUE:
        case WJB_ELEM:
            switch (v.type) {
            case jbvNull:
                ok = run_cpp(pe, [&] { w->null(); });
                break;
            case jbvBool:
                ok = run_cpp(pe, [&] { w->boolean(v.val.boolean); });
                break;
            case jbvString: {
                int len = v.val.string.len;
                const char *s = convert ? to_utf8(v.val.string.val, len, &len) : v.val.string.val;
                ok = run_cpp(pe, [&] { w->string(std::string_view(s, len)); });
                break;
            }
            case jbvNumeric: {
                char *s = DatumGetCString(
                    DirectFunctionCall1(numeric_out, NumericGetDatum(v.val.numeric)));
                ok = run_cpp(pe, [&] { w->number(std::string_view(s, strlen(s))); });
                pfree(s);
                break;
            }
            default:
                elog(ERROR, "unexpected jsonb value type %d", static_cast<int>(v.type));
            }
            break;
        default:
            break;
        }
        if (!ok)
            raise(pe);
    }
}

// ---------------------------------------------------------------------------------------------
// Fast path for a jsonb document without path filters in a UTF8 database: the canonical text is
// written straight from the jsonb containers into one reused buffer, with no event stream and no
// member copies. jsonb stores object keys sorted by (length, bytes); each object's keys are
// sorted again by UTF-16 code units (indices only, the keys stay in the jsonb) and every member
// is written once, in that order. Strings, keys and numbers go through the core's noexcept
// writers (write_quoted, write_decimal) or, where the core can throw, through run_cpp.
//
// Boundary: everything here is C-style code with POD locals only (no C++ object with a
// destructor is alive in these frames), so PostgreSQL errors (palloc, CHECK_FOR_INTERRUPTS,
// check_stack_depth, numeric_out) may pass through it.

// An output buffer in memory context cxt. Small documents use g_buf, kept in TopMemoryContext
// and reused by every call; a document whose jsonb is larger than kBigDoc gets a buffer in the
// call's memory context, which PostgreSQL frees even when the call fails.
struct CanonBuf {
    char *data;
    size_t len;
    size_t cap;
    MemoryContext cxt;
};
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
        b->len =
            idem::jcs::write_quoted(buf_reserve(b, idem::jcs::quoted_bound(n)), s, n) - b->data;
        return;
    }
    buf_putc(b, '"');
    for (size_t off = 0; off < n; off += kPiece) {
        size_t m = n - off < kPiece ? n - off : kPiece;
        char *o = buf_reserve(b, idem::jcs::quoted_bound(m));
        b->len = idem::jcs::write_escaped(o, s + off, m) - b->data;
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
    w->buf->len = idem::jcs::write_decimal(o, negative, d + z, count, point) - w->buf->data;
    return true;
}

void fast_numeric(FastWalk *w, Numeric num) {
    if (fast_numeric_direct(w, num))
        return;
    char *s = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(num)));
    size_t n = strlen(s);
    char *o = buf_reserve(w->buf, idem::jcs::number_bound(n));
    char *end = nullptr;
    bool exact = w->exact;
    PendingError pe;
    if (!run_cpp(pe, [&] { end = idem::jcs::write_number(std::string_view(s, n), exact, o); }))
        raise(pe);
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
    return idem::jcs::compare_utf16(std::string_view(a.s, a.len), std::string_view(b.s, b.len)) < 0;
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

// True when the fast path applies: UTF8 database, no path filters.
bool fast_path_ok(const PathList *ex, const PathList *in) {
    return GetDatabaseEncoding() == PG_UTF8 && (ex == nullptr || ex->n == 0) &&
           (in == nullptr || in->n == 0);
}

// Writes the canonical text of jb into a buffer and returns it, or nullptr when the document is
// too deep for the fast path (the caller then takes the iterator path).
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

// Frees a buffer that is not kept for the next call.
void release_buf(CanonBuf *b) {
    if (b != &g_buf || g_buf.cap > kKeepBuf) {
        if (b->data != nullptr)
            pfree(b->data);
        *b = CanonBuf{nullptr, 0, 0, nullptr};
    }
}

// After a call: frees what the writer grew past its kept size for a huge document.
void release_writer(idem::jcs::CanonicalWriter *w) {
    if (w->shrink())
        trim_heap();
}

// The raw JSON text argument as UTF-8 bytes.
const char *text_arg_utf8(FunctionCallInfo fcinfo, int *len) {
    text *t = PG_GETARG_TEXT_PP(0);
    return to_utf8(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t), len);
}

void parse_text(idem::jcs::CanonicalWriter *w, const char *s, int len) {
    PendingError pe;
    if (!run_cpp(pe, [&] { idem::jcs::parse_into(std::string_view(s, len), *w); }))
        raise(pe);
}

// A digest as bytea.
bytea *bytea_of(const idem::Digest &d) {
    bytea *r = static_cast<bytea *>(palloc(VARHDRSZ + d.size()));
    SET_VARSIZE(r, VARHDRSZ + d.size());
    memcpy(VARDATA(r), d.data(), d.size());
    return r;
}

Datum digest_result(idem::jcs::CanonicalWriter *w) {
    PendingError pe;
    idem::Digest d{};
    if (!run_cpp(pe, [&] { d = w->digest(); }))
        raise(pe);
    release_writer(w);
    PG_RETURN_BYTEA_P(bytea_of(d));
}

Datum text_result(idem::jcs::CanonicalWriter *w) {
    PendingError pe;
    const char *data = nullptr;
    size_t size = 0;
    if (!run_cpp(pe, [&] {
            std::string_view r = w->result();
            data = r.data();
            size = r.size();
        }))
        raise(pe);
    if (size > MaxAllocSize - VARHDRSZ)
        ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
                        errmsg("canonical JSON text is too long")));
    const char *s = data;
    int len = static_cast<int>(size);
    if (GetDatabaseEncoding() != PG_UTF8) {
        s = pg_any_to_server(data, len, PG_UTF8);
        if (s != data)
            len = static_cast<int>(strlen(s));
    }
    text *t = cstring_to_text_with_len(s, len);
    release_writer(w);
    PG_RETURN_TEXT_P(t);
}

} // namespace

// idem_canonical_json(jsonb, exact_numbers boolean) -> text: RFC 8785 canonical text.
IDEM_PG_FUNCTION(idem_canonical_json_jsonb) {
    bool exact = get_exact(fcinfo, 1);
    Jsonb *jb = PG_GETARG_JSONB_P(0);
    CanonBuf *b = fast_path_ok(nullptr, nullptr) ? fast_canonical(jb, exact) : nullptr;
    if (b != nullptr) {
        if (b->len > MaxAllocSize - VARHDRSZ)
            ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
                            errmsg("canonical JSON text is too long")));
        text *r = cstring_to_text_with_len(b->data, static_cast<int>(b->len));
        release_buf(b);
        PG_RETURN_TEXT_P(r);
    }
    idem::jcs::CanonicalWriter *w = prepare_writer(exact, nullptr, nullptr);
    walk_jsonb(jb, w);
    return text_result(w);
}

// idem_canonical_json(text, exact_numbers boolean) -> text: strict I-JSON parse, then RFC 8785.
IDEM_PG_FUNCTION(idem_canonical_json_text) {
    bool exact = get_exact(fcinfo, 1);
    int len;
    const char *s = text_arg_utf8(fcinfo, &len);
    idem::jcs::CanonicalWriter *w = prepare_writer(exact, nullptr, nullptr);
    parse_text(w, s, len);
    return text_result(w);
}

// idem_fingerprint(jsonb, exclude text[], include text[], exact_numbers boolean) -> bytea:
// SHA-256 of the canonical form after the path filters. NULL document -> NULL.
IDEM_PG_FUNCTION(idem_fingerprint_jsonb) {
    if (PG_ARGISNULL(0))
        PG_RETURN_NULL();
    bool exact = get_exact(fcinfo, 3);
    PathList ex, in;
    filter_args(fcinfo, &ex, &in);
    Jsonb *jb = PG_GETARG_JSONB_P(0);
    CanonBuf *b = fast_path_ok(&ex, &in) ? fast_canonical(jb, exact) : nullptr;
    if (b != nullptr) {
        PendingError pe;
        idem::Digest d{};
        if (!run_cpp(pe, [&] { d = idem::sha256(std::string_view(b->data, b->len)); }))
            raise(pe);
        release_buf(b);
        PG_RETURN_BYTEA_P(bytea_of(d));
    }
    idem::jcs::CanonicalWriter *w = prepare_writer(exact, &ex, &in);
    walk_jsonb(jb, w);
    return digest_result(w);
}

// idem_fingerprint(text, exclude text[], include text[], exact_numbers boolean) -> bytea.
IDEM_PG_FUNCTION(idem_fingerprint_text) {
    if (PG_ARGISNULL(0))
        PG_RETURN_NULL();
    bool exact = get_exact(fcinfo, 3);
    PathList ex, in;
    filter_args(fcinfo, &ex, &in);
    int len;
    const char *s = text_arg_utf8(fcinfo, &len);
    idem::jcs::CanonicalWriter *w = prepare_writer(exact, &ex, &in);
    PendingError pe;
    idem::Digest d{};
    if (!run_cpp(pe, [&] { d = idem::jcs::fingerprint_into(std::string_view(s, len), *w); }))
        raise(pe);
    release_writer(w);
    PG_RETURN_BYTEA_P(bytea_of(d));
}

// idem_uuid_v7() -> uuid: RFC 9562 version 7, strictly increasing within the session.
IDEM_PG_FUNCTION(idem_uuid_v7) {
    PendingError pe;
    idem::Uuid id{};
    if (!run_cpp(pe, [&] {
            if (g_uuid == nullptr)
                g_uuid = new idem::UuidV7Generator();
            id = g_uuid->next();
        }))
        raise(pe);
    pg_uuid_t *u = static_cast<pg_uuid_t *>(palloc(sizeof(pg_uuid_t)));
    memcpy(u->data, id.data(), UUID_LEN);
    PG_RETURN_UUID_P(u);
}

// idem_uuid_v7_time(uuid) -> timestamptz: the millisecond timestamp of a version-7 UUID.
IDEM_PG_FUNCTION(idem_uuid_v7_time) {
    pg_uuid_t *u = PG_GETARG_UUID_P(0);
    idem::Uuid id;
    memcpy(id.data(), u->data, UUID_LEN);
    if (!idem::is_uuid_v7(id))
        ereport(ERROR,
                (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("uuid is not a version 7 UUID"),
                 errdetail("Version %d, variant bits %d%d.", u->data[6] >> 4, (u->data[8] >> 7) & 1,
                           (u->data[8] >> 6) & 1)));
    int64 ms = static_cast<int64>(idem::uuid_v7_unix_ms(id));
    int64 pg_epoch_ms =
        static_cast<int64>(POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * 1000;
    PG_RETURN_TIMESTAMPTZ(static_cast<TimestampTz>((ms - pg_epoch_ms) * 1000));
}

// idem_hmac_sha256(key bytea, message bytea) -> bytea: RFC 2104 HMAC with SHA-256.
IDEM_PG_FUNCTION(idem_hmac_sha256) {
    bytea *k = PG_GETARG_BYTEA_PP(0);
    bytea *m = PG_GETARG_BYTEA_PP(1);
    PendingError pe;
    idem::Digest d{};
    if (!run_cpp(pe, [&] {
            d = idem::hmac_sha256(std::string_view(VARDATA_ANY(k), VARSIZE_ANY_EXHDR(k)),
                                  std::string_view(VARDATA_ANY(m), VARSIZE_ANY_EXHDR(m)));
        }))
        raise(pe);
    PG_RETURN_BYTEA_P(bytea_of(d));
}

// idem_secure_equal(a bytea, b bytea) -> boolean: comparison in time independent of where the
// values differ (only of their lengths).
IDEM_PG_FUNCTION(idem_secure_equal) {
    bytea *a = PG_GETARG_BYTEA_PP(0);
    bytea *b = PG_GETARG_BYTEA_PP(1);
    bool eq = idem::constant_time_equal(std::string_view(VARDATA_ANY(a), VARSIZE_ANY_EXHDR(a)),
                                        std::string_view(VARDATA_ANY(b), VARSIZE_ANY_EXHDR(b)));
    PG_RETURN_BOOL(eq);
}
