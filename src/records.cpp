// Idempotency-Key records: idem_complete, idem_fail, idem_heartbeat, idem_lookup, and what they
// share with idem_claim (src/records_claim.cpp): the record's columns, the arguments, the core's
// checks. Each of these is one saved SPI statement on the key's record; only when it matches no
// row is the record read to tell why (IK001 / IK002 / IK003, or a repeat of the same finish).
#include "records.hpp"
#include "records_direct.hpp"
#include "arguments.hpp"
#include "sqlstates.hpp"
#include "limits.hpp"
#include "counters.hpp"
#include "settings.hpp"
#include "tenants.hpp"

extern "C" {
#include "funcapi.h"
#include "utils/datum.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
}

namespace idem::pg::records {

namespace {
const char *const SQL_GET = "SELECT " RECORD_COLUMNS " FROM idempotency.records r" WHERE_KEY;
SPIPlanPtr plan_get_slot;
} // namespace

SPIPlanPtr plan_get() {
    return saved_plan(&plan_get_slot, SQL_GET, 2, KEY_TYPES);
}

void scope_key_args(FunctionCallInfo fcinfo, Datum *scope, Datum *key) {
    require_arg(fcinfo, 0, "scope");
    require_arg(fcinfo, 1, "key",
                "A request without an Idempotency-Key must be rejected (HTTP 400), not claimed.");
    text *s = PG_GETARG_TEXT_PP(0);
    text *k = PG_GETARG_TEXT_PP(1);
    size_t slen = VARSIZE_ANY_EXHDR(s), klen = VARSIZE_ANY_EXHDR(k);
    call_cpp([&] {
        idem::validate_name("scope", slen, idem::max_scope_bytes);
        idem::validate_name("key", klen, idem::max_key_bytes);
    });
    *scope = PointerGetDatum(s);
    *key = PointerGetDatum(k);
    tenants::check(tenants::SCOPE, *scope); // 42501 for another tenant's scope (docs/tenants.md)
}

int32 attempt_arg(FunctionCallInfo fcinfo, int argno) {
    require_arg(fcinfo, argno, "attempt");
    int32 attempt = PG_GETARG_INT32(argno);
    call_cpp([&] { idem::validate_attempt(attempt); });
    return attempt;
}

idem::ClaimTimes claim_times(TimestampTz now, int64 lease_us, int64 ttl_us) {
    return call_cpp([&] { return idem::claim_times(now, lease_us, ttl_us); });
}

idem::RecordState read_state(uint64 row) {
    bool isnull;
    idem::RecordState st{};
    text *status = DatumGetTextPP(col(row, C_STATUS, &isnull));
    switch (*VARDATA_ANY(status)) {
    case 'p':
        st.status = idem::Status::Processing;
        break;
    case 'c':
        st.status = idem::Status::Completed;
        break;
    default:
        st.status = idem::Status::Failed;
        break;
    }
    st.retryable = DatumGetBool(col(row, C_RETRYABLE, &isnull));
    st.attempt = DatumGetInt32(col(row, C_ATTEMPT, &isnull));
    Datum lease = col(row, C_LEASE_EXPIRES, &isnull);
    st.has_lease = !isnull;
    st.lease_expires = isnull ? 0 : DatumGetTimestampTz(lease);
    st.expires = DatumGetTimestampTz(col(row, C_EXPIRES, &isnull));
    return st;
}

Datum copy_col(MemoryContext cxt, int attno, int16 typlen, bool byval, bool *isnull, uint64 row) {
    Datum d = col(row, attno, isnull);
    if (*isnull)
        return (Datum)0;
    MemoryContext old = MemoryContextSwitchTo(cxt);
    d = datumCopy(d, byval, typlen);
    MemoryContextSwitchTo(old);
    return d;
}

bool bytea_equal(bool a_null, Datum a, bool b_null, Datum b) {
    if (a_null || b_null)
        return a_null == b_null;
    bytea *x = DatumGetByteaPP(a);
    bytea *y = DatumGetByteaPP(b);
    return VARSIZE_ANY_EXHDR(x) == VARSIZE_ANY_EXHDR(y) &&
           memcmp(VARDATA_ANY(x), VARDATA_ANY(y), VARSIZE_ANY_EXHDR(x)) == 0;
}

} // namespace idem::pg::records

