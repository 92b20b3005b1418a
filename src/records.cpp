// Idempotency-Key records: idem_claim, idem_complete, idem_fail, idem_heartbeat, idem_lookup.
//
// The usual claim (a key not seen before) is one INSERT ... ON CONFLICT DO NOTHING: one index
// probe and one insert, done directly through the access methods (src/records_direct.cpp) or, with
// idempotency.direct_access off, by a saved SPI plan. Only when the key exists does the claim
// read the record and decide (core/lease.hpp) between replay, in_progress, mismatch and a
// compare-and-set takeover, which is a saved SPI UPDATE.
#include "pg_cpp.hpp"
#include "settings.hpp"
#include "lease.hpp"
#include "errors.hpp"
#include "records_direct.hpp"
#include "spi_util.hpp"
#include "operations.hpp"

extern "C" {
#include "access/htup_details.h"
#include "access/xact.h"
#include "utils/snapmgr.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "utils/datum.h"
#include "utils/fmgrprotos.h"
#include "utils/guc.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"
}

namespace {

using idem::pg::col;
using idem::pg::exec;
using idem::pg::saved_plan;

using idem::pg::IK_FENCED;
using idem::pg::IK_FINISHED;
using idem::pg::IK_NOT_FOUND;
using idem::pg::require_arg;

// Columns read back from a record, in the order of RECORD_COLUMNS. Each is cast to the type
// the C code reads it as (a no-op for the extension's own table definition), so that a table
// altered by hand gives an error or a converted value, never a misread Datum.
#define RECORD_COLUMNS                                                                             \
    "r.status::pg_catalog.text, r.retryable::pg_catalog.bool, r.fingerprint::pg_catalog.bytea, "   \
    "r.attempt::pg_catalog.int4, r.resource_id::pg_catalog.text, r.response::pg_catalog.jsonb, "   \
    "r.response_status::pg_catalog.int4, r.lease_expires_at::pg_catalog.timestamptz, "             \
    "r.expires_at::pg_catalog.timestamptz, r.created_at::pg_catalog.timestamptz, "                 \
    "r.updated_at::pg_catalog.timestamptz"
enum RecordCol {
    C_STATUS = 1,
    C_RETRYABLE,
    C_FINGERPRINT,
    C_ATTEMPT,
    C_RESOURCE_ID,
    C_RESPONSE,
    C_RESPONSE_STATUS,
    C_LEASE_EXPIRES,
    C_EXPIRES,
    C_CREATED,
    C_UPDATED,
    C_NCOLS = C_UPDATED
};
#define WHERE_KEY " WHERE r.scope OPERATOR(pg_catalog.=) $1 AND r.key OPERATOR(pg_catalog.=) $2"

const char *const SQL_INSERT =
    "INSERT INTO idempotency.records AS r (scope, key, status, fingerprint, attempt, "
    "created_at, updated_at, lease_expires_at, expires_at) "
    "VALUES ($1, $2, 'processing', $3, 1, $4, $4, $5, $6) ON CONFLICT (scope, key) DO NOTHING";
const Oid INSERT_TYPES[] = {TEXTOID,        TEXTOID,        BYTEAOID,
                            TIMESTAMPTZOID, TIMESTAMPTZOID, TIMESTAMPTZOID};

// A claim that finds the key reads the record without locking it (lookers must never block
// the owner's complete or heartbeat). Under REPEATABLE READ / SERIALIZABLE it takes FOR KEY
// SHARE, which conflicts with none of the record's updates but raises 40001 when the row
// changed after the transaction's snapshot.
const char *const SQL_GET = "SELECT " RECORD_COLUMNS " FROM idempotency.records r" WHERE_KEY;
const char *const SQL_GET_SHARE =
    "SELECT " RECORD_COLUMNS " FROM idempotency.records r" WHERE_KEY " FOR KEY SHARE";
const Oid KEY_TYPES[] = {TEXTOID, TEXTOID};

// Compare-and-set takeover: succeeds only while the record is still in the state the decision
// was made on (same attempt, status and retryable flag, and no live lease). Under READ
// COMMITTED a concurrent change is waited for and the condition re-checked on the new row
// version, so of two racing takers exactly one wins. fresh (TTL expired) also replaces the
// fingerprint and creation time.
const char *const SQL_TAKE =
    "UPDATE idempotency.records AS r SET status = 'processing', retryable = false, "
    "attempt = $3 OPERATOR(pg_catalog.+) 1, resource_id = NULL, response = NULL, "
    "response_status = NULL, fingerprint = CASE WHEN $8 THEN $4 ELSE r.fingerprint END, "
    "created_at = CASE WHEN $8 THEN $5 ELSE r.created_at END, updated_at = $5, "
    "lease_expires_at = $6, expires_at = $7" WHERE_KEY
    " AND r.attempt OPERATOR(pg_catalog.=) $3 AND r.status OPERATOR(pg_catalog.=) $9"
    " AND r.retryable OPERATOR(pg_catalog.=) $10"
    " AND (r.lease_expires_at IS NULL OR r.lease_expires_at OPERATOR(pg_catalog.<=) $5)";
const Oid TAKE_TYPES[] = {TEXTOID,        TEXTOID,        INT4OID, BYTEAOID, TIMESTAMPTZOID,
                          TIMESTAMPTZOID, TIMESTAMPTZOID, BOOLOID, TEXTOID,  BOOLOID};

// Moves the lease of a record this transaction has just inserted to start at $3 (used when
// the insert had to wait for another transaction before it succeeded).
const char *const SQL_RESTAMP =
    "UPDATE idempotency.records AS r SET created_at = $3, updated_at = $3, "
    "lease_expires_at = $4, expires_at = $5" WHERE_KEY;
const Oid RESTAMP_TYPES[] = {TEXTOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID, TIMESTAMPTZOID};

// Stores the outcome of the owning attempt; the record is then kept for at least as long
// after the finish as its TTL window was long at the claim.
const char *const SQL_FINISH =
    "UPDATE idempotency.records AS r SET status = $4, retryable = $5, resource_id = $6, "
    "response = $7, response_status = $8, updated_at = $9, lease_expires_at = NULL, "
    "expires_at = GREATEST(r.expires_at, $9 OPERATOR(pg_catalog.+) "
    "(r.expires_at OPERATOR(pg_catalog.-) r.created_at))" WHERE_KEY
    " AND r.attempt OPERATOR(pg_catalog.=) $3 AND r.status OPERATOR(pg_catalog.=) 'processing'";
const Oid FINISH_TYPES[] = {TEXTOID, TEXTOID,  INT4OID, TEXTOID,       BOOLOID,
                            TEXTOID, JSONBOID, INT4OID, TIMESTAMPTZOID};

const char *const SQL_HEARTBEAT =
    "UPDATE idempotency.records AS r SET lease_expires_at = $5, updated_at = $4, "
    "expires_at = GREATEST(r.expires_at, $5)" WHERE_KEY
    " AND r.attempt OPERATOR(pg_catalog.=) $3 AND r.status OPERATOR(pg_catalog.=) 'processing'";
const Oid HEARTBEAT_TYPES[] = {TEXTOID, TEXTOID, INT4OID, TIMESTAMPTZOID, TIMESTAMPTZOID};

SPIPlanPtr plan_insert, plan_get, plan_get_share, plan_take, plan_restamp, plan_finish,
    plan_heartbeat;

// An insert that took longer than this (it waited for another transaction) restarts the lease.
constexpr int64 RESTAMP_AFTER_USEC = 10000;

// The status column's text for a record state.
const char *status_text(idem::Status s) {
    switch (s) {
    case idem::Status::Processing:
        return "processing";
    case idem::Status::Completed:
        return "completed";
    case idem::Status::Failed:
        break;
    }
    return "failed";
}

// Validated scope and key arguments (arguments 0 and 1 of every function here).
void scope_key_args(FunctionCallInfo fcinfo, Datum *scope, Datum *key) {
    require_arg(fcinfo, 0, "scope");
    require_arg(fcinfo, 1, "key",
                "A request without an Idempotency-Key must be rejected (HTTP 400), not claimed.");
    text *s = PG_GETARG_TEXT_PP(0);
    text *k = PG_GETARG_TEXT_PP(1);
    idem::validate_name("scope", VARSIZE_ANY_EXHDR(s), idem::max_scope_bytes);
    idem::validate_name("key", VARSIZE_ANY_EXHDR(k), idem::max_key_bytes);
    *scope = PointerGetDatum(s);
    *key = PointerGetDatum(k);
}

// A positive attempt argument (the fencing token handed back by the caller).
int32 attempt_arg(FunctionCallInfo fcinfo, int argno) {
    require_arg(fcinfo, argno, "attempt");
    int32 attempt = PG_GETARG_INT32(argno);
    idem::validate_attempt(attempt);
    return attempt;
}

// Microseconds of an interval argument, or of the setting (seconds) when it is NULL.
int64 interval_arg(FunctionCallInfo fcinfo, int argno, int default_seconds) {
    if (PG_ARGISNULL(argno))
        return static_cast<int64>(default_seconds) * USECS_PER_SEC;
    Interval *iv = PG_GETARG_INTERVAL_P(argno);
    return idem::interval_usec(iv->month, iv->day, iv->time);
}

// Row `row` of the SPI result (RECORD_COLUMNS), as the core sees it.
idem::RecordState read_state(uint64 row = 0) {
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

// NULL-aware equality of two bytea values.
bool bytea_equal(bool a_null, Datum a, bool b_null, Datum b) {
    if (a_null || b_null)
        return a_null == b_null;
    bytea *x = DatumGetByteaPP(a);
    bytea *y = DatumGetByteaPP(b);
    return VARSIZE_ANY_EXHDR(x) == VARSIZE_ANY_EXHDR(y) &&
           memcmp(VARDATA_ANY(x), VARDATA_ANY(y), VARSIZE_ANY_EXHDR(x)) == 0;
}

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

// Copies column attno of SPI result row `row` into memory context cxt.
Datum copy_col(MemoryContext cxt, int attno, int16 typlen, bool byval, bool *isnull,
               uint64 row = 0) {
    Datum d = col(row, attno, isnull);
    if (*isnull)
        return (Datum)0;
    MemoryContext old = MemoryContextSwitchTo(cxt);
    d = datumCopy(d, byval, typlen);
    MemoryContextSwitchTo(old);
    return d;
}

// The blessed result row type of the calling function, cached for the call site.
TupleDesc result_desc(FunctionCallInfo fcinfo) {
    if (fcinfo->flinfo->fn_extra == nullptr) {
        TupleDesc td;
        if (get_call_result_type(fcinfo, nullptr, &td) != TYPEFUNC_COMPOSITE)
            elog(ERROR, "return type must be a row type");
        MemoryContext old = MemoryContextSwitchTo(fcinfo->flinfo->fn_mcxt);
        fcinfo->flinfo->fn_extra = BlessTupleDesc(CreateTupleDescCopy(td));
        MemoryContextSwitchTo(old);
    }
    return static_cast<TupleDesc>(fcinfo->flinfo->fn_extra);
}

// INSERT ... ON CONFLICT DO NOTHING that does not wait for an uncommitted duplicate: it runs in
// a subtransaction with lock_timeout = 1 ms and reports *busy when the lock wait timed out.
uint64 insert_nowait(Datum *values, const char *nulls, bool *busy) {
    MemoryContext cxt = CurrentMemoryContext;
    ResourceOwner owner = CurrentResourceOwner;
    volatile uint64 n = 0;
    *busy = false;
    BeginInternalSubTransaction(nullptr);
    MemoryContextSwitchTo(cxt);
    PG_TRY();
    {
        int nest = NewGUCNestLevel();
        (void)set_config_option("lock_timeout", "1", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE,
                                true, 0, false);
        n = exec(plan_insert, values, nulls, false, 0);
        AtEOXact_GUC(true, nest);
        ReleaseCurrentSubTransaction();
        MemoryContextSwitchTo(cxt);
        CurrentResourceOwner = owner;
    }
    PG_CATCH();
    {
        MemoryContextSwitchTo(cxt);
        ErrorData *edata = CopyErrorData();
        FlushErrorState();
        RollbackAndReleaseCurrentSubTransaction();
        MemoryContextSwitchTo(cxt);
        CurrentResourceOwner = owner;
        if (edata->sqlerrcode != ERRCODE_LOCK_NOT_AVAILABLE)
            ReThrowError(edata);
        FreeErrorData(edata);
        *busy = true;
    }
    PG_END_TRY();
    return n;
}

// The claim's result row, filled by the claim loop.
struct ClaimResult {
    const char *outcome;
    Datum values[7];
    bool nulls[7];
};
enum ClaimOut { O_OUTCOME, O_ATTEMPT, O_RESOURCE_ID, O_RESPONSE, O_STATUS, O_LEASE, O_EXPIRES };

void set_out(ClaimResult *r, int i, Datum v) {
    r->values[i] = v;
    r->nulls[i] = false;
}

// A replay of a finished record: its attempt, stored result and expiry.
void set_replay(ClaimResult *r, int32 attempt, bool rid_null, Datum rid, bool resp_null, Datum resp,
                bool status_null, Datum status, Datum expires) {
    r->outcome = "replayed";
    set_out(r, O_ATTEMPT, Int32GetDatum(attempt));
    if (!rid_null)
        set_out(r, O_RESOURCE_ID, rid);
    if (!resp_null)
        set_out(r, O_RESPONSE, resp);
    if (!status_null)
        set_out(r, O_STATUS, status);
    set_out(r, O_EXPIRES, expires);
}

// The record row at index 0 of the SPI result (RECORD_COLUMNS), with its varlena values copied
// into cxt.
void read_spi_record(MemoryContext cxt, idem::pg::StoredRecord *out) {
    bool isnull;
    idem::RecordState st = read_state();
    out->status = st.status == idem::Status::Processing  ? 'p'
                  : st.status == idem::Status::Completed ? 'c'
                                                         : 'f';
    out->retryable = st.retryable;
    out->attempt = st.attempt;
    out->fingerprint = copy_col(cxt, C_FINGERPRINT, -1, false, &out->fingerprint_null);
    out->resource_id = copy_col(cxt, C_RESOURCE_ID, -1, false, &out->resource_id_null);
    out->response = copy_col(cxt, C_RESPONSE, -1, false, &out->response_null);
    out->response_status = DatumGetInt32(col(0, C_RESPONSE_STATUS, &out->response_status_null));
    out->lease_null = !st.has_lease;
    out->lease_expires_at = st.lease_expires;
    out->expires_at = DatumGetTimestampTz(col(0, C_EXPIRES, &isnull));
}

// The core's view of a stored record.
idem::RecordState record_state(const idem::pg::StoredRecord &rec) {
    idem::RecordState st{};
    st.status = rec.status == 'p'   ? idem::Status::Processing
                : rec.status == 'c' ? idem::Status::Completed
                                    : idem::Status::Failed;
    st.retryable = rec.retryable;
    st.attempt = rec.attempt;
    st.has_lease = !rec.lease_null;
    st.lease_expires = rec.lease_null ? 0 : rec.lease_expires_at;
    st.expires = rec.expires_at;
    return st;
}

// SPI as the extension owner, entered on first use within one call (a new key through the
// direct path never needs it).
struct LazySpi {
    bool entered;
    idem::pg::SavedUser user;
};

void need_spi(LazySpi *spi) {
    if (!spi->entered) {
        idem::pg::enter(&spi->user);
        spi->entered = true;
    }
}

} // namespace

// idem_claim(scope, key, fingerprint, lease, ttl, wait): claims an Idempotency-Key.
IDEM_PG_FUNCTION(idem_claim) {
    Datum scope, key;
    scope_key_args(fcinfo, &scope, &key);
    bool fp_null = PG_ARGISNULL(2);
    Datum fingerprint = fp_null ? (Datum)0 : PG_GETARG_DATUM(2);
    if (!fp_null)
        idem::validate_fingerprint(VARSIZE_ANY_EXHDR(PG_GETARG_BYTEA_PP(2)));
    int64 lease_us = interval_arg(fcinfo, 3, idem::guc::default_lease_s);
    int64 ttl_us = interval_arg(fcinfo, 4, idem::guc::default_ttl_s);
    bool wait = PG_ARGISNULL(5) ? true : PG_GETARG_BOOL(5);
    TimestampTz now = GetCurrentTimestamp();
    idem::ClaimTimes times = idem::claim_times(now, lease_us, ttl_us);
    TupleDesc desc = result_desc(fcinfo);

    ClaimResult res;
    res.outcome = nullptr;
    for (int i = 0; i < 7; i++)
        res.nulls[i] = true;

    MemoryContext outer = CurrentMemoryContext;
    LazySpi spi{false, {}};
    bool snapshot_xact = IsolationUsesXactSnapshot();
    // wait => false keeps the SPI insert: it needs a subtransaction with a lock timeout.
    bool direct = wait && idem::guc::direct_access;
    Datum keyv[2] = {scope, key};
    for (int round = 0; res.outcome == nullptr; round++) {
        if (round == 10)
            ereport(ERROR, (errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
                            errmsg("could not claim the key: its record kept changing "
                                   "concurrently"),
                            errhint("Retry the transaction.")));
        if (round > 0) {
            now = GetCurrentTimestamp();
            times = idem::claim_times(now, lease_us, ttl_us);
        }
        bool inserted = false, busy = false, have_record = false;
        idem::pg::StoredRecord rec;
        if (direct) {
            idem::pg::NewRecord nr{
                scope, key, fp_null, fingerprint, now, times.lease_expires, times.expires};
            switch (idem::pg::insert_new(nr, !snapshot_xact, outer, &rec)) {
            case idem::pg::InsertResult::Inserted:
                inserted = true;
                break;
            case idem::pg::InsertResult::Read:
                // READ COMMITTED: the insert waited for any transaction that was inserting or
                // changing the record, and read its latest committed version.
                have_record = true;
                break;
            case idem::pg::InsertResult::Exists:
                // REPEATABLE READ / SERIALIZABLE decide through SQL below (40001 when the
                // record is newer than the transaction's snapshot, FOR KEY SHARE); READ
                // COMMITTED found the record changed again before it could read it.
                if (!snapshot_xact)
                    continue;
                break;
            case idem::pg::InsertResult::Unusable:
                // Said at DEBUG1 so that a test can tell the direct path ran (sql/claim.sql).
                ereport(DEBUG1, (errmsg_internal("idem_claim takes the SQL path: "
                                                 "idempotency.records is not the "
                                                 "extension's plain table")));
                direct = false;
                break;
            }
        }
        if (!inserted && !have_record) {
            need_spi(&spi);
            saved_plan(&plan_insert, SQL_INSERT, 6, INSERT_TYPES);
            Datum ins[6] = {scope,
                            key,
                            fingerprint,
                            TimestampTzGetDatum(now),
                            TimestampTzGetDatum(times.lease_expires),
                            TimestampTzGetDatum(times.expires)};
            char ins_nulls[6] = {' ', ' ', fp_null ? 'n' : ' ', ' ', ' ', ' '};
            uint64 n = wait ? exec(plan_insert, ins, ins_nulls, false, 0)
                            : insert_nowait(ins, ins_nulls, &busy);
            inserted = n == 1;
        }
        if (inserted) {
            // The insert may have waited for a transaction holding the same key that then
            // rolled back: the lease starts when the caller gets the key, not when it asked.
            TimestampTz after = GetCurrentTimestamp();
            if (after - now > Min(RESTAMP_AFTER_USEC, lease_us / 10)) {
                now = after;
                times = idem::claim_times(now, lease_us, ttl_us);
                need_spi(&spi);
                saved_plan(&plan_restamp, SQL_RESTAMP, 5, RESTAMP_TYPES);
                Datum rs[5] = {scope, key, TimestampTzGetDatum(now),
                               TimestampTzGetDatum(times.lease_expires),
                               TimestampTzGetDatum(times.expires)};
                exec(plan_restamp, rs, nullptr, false, 0);
            }
            res.outcome = "claimed";
            set_out(&res, O_ATTEMPT, Int32GetDatum(1));
            set_out(&res, O_LEASE, TimestampTzGetDatum(times.lease_expires));
            set_out(&res, O_EXPIRES, TimestampTzGetDatum(times.expires));
            break;
        }
        if (busy) {
            // An unfinished transaction is inserting or changing this key's record. Under READ
            // COMMITTED its committed version, if there is one, still answers a replay, a
            // mismatch or an in_progress with the owner's attempt and lease; anything else (no
            // committed row, a takeover that would have to wait) is in_progress with nothing
            // known. REPEATABLE READ / SERIALIZABLE answer that at once.
            saved_plan(&plan_get, SQL_GET, 2, KEY_TYPES);
            if (snapshot_xact || exec(plan_get, keyv, nullptr, false, 1) == 0) {
                res.outcome = "in_progress";
                break;
            }
            read_spi_record(outer, &rec);
            have_record = true;
        }
        if (!have_record) {
            // The key exists, and the insert has waited for any transaction that was inserting
            // or changing its record: this read sees the latest committed state.
            SPIPlanPtr get = snapshot_xact
                                 ? saved_plan(&plan_get_share, SQL_GET_SHARE, 2, KEY_TYPES)
                                 : saved_plan(&plan_get, SQL_GET, 2, KEY_TYPES);
            if (exec(get, keyv, nullptr, false, 1) == 0)
                continue; // deleted (purged) since the insert saw it: insert again
            read_spi_record(outer, &rec);
        }

        now = GetCurrentTimestamp();
        idem::RecordState st = record_state(rec);
        bool fp_equal = bytea_equal(rec.fingerprint_null, rec.fingerprint, fp_null, fingerprint);
        idem::ClaimDecision d = idem::decide_claim(st, fp_equal, now);
        switch (d) {
        case idem::ClaimDecision::Mismatch:
            res.outcome = "mismatch";
            set_out(&res, O_EXPIRES, TimestampTzGetDatum(rec.expires_at));
            break;
        case idem::ClaimDecision::Replay:
            set_replay(&res, rec.attempt, rec.resource_id_null, rec.resource_id, rec.response_null,
                       rec.response, rec.response_status_null, Int32GetDatum(rec.response_status),
                       TimestampTzGetDatum(rec.expires_at));
            break;
        case idem::ClaimDecision::InProgress:
            res.outcome = "in_progress";
            set_out(&res, O_ATTEMPT, Int32GetDatum(st.attempt));
            set_out(&res, O_LEASE, TimestampTzGetDatum(st.lease_expires));
            set_out(&res, O_EXPIRES, TimestampTzGetDatum(rec.expires_at));
            break;
        case idem::ClaimDecision::Fresh:
        case idem::ClaimDecision::Reclaim:
        case idem::ClaimDecision::Retry: {
            if (busy) { // the takeover would wait for the transaction holding the record
                res.outcome = "in_progress";
                break;
            }
            int32 next = idem::next_attempt(st.attempt); // 22003 at INT32_MAX
            times = idem::claim_times(now, lease_us, ttl_us);
            bool fresh = d == idem::ClaimDecision::Fresh;
            need_spi(&spi);
            Datum take[10] = {scope,
                              key,
                              Int32GetDatum(st.attempt),
                              fingerprint,
                              TimestampTzGetDatum(now),
                              TimestampTzGetDatum(times.lease_expires),
                              TimestampTzGetDatum(times.expires),
                              BoolGetDatum(fresh),
                              CStringGetTextDatum(status_text(st.status)),
                              BoolGetDatum(st.retryable)};
            char take_nulls[10] = {' ', ' ', ' ', fp_null ? 'n' : ' ', ' ', ' ', ' ',
                                   ' ', ' ', ' '};
            saved_plan(&plan_take, SQL_TAKE, 10, TAKE_TYPES);
            if (exec(plan_take, take, take_nulls, false, 0) != 1)
                continue; // the record changed since it was read: decide again
            res.outcome = idem::outcome_name(d);
            set_out(&res, O_ATTEMPT, Int32GetDatum(next));
            set_out(&res, O_LEASE, TimestampTzGetDatum(times.lease_expires));
            set_out(&res, O_EXPIRES, TimestampTzGetDatum(times.expires));
            break;
        }
        }
    }
    if (spi.entered)
        idem::pg::leave(&spi.user);
    idem::stats::count_claim(res.outcome);

    set_out(&res, O_OUTCOME, CStringGetTextDatum(res.outcome));
    HeapTuple tuple = heap_form_tuple(desc, res.values, res.nulls);
    PG_RETURN_DATUM(HeapTupleGetDatum(tuple));
}

namespace {

// Raised when a record kept changing under a complete/fail/heartbeat for ten rounds.
[[noreturn]] void give_up_changing(const char *action) {
    ereport(ERROR, (errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
                    errmsg("could not %s: the record kept changing concurrently", action),
                    errhint("Retry the transaction.")));
    pg_unreachable();
}

// Why a complete/fail/heartbeat of (scope, key, attempt) matched no processing row: raises
// the documented error, returns true when the call repeats what is already stored (a no-op),
// or false when the record changed between the update and this read (try again).
bool explain_refusal(Datum *keyv, int32 attempt, const char *action, bool is_finish,
                     const char *target_status, bool target_retryable, bool rid_null, Datum rid,
                     bool resp_null, Datum resp, bool st_null, Datum status) {
    saved_plan(&plan_get, SQL_GET, 2, KEY_TYPES);
    if (exec(plan_get, keyv, nullptr, false, 1) == 0)
        ereport(ERROR, (errcode(IK_NOT_FOUND), errmsg("idempotency key not found"),
                        errdetail("No record exists for scope \"%s\" and key \"%s\": it was "
                                  "never claimed, or it expired and was purged.",
                                  TextDatumGetCString(keyv[0]), TextDatumGetCString(keyv[1])),
                        errhint("Only the caller whose idem_claim returned this attempt can "
                                "%s it.",
                                action)));
    idem::RecordState st = read_state();
    if (st.status == idem::Status::Processing) {
        if (attempt > st.attempt)
            ereport(ERROR, (errcode(IK_FENCED), errmsg("attempt %d does not own this key", attempt),
                            errdetail("The current attempt is %d; attempt %d was never handed out.",
                                      st.attempt, attempt),
                            errhint("Pass the attempt that your idem_claim returned.")));
        if (st.attempt != attempt) {
            idem::stats::count(idem::stats::RefusedFenced);
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
        idem::stats::count(idem::stats::RefusedFinished);
        ereport(ERROR, (errcode(IK_FINISHED),
                        errmsg("the operation was already %s by attempt %d", stored, st.attempt),
                        errdetail("Attempt %d no longer owns this key.", attempt),
                        errhint("Do not report this attempt's result; replay the stored one.")));
    }
    if (is_finish) {
        bool isnull;
        bool same = strcmp(stored, target_status) == 0 && st.retryable == target_retryable;
        Datum v = col(0, C_RESOURCE_ID, &isnull);
        same = same && text_equal(isnull, v, rid_null, rid);
        v = col(0, C_RESPONSE, &isnull);
        same = same && jsonb_equal(isnull, v, resp_null, resp);
        v = col(0, C_RESPONSE_STATUS, &isnull);
        same = same && int4_equal(isnull, v, st_null, status);
        if (same)
            return true; // the same call again: nothing to do
        idem::stats::count(idem::stats::RefusedFinished);
        ereport(ERROR, (errcode(IK_FINISHED),
                        errmsg("the operation was already %s with a different result", stored),
                        errdetail("Attempt %d finished it before; a finished record is never "
                                  "changed.",
                                  attempt)));
    }
    idem::stats::count(idem::stats::RefusedFinished);
    ereport(ERROR, (errcode(IK_FINISHED), errmsg("the operation was already %s", stored),
                    errdetail("A finished operation has no lease to %s.", action)));
}

// Shared body of idem_complete and idem_fail.
Datum finish(FunctionCallInfo fcinfo, const char *target_status, bool retryable, bool rid_null,
             Datum rid, int resp_arg, int status_arg, const char *action) {
    Datum scope, key;
    scope_key_args(fcinfo, &scope, &key);
    int32 attempt = attempt_arg(fcinfo, 2);
    bool resp_null = PG_ARGISNULL(resp_arg);
    Datum resp = resp_null ? (Datum)0 : PG_GETARG_DATUM(resp_arg);
    bool st_null = PG_ARGISNULL(status_arg);
    Datum status = st_null ? (Datum)0 : PG_GETARG_DATUM(status_arg);
    TimestampTz now = GetCurrentTimestamp();

    idem::pg::SavedUser su;
    idem::pg::enter(&su);
    saved_plan(&plan_finish, SQL_FINISH, 9, FINISH_TYPES);
    Datum v[9] = {scope,
                  key,
                  Int32GetDatum(attempt),
                  CStringGetTextDatum(target_status),
                  BoolGetDatum(retryable),
                  rid,
                  resp,
                  status,
                  TimestampTzGetDatum(now)};
    char n[9] = {
        ' ', ' ', ' ', ' ', ' ', rid_null ? 'n' : ' ', resp_null ? 'n' : ' ', st_null ? 'n' : ' ',
        ' '};
    bool stored = false;
    for (int round = 0;; round++) {
        if (round == 10)
            give_up_changing(action);
        stored = exec(plan_finish, v, n, false, 0) == 1;
        Datum keyv[2] = {scope, key};
        if (stored || explain_refusal(keyv, attempt, action, true, target_status, retryable,
                                      rid_null, rid, resp_null, resp, st_null, status))
            break;
    }
    idem::pg::leave(&su);
    PG_RETURN_BOOL(stored);
}

} // namespace

// idem_complete(scope, key, attempt, resource_id, response, response_status): stores a result.
IDEM_PG_FUNCTION(idem_complete) {
    bool rid_null = PG_ARGISNULL(3);
    Datum rid = rid_null ? (Datum)0 : PG_GETARG_DATUM(3);
    return finish(fcinfo, "completed", false, rid_null, rid, 4, 5, "complete");
}

// idem_fail(scope, key, attempt, retryable, response, response_status): records a failure.
IDEM_PG_FUNCTION(idem_fail) {
    bool retryable = PG_ARGISNULL(3) ? true : PG_GETARG_BOOL(3);
    return finish(fcinfo, "failed", retryable, true, (Datum)0, 4, 5, "fail");
}

// idem_heartbeat(scope, key, attempt, lease): extends the owner's lease.
IDEM_PG_FUNCTION(idem_heartbeat) {
    Datum scope, key;
    scope_key_args(fcinfo, &scope, &key);
    int32 attempt = attempt_arg(fcinfo, 2);
    int64 lease_us = interval_arg(fcinfo, 3, idem::guc::default_lease_s);
    TimestampTz now = GetCurrentTimestamp();
    idem::ClaimTimes times = idem::claim_times(now, lease_us, lease_us);

    idem::pg::SavedUser su;
    idem::pg::enter(&su);
    saved_plan(&plan_heartbeat, SQL_HEARTBEAT, 5, HEARTBEAT_TYPES);
    Datum v[5] = {scope, key, Int32GetDatum(attempt), TimestampTzGetDatum(now),
                  TimestampTzGetDatum(times.lease_expires)};
    for (int round = 0; exec(plan_heartbeat, v, nullptr, false, 0) != 1; round++) {
        if (round == 9)
            give_up_changing("extend the lease");
        Datum keyv[2] = {scope, key};
        explain_refusal(keyv, attempt, "extend", false, nullptr, false, true, 0, true, 0, true, 0);
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
    saved_plan(&plan_get, SQL_GET, 2, KEY_TYPES);
    Datum keyv[2] = {scope, key};
    // Normally one row. Under REPEATABLE READ / SERIALIZABLE a transaction that claimed the key
    // after a purge it cannot see deleted the old, expired record sees both: the live one counts.
    uint64 n = exec(plan_get, keyv, nullptr, true, 0);
    uint64 live = n;
    for (uint64 r = 0; r < n && live == n; r++)
        if (idem::record_live(read_state(r), now))
            live = r;
    if (live < n) {
        Datum values[C_NCOLS];
        bool nulls[C_NCOLS];
        static const int16 lens[C_NCOLS] = {-1, 1, -1, 4, -1, -1, 4, 8, 8, 8, 8};
        static const bool byvals[C_NCOLS] = {false, true, false, true, true, false,
                                             true,  true, true,  true, true};
        // Output columns: status, fingerprint, attempt, resource_id, response, response_status,
        // created_at, updated_at, lease_expires_at, expires_at.
        static const int order[10] = {C_STATUS,        C_FINGERPRINT,     C_ATTEMPT, C_RESOURCE_ID,
                                      C_RESPONSE,      C_RESPONSE_STATUS, C_CREATED, C_UPDATED,
                                      C_LEASE_EXPIRES, C_EXPIRES};
        for (int i = 0; i < 10; i++) {
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
