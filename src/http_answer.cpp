// idem_http_answer: the HTTP answer (status, headers, body) of a claim's outcome, or of what is
// stored for a key now (the IK003 path), so that no client computes Retry-After,
// Idempotent-Replayed or the replayed body itself (docs/records.md "The HTTP answer"). The
// decision is the core's (core/http_answer.hpp); this file reads the stored result and builds
// the jsonb headers and the bytea body.
#include "http_answer_row.hpp"
#include "records.hpp"

#include "http_answer.hpp"

extern "C" {
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"
}

namespace {

namespace http = idem::http;
namespace records = idem::pg::records;

// The stored result a replay answers with, as Datums in the caller's memory context.
struct StoredResult {
    http::Kind kind;
    bool status_null, response_null, lease_null, body_null, headers_null;
    Datum status, response, lease, body, headers;
};

JsonbValue jstring(const char *s, size_t len) {
    JsonbValue v;
    v.type = jbvString;
    v.val.string.val = const_cast<char *>(s);
    v.val.string.len = static_cast<int>(len);
    return v;
}

void push_pair(JsonbParseState **st, std::string_view name, const char *value, size_t len) {
    JsonbValue k = jstring(name.data(), name.size());
    JsonbValue v = jstring(value, len);
    pushJsonbValue(st, WJB_KEY, &k);
    pushJsonbValue(st, WJB_VALUE, &v);
}

std::string_view key_of(const JsonbValue &v) noexcept {
    return std::string_view(v.val.string.val, static_cast<size_t>(v.val.string.len));
}

// Whether the stored headers (a JSON object) name Content-Type, in any case.
bool names_content_type(Jsonb *jb) {
    if (!JB_ROOT_IS_OBJECT(jb))
        return false;
    JsonbIterator *it = JsonbIteratorInit(&jb->root);
    JsonbValue v;
    JsonbIteratorToken tok;
    bool found = false;
    while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
        if (tok == WJB_KEY &&
            IDEM_NOTHROW(idem::http::header_name_equal(key_of(v), idem::http::CONTENT_TYPE)))
            found = true;
    return found;
}

// The stored headers but a stored Idempotent-Replayed (any case), then Idempotent-Replayed:
// true, and Content-Type: application/json when asked.
Datum replay_headers(bool stored_null, Datum stored, bool json_type) {
    JsonbParseState *st = nullptr;
    pushJsonbValue(&st, WJB_BEGIN_OBJECT, nullptr);
    Jsonb *jb = stored_null ? nullptr : DatumGetJsonbP(stored);
    if (jb != nullptr && JB_ROOT_IS_OBJECT(jb)) {
        JsonbIterator *it = JsonbIteratorInit(&jb->root);
        JsonbValue k, v;
        JsonbIteratorToken tok;
        while ((tok = JsonbIteratorNext(&it, &k, true)) != WJB_DONE) {
            if (tok != WJB_KEY)
                continue;
            JsonbIteratorNext(&it, &v, true);
            if (IDEM_NOTHROW(idem::http::header_name_equal(key_of(k), idem::http::REPLAYED_HEADER)))
                continue;
            pushJsonbValue(&st, WJB_KEY, &k);
            pushJsonbValue(&st, WJB_VALUE, &v);
        }
    }
    push_pair(&st, idem::http::REPLAYED_HEADER, "true", 4);
    if (json_type)
        push_pair(&st, idem::http::CONTENT_TYPE, idem::http::JSON_TYPE.data(),
                  idem::http::JSON_TYPE.size());
    return JsonbPGetDatum(JsonbValueToJsonb(pushJsonbValue(&st, WJB_END_OBJECT, nullptr)));
}

} // namespace