namespace {

using namespace idem::pg;
using namespace idem::pg::records;

// Stores the outcome of the owning attempt; the record is then kept for at least as long
// after the finish as its TTL window was long at the claim. The new expiry is computed in UTC
// (timestamp arithmetic, a day is 24 hours) with immutable functions only: Citus refuses STABLE
// ones (timestamptz + interval) on columns of a distributed table (0A000).
#define FINISH_SET                                                                                 \
    "UPDATE idempotency.records AS r SET status = $4, retryable = $5, resource_id = $6, "          \
    "response = $7, response_status = $8, updated_at = $9, lease_expires_at = NULL, "              \
    "expires_at = GREATEST(r.expires_at, pg_catalog.timezone('UTC'::pg_catalog.text, "             \
    "pg_catalog.timezone('UTC'::pg_catalog.text, $9) OPERATOR(pg_catalog.+) "                      \
    "(r.expires_at OPERATOR(pg_catalog.-) r.created_at)))"
#define FINISH_WHERE                                                                               \
    WHERE_KEY " AND r.attempt OPERATOR(pg_catalog.=) $3 AND r.status OPERATOR(pg_catalog.=) "      \
              "'processing'"
const char *const SQL_FINISH =
    FINISH_SET ", response_body = $10, response_headers = $11" FINISH_WHERE;
const Oid FINISH_TYPES[] = {TEXTOID,  TEXTOID, INT4OID,        TEXTOID,  BOOLOID, TEXTOID,
                            JSONBOID, INT4OID, TIMESTAMPTZOID, BYTEAOID, JSONBOID};

const char *const SQL_HEARTBEAT =
    "UPDATE idempotency.records AS r SET lease_expires_at = $5, updated_at = $4, "
    "expires_at = GREATEST(r.expires_at, $5)" WHERE_KEY
    " AND r.attempt OPERATOR(pg_catalog.=) $3 AND r.status OPERATOR(pg_catalog.=) 'processing'";
const Oid HEARTBEAT_TYPES[] = {TEXTOID, TEXTOID, INT4OID, TIMESTAMPTZOID, TIMESTAMPTZOID};

SPIPlanPtr plan_finish, plan_heartbeat;

// NULL-aware byte-wise equality of two text values (no collation is involved).
bool text_equal(bool a_null, Datum a, bool b_null, Datum b) {
    if (a_null || b_null)
        return a_null == b_null;
    text *x = DatumGetTextPP(a);
    text *y = DatumGetTextPP(b);
    return VARSIZE_ANY_EXHDR(x) == VARSIZE_ANY_EXHDR(y) &&
           memcmp(VARDATA_ANY(x), VARDATA_ANY(y), VARSIZE_ANY_EXHDR(x)) == 0;
}

// NULL-aware jsonb equality (JSON null and SQL NULL differ).
bool jsonb_equal(bool a_null, Datum a, bool b_null, Datum b) {
    if (a_null || b_null)
        return a_null == b_null;
    return DatumGetBool(DirectFunctionCall2(jsonb_eq, a, b));
}

// NULL-aware int4 equality.
bool int4_equal(bool a_null, Datum a, bool b_null, Datum b) {
    if (a_null || b_null)
        return a_null == b_null;
    return DatumGetInt32(a) == DatumGetInt32(b);
}

// Raised when a record kept changing under a complete/fail/heartbeat for ten rounds.
[[noreturn]] void give_up_changing(const char *action) {
    ereport(ERROR, (errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
                    errmsg("could not %s: the record kept changing concurrently", action),
                    errhint("Retry the transaction.")));
    pg_unreachable();
}

using Outcome = idem::pg::RecordOutcome;

// True when the record read by explain_refusal (SPI row 0) holds exactly outcome o.
bool same_outcome(const idem::RecordState &st, const char *stored, const Outcome &o) {
    bool isnull;
    bool same = strcmp(stored, o.status) == 0 && st.retryable == o.retryable;
    Datum v = col(0, C_RESOURCE_ID, &isnull);
    same = same && text_equal(isnull, v, o.rid_null, o.rid);
    v = col(0, C_RESPONSE, &isnull);
    same = same && jsonb_equal(isnull, v, o.resp_null, o.resp);
    v = col(0, C_RESPONSE_STATUS, &isnull);
    same = same && int4_equal(isnull, v, o.st_null, o.st);
    v = col(0, C_RESPONSE_BODY, &isnull);
    same = same && bytea_equal(isnull, v, o.body_null, o.body);
    v = col(0, C_RESPONSE_HEADERS, &isnull);
    return same && jsonb_equal(isnull, v, o.headers_null, o.headers);
}

// The record of keyv (IK001 when there is none), read into SPI row 0.
idem::RecordState read_or_not_found(Datum *keyv, const char *action) {
    if (exec(plan_get(), keyv, nullptr, false, 1) == 0)
        ereport(ERROR, (errcode(IK_NOT_FOUND), errmsg("idempotency key not found"),
                        errdetail("No record exists for scope \"%s\" and key \"%s\": it was "
                                  "never claimed, or it expired and was purged.",
                                  TextDatumGetCString(keyv[0]), TextDatumGetCString(keyv[1])),
                        errhint("Only the caller whose idem_claim returned this attempt can "
                                "%s it.",
                                action)));
    return read_state();
}

// Why a complete/fail/heartbeat of (scope, key, attempt) matched no processing row: raises
// the documented error, returns true when the call repeats what is already stored (a no-op;
// finish is the outcome of a complete/fail, NULL for a heartbeat), or false when the record
// changed between the update and this read (try again).
bool explain_refusal(Datum *keyv, int32 attempt, const char *action, const Outcome *finish) {
    idem::RecordState st = read_or_not_found(keyv, action);
    if (st.status == idem::Status::Processing) {
        if (attempt > st.attempt)
            ereport(ERROR, (errcode(IK_FENCED), errmsg("attempt %d does not own this key", attempt),
                            errdetail("The current attempt is %d; attempt %d was never handed out.",
                                      st.attempt, attempt),
                            errhint("Pass the attempt that your idem_claim returned.")));
        if (st.attempt != attempt) {
            idem::operations::count(idem::operations::RefusedFenced);
            ereport(ERROR,
                    (errcode(IK_FENCED), errmsg("attempt %d no longer owns this key", attempt),
                     errdetail("The current attempt is %d: the lease expired and another "
                               "caller took the operation over.",
                               st.attempt),
                     errhint("Do not report this attempt's result; the new owner decides the "
                             "outcome.")));
        }
        return false; // the record changed between the update and this read: try again
    }
    const char *stored = st.status == idem::Status::Completed ? "completed" : "failed";
    if (st.attempt != attempt) {
        idem::operations::count(idem::operations::RefusedFinished);
        ereport(ERROR, (errcode(IK_FINISHED),
                        errmsg("the operation was already %s by attempt %d", stored, st.attempt),
                        errdetail("Attempt %d no longer owns this key.", attempt),
                        errhint("Do not report this attempt's result; replay the stored one.")));
    }
    if (finish != nullptr && same_outcome(st, stored, *finish))
        return true; // the same call again: nothing to do
    idem::operations::count(idem::operations::RefusedFinished);
    if (finish != nullptr)
        ereport(ERROR, (errcode(IK_FINISHED),
                        errmsg("the operation was already %s with a different result", stored),
                        errdetail("Attempt %d finished it before; a finished record is never "
                                  "changed.",
                                  attempt)));
    ereport(ERROR, (errcode(IK_FINISHED), errmsg("the operation was already %s", stored),
                    errdetail("A finished operation has no lease to %s.", action)));
    pg_unreachable();
}

// The response_body and response_headers arguments of idem_complete / idem_fail (arguments 6
// and 7) into o, checked.
void body_args(FunctionCallInfo fcinfo, Outcome *o) {
    o->body_null = PG_ARGISNULL(6);
    o->body = o->body_null ? (Datum)0 : PG_GETARG_DATUM(6);
    o->headers_null = PG_ARGISNULL(7);
    o->headers = o->headers_null ? (Datum)0 : PG_GETARG_DATUM(7);
    if (!o->headers_null)
        idem::pg::limits::check_response_headers(PG_GETARG_JSONB_P(7));
}

// Shared body of idem_complete and idem_fail.
Datum finish(FunctionCallInfo fcinfo, Outcome o, int resp_arg, int status_arg, const char *action) {
    Datum scope, key;
    scope_key_args(fcinfo, &scope, &key);
    int32 attempt = attempt_arg(fcinfo, 2);
    o.resp_null = PG_ARGISNULL(resp_arg);
    o.resp = o.resp_null ? (Datum)0 : PG_GETARG_DATUM(resp_arg);
    o.st_null = PG_ARGISNULL(status_arg);
    o.st = o.st_null ? (Datum)0 : PG_GETARG_DATUM(status_arg);
    body_args(fcinfo, &o);
    idem::pg::limits::check_size(o.rid_null, o.rid, idem::pg::limits::Cap::Response, "resource_id");
    idem::pg::limits::check_size(o.resp_null, o.resp, idem::pg::limits::Cap::Response, "response");
    idem::pg::limits::check_size(o.body_null, o.body, idem::pg::limits::Cap::Response,
                                 "response_body");
    TimestampTz now = GetCurrentTimestamp();
    // The direct update (src/direct_update.cpp); any other case, a refusal or a no-op repeat
    // among them, is decided by the SQL statement below.
    if (idem::settings::direct_access_on() &&
        finish_direct(scope, key, attempt, o, now) == idem::pg::direct::UpdateResult::Updated)
        PG_RETURN_BOOL(true);

    idem::pg::SavedUser su;
    idem::pg::enter(&su);
    SPIPlanPtr plan = saved_plan(&plan_finish, SQL_FINISH, 11, FINISH_TYPES);
    Datum v[11] = {scope,
                   key,
                   Int32GetDatum(attempt),
                   CStringGetTextDatum(o.status),
                   BoolGetDatum(o.retryable),
                   o.rid,
                   o.resp,
                   o.st,
                   TimestampTzGetDatum(now),
                   o.body,
                   o.headers};
    char n[11] = {' ',
                  ' ',
                  ' ',
                  ' ',
                  ' ',
                  o.rid_null ? 'n' : ' ',
                  o.resp_null ? 'n' : ' ',
                  o.st_null ? 'n' : ' ',
                  ' ',
                  o.body_null ? 'n' : ' ',
                  o.headers_null ? 'n' : ' '};
    bool stored = false;
    for (int round = 0;; round++) {
        if (round == 10)
            give_up_changing(action);
        stored = exec(plan, v, n, false, 0) == 1;
        Datum keyv[2] = {scope, key};
        if (stored || explain_refusal(keyv, attempt, action, &o))
            break;
    }
    idem::pg::leave(&su);
    PG_RETURN_BOOL(stored);
}

} // namespace

