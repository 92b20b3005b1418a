// The HTTP contract (docs/records.md "The HTTP contract"): idem_http_begin, idem_http_end and
// idem_http_release, what every client package calls instead of deciding anything itself, and
// the rules they apply, idem_http_scope, idem_http_stored and idem_http_problem. The end and the
// release are in src/http_contract_end.cpp.
//
// Each call is one C function, not SQL around idem_claim and idem_complete: the claim and the
// complete are called directly (records.hpp), so the request pays no PL/pgSQL, no executor of
// its own and no search_path switch around them (bench/RESULTS.md, "HTTP: the packages against
// the record written by hand"). EXECUTE on idem_http_begin is the right to claim a key of the
// scope it derives, on idem_http_end to complete it; the tenant bindings (docs/tenants.md)
// apply through the claim's and the complete's own argument checks.
#include "http_answer_row.hpp"
#include "fingerprints.hpp"
#include "key_header.hpp"
#include "records.hpp"

#include "crypto.hpp"
#include "http_contract.hpp"

extern "C" {
#include "catalog/pg_type.h"
#include "mb/pg_wchar.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
}

namespace {

namespace http = idem::http;

// Columns of idem_http_begin_result.
enum BeginOut {
    B_SCOPE,
    B_KEY,
    B_ATTEMPT,
    B_RUN,
    B_RECLAIMED,
    B_STATUS,
    B_HEADERS,
    B_BODY,
    B_COUNT
};

std::string_view text_view(Datum d) {
    text *t = DatumGetTextPP(d);
    return std::string_view(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
}

// The RFC 9457 problem body for status with detail (server encoding; NULL: none), as UTF-8 bytes.
bytea *problem_body(int status, const char *detail) {
    size_t dlen = detail != nullptr ? strlen(detail) : 0;
    bytea *out = static_cast<bytea *>(palloc(VARHDRSZ + 128 + 6 * dlen));
    char *data = VARDATA(out);
    size_t n = idem::pg::call_cpp([&] {
        std::string b = http::problem_body(status, detail != nullptr,
                                           std::string_view(detail ? detail : "", dlen));
        memcpy(data, b.data(), b.size());
        return b.size();
    });
    char *u = pg_server_to_any(data, static_cast<int>(n), PG_UTF8);
    if (u != data)
        return idem::pg::copy_bytea(u, strlen(u));
    SET_VARSIZE(out, VARHDRSZ + n);
    return out;
}

// The scope of a request (NULL Datum without one), as idem_http_scope.
Datum request_scope(bool principal_null, Datum principal, Datum operation, bool shared) {
    std::string_view p = principal_null ? std::string_view() : text_view(principal);
    std::string_view op = text_view(operation);
    text *out = static_cast<text *>(palloc(VARHDRSZ + 3 * p.size() + 2 + op.size()));
    char *data = VARDATA(out);
    long n = idem::pg::call_cpp([&] {
        std::string s;
        if (!http::request_scope(!principal_null, p, op, shared, s))
            return -1L;
        memcpy(data, s.data(), s.size());
        return static_cast<long>(s.size());
    });
    if (n < 0)
        return (Datum)0;
    SET_VARSIZE(out, VARHDRSZ + n);
    return PointerGetDatum(out);
}

// An error of the sender's input (the header, the body): a 400, not an error of the call.
bool senders_fault(const idem::pg::PendingError &pe) {
    // class 22, data exception (the class of 22023, 22001, 22021, 22P02, ...), or 54000 / 54001
    int data_exception = ERRCODE_TO_CATEGORY(ERRCODE_INVALID_PARAMETER_VALUE);
    return !pe.interrupted && (ERRCODE_TO_CATEGORY(pe.sqlerrcode) == data_exception ||
                               pe.sqlerrcode == ERRCODE_STATEMENT_TOO_COMPLEX ||
                               pe.sqlerrcode == ERRCODE_PROGRAM_LIMIT_EXCEEDED);
}

// The 400 detail of a refused header or body: the error's message, then its detail.
const char *refusal(const idem::pg::PendingError &pe) {
    return pe.detail[0] != '\0' ? psprintf("%s: %s", pe.message, pe.detail) : pstrdup(pe.message);
}

// The fingerprint of the raw body: SHA-256 of nothing for an absent or empty one.
bool body_fingerprint(bool body_null, Datum body, Datum *fp, idem::pg::PendingError *pe) {
    bytea *b = body_null ? nullptr : DatumGetByteaPP(body);
    bytea *out = nullptr;
    if (b == nullptr || VARSIZE_ANY_EXHDR(b) == 0) {
        idem::Digest d = idem::pg::call_cpp([] { return idem::sha256(std::string_view()); });
        out = idem::pg::copy_bytea(d.data(), d.size());
    } else if (!idem::pg::fingerprints::body_fingerprint(VARDATA_ANY(b), VARSIZE_ANY_EXHDR(b), &out,
                                                         pe)) {
        return false;
    }
    *fp = PointerGetDatum(out);
    return true;
}

// The answer of a problem into the begin row.
void set_problem(Datum *v, bool *n, int status, const char *detail) {
    v[B_STATUS] = Int32GetDatum(status);
    v[B_HEADERS] = idem::pg::http_answer::problem_headers(false, 0);
    v[B_BODY] = PointerGetDatum(problem_body(status, detail));
    n[B_STATUS] = n[B_HEADERS] = n[B_BODY] = false;
}

// Reads the key and the fingerprint; false with the 400 set in the row when the sender's input
// is refused.
bool read_request(FunctionCallInfo fcinfo, Datum *v, bool *n, Datum *fp) {
    if (PG_ARGISNULL(2)) {
        set_problem(v, n, 400, "An Idempotency-Key header is required.");
        return false;
    }
    idem::pg::PendingError pe;
    bool ok =
        idem::pg::key_header::parse(PG_GETARG_DATUM(2), &v[B_KEY], &pe) &&
        body_fingerprint(PG_ARGISNULL(3), PG_ARGISNULL(3) ? (Datum)0 : PG_GETARG_DATUM(3), fp, &pe);
    if (ok) {
        n[B_KEY] = false;
        return true;
    }
    if (!senders_fault(pe))
        idem::pg::raise(pe);
    set_problem(v, n, 400, refusal(pe));
    return false;
}

// Claims (scope, key) as idem_claim(scope, key, fingerprint, lease, ttl, wait => false) does;
// the row's run, attempt and reclaimed, or the answer to send.
void claim(FunctionCallInfo fcinfo, Datum fp, Datum *v, bool *n) {
    LOCAL_FCINFO(c, 6);
    InitFunctionCallInfoData(*c, nullptr, 6, InvalidOid, nullptr, nullptr);
    Datum args[6] = {v[B_SCOPE],         v[B_KEY],           fp,
                     PG_GETARG_DATUM(4), PG_GETARG_DATUM(5), BoolGetDatum(false)};
    bool nulls[6] = {false, false, false, PG_ARGISNULL(4), PG_ARGISNULL(5), false};
    for (int i = 0; i < 6; i++) {
        c->args[i].value = args[i];
        c->args[i].isnull = nulls[i];
    }
    Datum res[idem::pg::records::CLAIM_COLUMNS];
    bool res_nulls[idem::pg::records::CLAIM_COLUMNS];
    idem::pg::records::claim_row(c, res, res_nulls);
    std::string_view outcome = text_view(res[0]);
    if (outcome == "claimed" || outcome == "reclaimed") {
        v[B_RUN] = BoolGetDatum(true);
        v[B_ATTEMPT] = res[1]; // the fencing token
        v[B_RECLAIMED] = BoolGetDatum(outcome == "reclaimed");
        n[B_ATTEMPT] = n[B_RECLAIMED] = false;
        return;
    }
    idem::pg::http_answer::claim_answer(res, res_nulls, &v[B_STATUS], &n[B_STATUS]);
}

} // namespace

// idem_http_begin(principal, operation, key_header, body, lease, ttl, shared_key_space) ->
// idem_http_begin_result: the scope, the key, the fingerprint and a claim that never waits.
IDEM_PG_FUNCTION(idem_http_begin) {
    if (PG_ARGISNULL(1) || VARSIZE_ANY_EXHDR(PG_GETARG_TEXT_PP(1)) == 0)
        ereport(ERROR,
                (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                 errmsg("idem_http_begin needs an operation"),
                 errhint("Pass the method and the route's template, e.g. 'POST /v1/payments'.")));
    Datum v[B_COUNT];
    bool n[B_COUNT];
    for (int i = 0; i < B_COUNT; i++) {
        v[i] = (Datum)0;
        n[i] = true;
    }
    v[B_RUN] = BoolGetDatum(false);
    n[B_RUN] = false;
    bool shared = !PG_ARGISNULL(6) && PG_GETARG_BOOL(6);
    v[B_SCOPE] = request_scope(PG_ARGISNULL(0), PG_ARGISNULL(0) ? (Datum)0 : PG_GETARG_DATUM(0),
                               PG_GETARG_DATUM(1), shared);
    n[B_SCOPE] = v[B_SCOPE] == (Datum)0;
    Datum fp = (Datum)0;
    if (n[B_SCOPE])
        set_problem(v, n, 403,
                    "The request has no authenticated principal to keep its Idempotency-Key for.");
    else if (read_request(fcinfo, v, n, &fp))
        claim(fcinfo, fp, v, n);
    return idem::pg::result_row(fcinfo, v, n);
}

// idem_http_scope(principal, operation, shared_key_space) -> text: NULL without a principal.
IDEM_PG_FUNCTION(idem_http_scope) {
    if (PG_ARGISNULL(1))
        PG_RETURN_NULL();
    bool shared = !PG_ARGISNULL(2) && PG_GETARG_BOOL(2);
    Datum s = request_scope(PG_ARGISNULL(0), PG_ARGISNULL(0) ? (Datum)0 : PG_GETARG_DATUM(0),
                            PG_GETARG_DATUM(1), shared);
    if (s == (Datum)0)
        PG_RETURN_NULL();
    PG_RETURN_DATUM(s);
}

// idem_http_stored(status) -> boolean.
IDEM_PG_FUNCTION(idem_http_stored) {
    int32 status = PG_GETARG_INT32(0);
    PG_RETURN_BOOL(IDEM_NOTHROW(http::stored_status(status)));
}

// idem_http_problem(status, detail, retry_after) -> idem_http_answer_result; NULL for a NULL
// status.
IDEM_PG_FUNCTION(idem_http_problem) {
    if (PG_ARGISNULL(0))
        PG_RETURN_NULL(); // no answer (idem_http_errors' IK003 row)
    int32 status = PG_GETARG_INT32(0);
    const char *detail = PG_ARGISNULL(1) ? nullptr : text_to_cstring(PG_GETARG_TEXT_PP(1));
    Datum v[3] = {Int32GetDatum(status),
                  idem::pg::http_answer::problem_headers(!PG_ARGISNULL(2),
                                                         PG_ARGISNULL(2) ? 0 : PG_GETARG_INT32(2)),
                  PointerGetDatum(problem_body(status, detail))};
    bool n[3] = {false, false, false};
    return idem::pg::result_row(fcinfo, v, n);
}
