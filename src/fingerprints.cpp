// Request fingerprints: idem_canonical_json and idem_fingerprint (RFC 8785 + SHA-256), for jsonb
// and for raw JSON text, with the exclude/include path arguments.
//
// Two jsonb paths: without path filters in a UTF8 database, a direct walker writes the canonical
// text from the jsonb containers into one reused buffer (src/fingerprints_fast.cpp); otherwise
// the jsonb is fed through JsonbIteratorNext to the core's streaming CanonicalWriter.
//
// Boundary: the canonical writer (core/jcs.hpp) is one heap object per backend, created with
// new inside run_cpp and reused (reset() at the start of every call), so no C++ object with a
// destructor lives in these frames while PostgreSQL code runs. Every call into the core that
// can throw goes through run_cpp; the jsonb walks themselves (JsonbIteratorNext, numeric_out,
// encoding conversion, the fast walker) are plain PostgreSQL-style code between those calls.
#include "pg_cpp.hpp"
#include "arguments.hpp"
#include "fingerprints.hpp"
#include "fingerprints_fast.hpp"

#include "crypto.hpp"
#include "jcs.hpp"

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
}

namespace {

using idem::pg::call_cpp;
using idem::pg::PendingError;
using idem::pg::raise;
using idem::pg::run_cpp;
using idem::pg::fingerprints::CanonBuf;
using idem::pg::fingerprints::fast_canonical;
using idem::pg::fingerprints::release_buf;

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
    if (idem::pg::arg_null(fcinfo, argno))
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
    bool validate = GetDatabaseEncoding() != PG_UTF8;
    return call_cpp([&] {
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
        return g_writer;
    });
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

// True when the fast path applies: UTF8 database, no path filters.
bool fast_path_ok(const PathList *ex, const PathList *in) {
    return GetDatabaseEncoding() == PG_UTF8 && (ex == nullptr || ex->n == 0) &&
           (in == nullptr || in->n == 0);
}

// After a call: frees what the writer grew past its kept size for a huge document.
void release_writer(idem::jcs::CanonicalWriter *w) {
    if (IDEM_NOTHROW(w->shrink()))
        trim_heap();
}

// The raw JSON text argument as UTF-8 bytes.
const char *text_arg_utf8(FunctionCallInfo fcinfo, int *len) {
    text *t = PG_GETARG_TEXT_PP(0);
    return to_utf8(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t), len);
}

void parse_text(idem::jcs::CanonicalWriter *w, const char *s, int len) {
    call_cpp([&] { idem::jcs::parse_into(std::string_view(s, len), *w); });
}

// A digest as bytea.
bytea *bytea_of(const idem::Digest &d) {
    return idem::pg::copy_bytea(d.data(), d.size());
}

Datum digest_result(idem::jcs::CanonicalWriter *w) {
    idem::Digest d = call_cpp([&] { return w->digest(); });
    release_writer(w);
    PG_RETURN_BYTEA_P(bytea_of(d));
}

Datum text_result(idem::jcs::CanonicalWriter *w) {
    std::string_view r = call_cpp([&] { return w->result(); });
    const char *data = r.data();
    size_t size = r.size();
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
        idem::Digest d = call_cpp([&] { return idem::sha256(std::string_view(b->data, b->len)); });
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
    idem::Digest d =
        call_cpp([&] { return idem::jcs::fingerprint_into(std::string_view(s, len), *w); });
    release_writer(w);
    PG_RETURN_BYTEA_P(bytea_of(d));
}

namespace {

// The digest of raw body bytes (UTF-8 whatever the database encoding) after the path filters:
// true with it in *out, or false with the core's refusal in *pe.
bool bytea_digest(const char *s, size_t len, bool exact, const PathList *ex, const PathList *in,
                  bytea **out, PendingError *pe) {
    idem::jcs::CanonicalWriter *w = prepare_writer(exact, ex, in);
    idem::Digest d{};
    bool ok = run_cpp(*pe, [&] { d = idem::jcs::fingerprint_into(std::string_view(s, len), *w); });
    release_writer(w);
    if (ok)
        *out = bytea_of(d);
    return ok;
}

} // namespace

// idem_fingerprint(bytea, exclude text[], include text[], exact_numbers boolean) -> bytea: the
// raw request body as a driver sends bytes (psycopg's bytes, a Node Buffer, a Go []byte), read
// as UTF-8 whatever the database encoding; invalid UTF-8 is 22021, as in the text form.
IDEM_PG_FUNCTION(idem_fingerprint_bytea) {
    if (PG_ARGISNULL(0))
        PG_RETURN_NULL();
    bool exact = get_exact(fcinfo, 3);
    PathList ex, in;
    filter_args(fcinfo, &ex, &in);
    bytea *b = PG_GETARG_BYTEA_PP(0);
    bytea *out = nullptr;
    PendingError pe;
    if (!bytea_digest(VARDATA_ANY(b), VARSIZE_ANY_EXHDR(b), exact, &ex, &in, &out, &pe))
        raise(pe);
    PG_RETURN_BYTEA_P(out);
}

// (fingerprints.hpp) idem_fingerprint(bytea) of a request body for idem_http_begin, whose refusal
// is the sender's 400 rather than an error.
bool idem::pg::fingerprints::body_fingerprint(const char *s, size_t len, bytea **out,
                                              PendingError *pe) {
    return bytea_digest(s, len, false, nullptr, nullptr, out, pe);
}