// idem_complete(scope, key, attempt, resource_id, response, response_status, response_body,
// response_headers): stores a result.
IDEM_PG_FUNCTION(idem_complete) {
    Outcome o{"completed", false, PG_ARGISNULL(3), PG_ARGISNULL(3) ? (Datum)0 : PG_GETARG_DATUM(3)};
    return finish(fcinfo, o, 4, 5, "complete");
}

// idem_fail(scope, key, attempt, retryable, response, response_status, response_body,
// response_headers): records a failure.
IDEM_PG_FUNCTION(idem_fail) {
    Outcome o{"failed", PG_ARGISNULL(3) ? true : PG_GETARG_BOOL(3), true, (Datum)0};
    return finish(fcinfo, o, 4, 5, "fail");
}

// idem_heartbeat(scope, key, attempt, lease): extends the owner's lease.
IDEM_PG_FUNCTION(idem_heartbeat) {
    Datum scope, key;
    scope_key_args(fcinfo, &scope, &key);
    int32 attempt = attempt_arg(fcinfo, 2);
    int64 lease_us = idem::pg::interval_arg_usec(fcinfo, 3, idem::settings::default_lease_s);
    TimestampTz now = GetCurrentTimestamp();
    idem::ClaimTimes times = claim_times(now, lease_us, lease_us);

    idem::pg::SavedUser su;
    idem::pg::enter(&su);
    saved_plan(&plan_heartbeat, SQL_HEARTBEAT, 5, HEARTBEAT_TYPES);
    Datum v[5] = {scope, key, Int32GetDatum(attempt), TimestampTzGetDatum(now),
                  TimestampTzGetDatum(times.lease_expires)};
    for (int round = 0; exec(plan_heartbeat, v, nullptr, false, 0) != 1; round++) {
        if (round == 9)
            give_up_changing("extend the lease");
        Datum keyv[2] = {scope, key};
        explain_refusal(keyv, attempt, "extend", nullptr);
    }
    idem::pg::leave(&su);
    PG_RETURN_TIMESTAMPTZ(times.lease_expires);
}

