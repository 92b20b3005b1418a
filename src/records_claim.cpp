// idem_claim: claims an Idempotency-Key.
//
// The usual claim (a key not seen before) is one INSERT ... ON CONFLICT DO NOTHING: one index
// probe and one insert, done directly through the access methods (src/records_direct.cpp) or,
// with idempotency.direct_access off, by a saved SPI plan. Only when the key exists does the
// claim read the record and decide (core/lease.hpp) between replay, in_progress, mismatch and a
// compare-and-set takeover, which is a saved SPI UPDATE.
#include "records.hpp"
#include "errors.hpp"
#include "operations.hpp"
#include "records_direct.hpp"
#include "settings.hpp"

extern "C" {
#include "access/htup_details.h"
#include "access/xact.h"
#include "funcapi.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
}

namespace {

using namespace idem::pg::records;
using idem::pg::col;
using idem::pg::exec;
using idem::pg::saved_plan;

const char *const SQL_INSERT =
    "INSERT INTO idempotency.records AS r (scope, key, status, fingerprint, attempt, "
    "created_at, updated_at, lease_expires_at, expires_at) "
    "VALUES ($1, $2, 'processing', $3, 1, $4, $4, $5, $6) ON CONFLICT (scope, key) DO NOTHING";
const Oid INSERT_TYPES[] = {TEXTOID,        TEXTOID,        BYTEAOID,
                            TIMESTAMPTZOID, TIMESTAMPTZOID, TIMESTAMPTZOID};

// Under REPEATABLE READ / SERIALIZABLE a claim that finds the key takes FOR KEY SHARE, which
// conflicts with none of the record's updates but raises 40001 when the row changed after the
// transaction's snapshot.
const char *const SQL_GET_SHARE =
    "SELECT " RECORD_COLUMNS " FROM idempotency.records r" WHERE_KEY " FOR KEY SHARE";

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

SPIPlanPtr plan_insert, plan_get_share, plan_take, plan_restamp;

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

// NULL-aware equality of two bytea values.
bool bytea_equal(bool a_null, Datum a, bool b_null, Datum b) {
    if (a_null || b_null)
        return a_null == b_null;
    bytea *x = DatumGetByteaPP(a);
    bytea *y = DatumGetByteaPP(b);
    return VARSIZE_ANY_EXHDR(x) == VARSIZE_ANY_EXHDR(y) &&
           memcmp(VARDATA_ANY(x), VARDATA_ANY(y), VARSIZE_ANY_EXHDR(x)) == 0;
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
    int64 lease_us = interval_arg(fcinfo, 3, idem::settings::default_lease_s);
    int64 ttl_us = interval_arg(fcinfo, 4, idem::settings::default_ttl_s);
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
    bool direct = wait && idem::settings::direct_access;
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
    idem::operations::count_claim(res.outcome);

    set_out(&res, O_OUTCOME, CStringGetTextDatum(res.outcome));
    HeapTuple tuple = heap_form_tuple(desc, res.values, res.nulls);
    PG_RETURN_DATUM(HeapTupleGetDatum(tuple));
}