// (src/http_answer_row.hpp) Content-Type: application/problem+json, and Retry-After when asked.
Datum idem::pg::http_answer::problem_headers(bool has_retry_after, int64 retry_after) {
    JsonbParseState *st = nullptr;
    pushJsonbValue(&st, WJB_BEGIN_OBJECT, nullptr);
    push_pair(&st, idem::http::CONTENT_TYPE, idem::http::PROBLEM_TYPE.data(),
              idem::http::PROBLEM_TYPE.size());
    if (has_retry_after) {
        // pushJsonbValue keeps the pointer until JsonbValueToJsonb: the digits live in palloc'd
        // memory, not in a stack buffer that ends with this block.
        char *digits = psprintf(INT64_FORMAT, retry_after);
        push_pair(&st, idem::http::RETRY_AFTER, digits, strlen(digits));
    }
    return JsonbPGetDatum(JsonbValueToJsonb(pushJsonbValue(&st, WJB_END_OBJECT, nullptr)));
}

namespace {

// The replayed body: the exact bytes stored, else the jsonb response as UTF-8 text, else empty.
Datum replay_body(const StoredResult &r) {
    if (!r.body_null)
        return r.body;
    if (r.response_null)
        return PointerGetDatum(idem::pg::copy_bytea("", 0));
    Jsonb *jb = DatumGetJsonbP(r.response);
    char *s = JsonbToCString(nullptr, &jb->root, VARSIZE(jb));
    int len = static_cast<int>(strlen(s));
    char *u = pg_server_to_any(s, len, PG_UTF8);
    if (u != s)
        len = static_cast<int>(strlen(u));
    return PointerGetDatum(idem::pg::copy_bytea(u, static_cast<size_t>(len)));
}

// The answer (status, headers, body) of a stored result into values and nulls.
void answer_values(const StoredResult &r, Datum *values, bool *nulls) {
    idem::http::Stored s{};
    s.has_status = !r.status_null;
    s.status = r.status_null ? 0 : DatumGetInt32(r.status);
    s.has_body = !r.body_null;
    s.has_json = !r.response_null;
    s.has_content_type = !r.headers_null && r.kind == http::Kind::Replay &&
                         names_content_type(DatumGetJsonbP(r.headers));
    s.has_lease = !r.lease_null;
    s.lease_expires_us = r.lease_null ? 0 : DatumGetTimestampTz(r.lease);
    TimestampTz now = GetCurrentTimestamp();
    http::Answer a = IDEM_NOTHROW(idem::http::answer(r.kind, s, now));

    for (int i = 0; i < 3; i++) {
        values[i] = (Datum)0;
        nulls[i] = true;
    }
    if (a.has_answer) {
        values[0] = Int32GetDatum(a.status);
        if (a.replay_headers) {
            values[1] = replay_headers(r.headers_null, r.headers, a.json_type);
            values[2] = replay_body(r);
        } else {
            values[1] = idem::pg::http_answer::problem_headers(a.retry_after > 0, a.retry_after);
            values[2] = PointerGetDatum(idem::pg::copy_bytea(a.problem, strlen(a.problem)));
        }
        nulls[0] = nulls[1] = nulls[2] = false;
    }
}

// The answer row (status, headers, body) of a stored result.
Datum answer_row(FunctionCallInfo fcinfo, const StoredResult &r) {
    Datum values[3];
    bool nulls[3];
    answer_values(r, values, nulls);
    return idem::pg::result_row(fcinfo, values, nulls);
}

// Attribute numbers of idem_claim_result (src/sql/idempotency.sql).
enum ClaimAttr {
    A_OUTCOME = 1,
    A_RESPONSE = 4,
    A_RESPONSE_STATUS = 5,
    A_LEASE = 6,
    A_BODY = 8,
    A_HEADERS = 9
};

http::Kind outcome_kind(bool isnull, Datum outcome) {
    if (isnull)
        return http::Kind::RunHandler;
    text *t = DatumGetTextPP(outcome);
    std::string_view o(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
    return IDEM_NOTHROW(idem::http::kind_of(o));
}

} // namespace

// (src/http_answer_row.hpp) The answer of idem_claim's result row.
void idem::pg::http_answer::claim_answer(const Datum *claim, const bool *claim_nulls, Datum *values,
                                         bool *nulls) {
    StoredResult r{};
    r.kind = outcome_kind(claim_nulls[A_OUTCOME - 1], claim[A_OUTCOME - 1]);
    auto get = [&](int attno, Datum *v, bool *isnull) {
        *isnull = claim_nulls[attno - 1];
        *v = claim[attno - 1];
    };
    get(A_RESPONSE_STATUS, &r.status, &r.status_null);
    get(A_RESPONSE, &r.response, &r.response_null);
    get(A_LEASE, &r.lease, &r.lease_null);
    get(A_BODY, &r.body, &r.body_null);
    get(A_HEADERS, &r.headers, &r.headers_null);
    answer_values(r, values, nulls);
}

// idem_http_answer(claim idem_claim_result) -> (status, headers, body): NULLs for claimed and
// reclaimed (run the handler), else what to send.
IDEM_PG_FUNCTION(idem_http_answer_claim) {
    StoredResult r{};
    r.kind = http::Kind::RunHandler;
    r.status_null = r.response_null = r.lease_null = r.body_null = r.headers_null = true;
    if (!PG_ARGISNULL(0)) {
        HeapTupleHeader t = PG_GETARG_HEAPTUPLEHEADER(0);
        bool isnull;
        Datum outcome = GetAttributeByNum(t, A_OUTCOME, &isnull);
        r.kind = outcome_kind(isnull, outcome);
        r.status = GetAttributeByNum(t, A_RESPONSE_STATUS, &r.status_null);
        r.response = GetAttributeByNum(t, A_RESPONSE, &r.response_null);
        r.lease = GetAttributeByNum(t, A_LEASE, &r.lease_null);
        r.body = GetAttributeByNum(t, A_BODY, &r.body_null);
        r.headers = GetAttributeByNum(t, A_HEADERS, &r.headers_null);
    }
    return answer_row(fcinfo, r);
}

// idem_http_answer(scope, key) -> (status, headers, body): the answer of what is stored for the
// key now, as idem_claim with the same fingerprint would give it: a finished operation (completed,
// or failed and not retryable) is replayed, a processing one under a live lease is in progress,
// anything else (no live record, a retryable failure, an expired lease) is NULLs: claim it.
IDEM_PG_FUNCTION(idem_http_answer_key) {
    Datum scope, key;
    records::scope_key_args(fcinfo, &scope, &key);
    TimestampTz now = GetCurrentTimestamp();
    MemoryContext outer = CurrentMemoryContext;
    StoredResult r{};
    r.kind = http::Kind::RunHandler;
    r.status_null = r.response_null = r.lease_null = r.body_null = r.headers_null = true;

    idem::pg::SavedUser su;
    idem::pg::enter(&su);
    Datum keyv[2] = {scope, key};
    uint64 n = idem::pg::exec(records::plan_get(), keyv, nullptr, true, 0);
    for (uint64 row = 0; row < n; row++) {
        idem::RecordState st = records::read_state(row);
        idem::ClaimDecision d =
            idem::pg::call_cpp([&] { return idem::decide_claim(st, true, now); });
        if (d == idem::ClaimDecision::Fresh)
            continue; // expired (REPEATABLE READ can see it beside the live one)
        r.kind = d == idem::ClaimDecision::Replay       ? http::Kind::Replay
                 : d == idem::ClaimDecision::InProgress ? http::Kind::Busy
                                                        : http::Kind::RunHandler;
        r.status =
            records::copy_col(outer, records::C_RESPONSE_STATUS, 4, true, &r.status_null, row);
        r.response =
            records::copy_col(outer, records::C_RESPONSE, -1, false, &r.response_null, row);
        r.lease = records::copy_col(outer, records::C_LEASE_EXPIRES, 8, true, &r.lease_null, row);
        r.body = records::copy_col(outer, records::C_RESPONSE_BODY, -1, false, &r.body_null, row);
        r.headers =
            records::copy_col(outer, records::C_RESPONSE_HEADERS, -1, false, &r.headers_null, row);
        break;
    }
    idem::pg::leave(&su);
    return answer_row(fcinfo, r);
}