// idem_lookup(scope, key): the live record of a key, zero or one row.
IDEM_PG_FUNCTION(idem_lookup) {
    Datum scope, key;
    scope_key_args(fcinfo, &scope, &key);
    TimestampTz now = GetCurrentTimestamp();
    InitMaterializedSRF(fcinfo, 0);
    ReturnSetInfo *rsinfo = reinterpret_cast<ReturnSetInfo *>(fcinfo->resultinfo);
    MemoryContext outer = CurrentMemoryContext;

    idem::pg::SavedUser su;
    idem::pg::enter(&su);
    Datum keyv[2] = {scope, key};
    // Normally one row. Under REPEATABLE READ / SERIALIZABLE a transaction that claimed the key
    // after a purge it cannot see deleted the old, expired record sees both: the live one counts.
    uint64 n = exec(plan_get(), keyv, nullptr, true, 0);
    uint64 live = n;
    for (uint64 r = 0; r < n && live == n; r++) {
        idem::RecordState st = read_state(r);
        if (idem::pg::call_cpp([&] { return idem::record_live(st, now); }))
            live = r;
    }
    if (live < n) {
        Datum values[C_NCOLS];
        bool nulls[C_NCOLS];
        static const int16 lens[C_NCOLS] = {-1, 1, -1, 4, -1, -1, 4, 8, 8, 8, 8, -1, -1};
        static const bool byvals[C_NCOLS] = {false, true, false, true, true,  false, true,
                                             true,  true, true,  true, false, false};
        // Output columns: status, fingerprint, attempt, resource_id, response, response_status,
        // created_at, updated_at, lease_expires_at, expires_at, response_body, response_headers.
        static const int order[12] = {C_STATUS,      C_FINGERPRINT,   C_ATTEMPT,
                                      C_RESOURCE_ID, C_RESPONSE,      C_RESPONSE_STATUS,
                                      C_CREATED,     C_UPDATED,       C_LEASE_EXPIRES,
                                      C_EXPIRES,     C_RESPONSE_BODY, C_RESPONSE_HEADERS};
        for (int i = 0; i < 12; i++) {
            int c = order[i];
            values[i] =
                copy_col(outer, c, lens[c - 1], byvals[c - 1] && lens[c - 1] > 0, &nulls[i], live);
        }
        MemoryContext old = MemoryContextSwitchTo(outer);
        tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
        MemoryContextSwitchTo(old);
    }
    idem::pg::leave(&su);
    return (Datum)0;
}
