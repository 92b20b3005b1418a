// idem_claim: claims an Idempotency-Key.
//
// The usual claim (a key not seen before) is one INSERT ... ON CONFLICT DO NOTHING: one index
// probe and one insert, done directly through the access methods (src/records_direct.cpp) or,
// with idempotency.direct_access off, by a saved SPI plan. Only when the key exists does the
// claim read the record and decide (core/lease.hpp) between replay, in_progress, mismatch and a
// compare-and-set takeover, which is a saved SPI UPDATE.
#include "records.hpp"
#include "arguments.hpp"
#include "counters.hpp"
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

using namespace idem::pg;
using namespace idem::pg::records;

const char *const SQL_INSERT =
    "INSERT INTO idempotency.records AS r (scope, key, status, fingerprint, attempt, "
    "created_at, updated_at, lease_expires_at, expires_at) "
    "VALUES ($1, $2, 'processing', $3, 1, $4, $4, $5, $6) ON CONFLICT (scope, key) DO NOTHING";
const Oid INSERT_TYPES[] = {TEXTOID,        TEXTOID,        BYTEAOID,
                            TIMESTAMPTZOID, TIMESTAMPTZOID, TIMESTAMPTZOID};

// A claim that finds the key reads the record without locking it (plan_get). Under REPEATABLE
// READ / SERIALIZABLE it takes FOR KEY SHARE, which conflicts with none of the record's updates
// but raises 40001 when the row changed after the transaction's snapshot.
const char *const SQL_GET_SHARE =
    "SELECT " RECORD_COLUMNS " FROM idempotency.records r" WHERE_KEY " FOR KEY SHARE";

// Compare-and-set takeover: succeeds only while the record is still in the state the decision
// was made on (same attempt, status and retryable flag, and no live lease). Under READ
// COMMITTED a concurrent change is waited for and the condition re-checked on the new row
// version, so of two racing takers exactly one wins. fresh (TTL expired) also replaces the
// fingerprint and creation time.
#define TAKE_SET                                                                                   \
    "UPDATE idempotency.records AS r SET status = 'processing', retryable = false, "               \
    "attempt = $3 OPERATOR(pg_catalog.+) 1, resource_id = NULL, response = NULL, "                 \
    "response_status = NULL, response_body = NULL, response_headers = NULL, "                      \
    "fingerprint = CASE WHEN $8 THEN $4 ELSE r.fingerprint END, "                                  \
    "created_at = CASE WHEN $8 THEN $5 ELSE r.created_at END, updated_at = $5, "                   \
    "lease_expires_at = $6, expires_at = $7"
#define TAKE_WHERE                                                                                 \
    WHERE_KEY " AND r.attempt OPERATOR(pg_catalog.=) $3 AND r.status OPERATOR(pg_catalog.=) $9"    \
              " AND r.retryable OPERATOR(pg_catalog.=) $10"                                        \
              " AND (r.lease_expires_at IS NULL OR r.lease_expires_at OPERATOR(pg_catalog.<=) $5)"
const char *const SQL_TAKE = TAKE_SET TAKE_WHERE;
const Oid TAKE_TYPES[] = {TEXTOID,        TEXTOID,        INT4OID, BYTEAOID, TIMESTAMPTZOID,
                          TIMESTAMPTZOID, TIMESTAMPTZOID, BOOLOID, TEXTOID,  BOOLOID};

// Moves the lease of a record this transaction has just inserted (created at $6) to start at $3
// (used when the insert took long, e.g. it waited for another transaction). Only that row:
// under REPEATABLE READ / SERIALIZABLE the snapshot may still see the key's old record that a
// concurrent purge deleted, and updating it raised 40001 "could not serialize access due to
// concurrent delete" instead of answering claimed (test/isolation/specs/lookup_after_purge.spec).
const char *const SQL_RESTAMP =
    "UPDATE idempotency.records AS r SET created_at = $3, updated_at = $3, "
    "lease_expires_at = $4, expires_at = $5" WHERE_KEY
    " AND r.created_at OPERATOR(pg_catalog.=) $6";
const Oid RESTAMP_TYPES[] = {TEXTOID,        TEXTOID,        TIMESTAMPTZOID,
                             TIMESTAMPTZOID, TIMESTAMPTZOID, TIMESTAMPTZOID};

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

// INSERT ... ON CONFLICT DO NOTHING that does not wait for an uncommitted duplicate (wait => false
// on the SQL path; the direct path asks the access methods instead, direct::insert's nowait): it
// runs in a subtransaction with lock_timeout = 1 ms and reports *busy when the lock wait timed
// out.
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

// The claim's result row, filled by the claim's rounds.
enum ClaimOut {
    O_OUTCOME,
    O_ATTEMPT,
    O_RESOURCE_ID,
    O_RESPONSE,
    O_STATUS,
    O_LEASE,
    O_EXPIRES,
    O_BODY,
    O_HEADERS,
    O_COUNT
};
struct ClaimResult {
    const char *outcome; // NULL until decided
    Datum values[O_COUNT];
    bool nulls[O_COUNT];
};

void set_out(ClaimResult *r, int i, Datum v) {
    r->values[i] = v;
    r->nulls[i] = false;
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

// One call of idem_claim: its arguments and what its rounds share.
struct Claim {
    Datum keyv[2]; // scope, key
    bool fp_null;
    Datum fingerprint;
    int64 lease_us, ttl_us;
    bool wait;
    bool snapshot_xact; // REPEATABLE READ / SERIALIZABLE
    bool direct;        // insert and read through the access methods (records_direct.hpp)
    MemoryContext outer;
    LazySpi spi;
    TimestampTz now;
    idem::ClaimTimes times;
    ClaimResult res;
};

// Reads and checks the arguments into c.
void claim_args(FunctionCallInfo fcinfo, Claim *c) {
    *c = Claim{};
    scope_key_args(fcinfo, &c->keyv[0], &c->keyv[1]);
    // Arguments 2 to 5 may be absent (idem_claim_support drops those at their defaults).
    c->fp_null = idem::pg::arg_null(fcinfo, 2);
    c->fingerprint = c->fp_null ? (Datum)0 : PG_GETARG_DATUM(2);
    if (!c->fp_null) {
        size_t len = VARSIZE_ANY_EXHDR(PG_GETARG_BYTEA_PP(2));
        idem::pg::call_cpp([&] { idem::validate_fingerprint(len); });
    }
    c->lease_us = idem::pg::interval_arg_usec(fcinfo, 3, idem::settings::default_lease_s);
    c->ttl_us = idem::pg::interval_arg_usec(fcinfo, 4, idem::settings::default_ttl_s);
    c->wait = idem::pg::arg_null(fcinfo, 5) ? true : PG_GETARG_BOOL(5);
    c->now = GetCurrentTimestamp();
    c->times = claim_times(c->now, c->lease_us, c->ttl_us);
    for (bool &n : c->res.nulls)
        n = true;
    c->outer = CurrentMemoryContext;
    c->snapshot_xact = IsolationUsesXactSnapshot();
    // wait => false too: the direct insert answers Busy instead of waiting (insert_direct).
    c->direct = idem::settings::direct_access_on();
}

// How a step of a round ended.
enum class Step {
    Next,  // go on with the next step of this round
    Found, // the key's record is in hand
    Again, // start a new round
    Done   // c->res is decided
};

// The record of the key, read from the SPI result into *out (varlena values copied into cxt).
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
    out->body = copy_col(cxt, C_RESPONSE_BODY, -1, false, &out->body_null);
    out->headers = copy_col(cxt, C_RESPONSE_HEADERS, -1, false, &out->headers_null);
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

// The insert through the access methods: Next with *inserted (claimed), Found (READ COMMITTED:
// the insert waited for any transaction that was inserting or changing the record and read its
// latest committed version), Next with *busy (wait => false: another transaction is inserting
// or changing the record right now; nothing was waited for nor read), or Next (decide through
// SQL).
Step insert_direct(Claim *c, idem::pg::StoredRecord *rec, bool *inserted, bool *busy) {
    idem::pg::NewRecord nr{c->keyv[0],      c->keyv[1], c->fp_null,
                           c->fingerprint,  c->now,     c->times.lease_expires,
                           c->times.expires};
    switch (idem::pg::insert_new(nr, !c->snapshot_xact, !c->wait, c->outer, rec)) {
    case idem::pg::InsertResult::Inserted:
        *inserted = true;
        return Step::Next;
    case idem::pg::InsertResult::Read:
        return Step::Found;
    case idem::pg::InsertResult::Busy:
        // As the SQL path's busy insert (insert_sql): read_existing and decide answer from the
        // committed version, if any, or in_progress with nothing known.
        *busy = true;
        return Step::Next;
    case idem::pg::InsertResult::Exists:
        // Only without a reader: REPEATABLE READ / SERIALIZABLE decide through SQL below (40001
        // when the record is newer than the transaction's snapshot, FOR KEY SHARE).
        return Step::Next;
    case idem::pg::InsertResult::Unusable:
        // Said at DEBUG1 so that a test can tell the direct path ran
        // (test/regress/sql/records.sql).
        ereport(DEBUG1, (errmsg_internal("idem_claim takes the SQL path: idempotency.records is "
                                         "not the extension's plain table")));
        c->direct = false;
        return Step::Next;
    }
    return Step::Next;
}

// The saved INSERT ... ON CONFLICT DO NOTHING; *busy when it would have waited (wait => false).
// The SQL path (idempotency.direct_access off, a table the direct path steps aside from), and
// under REPEATABLE READ / SERIALIZABLE the insert after the direct one found a committed record.
bool insert_sql(Claim *c, bool *busy) {
    need_spi(&c->spi);
    saved_plan(&plan_insert, SQL_INSERT, 6, INSERT_TYPES);
    Datum ins[6] = {c->keyv[0],
                    c->keyv[1],
                    c->fingerprint,
                    TimestampTzGetDatum(c->now),
                    TimestampTzGetDatum(c->times.lease_expires),
                    TimestampTzGetDatum(c->times.expires)};
    char ins_nulls[6] = {' ', ' ', c->fp_null ? 'n' : ' ', ' ', ' ', ' '};
    if (c->wait)
        return exec(plan_insert, ins, ins_nulls, false, 0) == 1;
    // wait => false by SQL: a record another transaction holds is busy without even the
    // insert's 1 ms lock wait (which a loaded server may stretch); one taken after this look
    // still times out.
    if (record_held(c->keyv[0], c->keyv[1])) {
        *busy = true;
        return false;
    }
    return insert_nowait(ins, ins_nulls, busy) == 1;
}

// The key is claimed: attempt 1. The insert may have waited for a transaction holding the same
// key that then rolled back: the lease starts when the caller gets the key, not when it asked.
void claimed(Claim *c) {
    TimestampTz after = GetCurrentTimestamp();
    if (after - c->now > Min(RESTAMP_AFTER_USEC, c->lease_us / 10)) {
        TimestampTz inserted_at = c->now;
        c->now = after;
        c->times = claim_times(c->now, c->lease_us, c->ttl_us);
        need_spi(&c->spi);
        saved_plan(&plan_restamp, SQL_RESTAMP, 6, RESTAMP_TYPES);
        Datum rs[6] = {c->keyv[0],
                       c->keyv[1],
                       TimestampTzGetDatum(c->now),
                       TimestampTzGetDatum(c->times.lease_expires),
                       TimestampTzGetDatum(c->times.expires),
                       TimestampTzGetDatum(inserted_at)};
        exec(plan_restamp, rs, nullptr, false, 0);
    }
    c->res.outcome = "claimed";
    set_out(&c->res, O_ATTEMPT, Int32GetDatum(1));
    set_out(&c->res, O_LEASE, TimestampTzGetDatum(c->times.lease_expires));
    set_out(&c->res, O_EXPIRES, TimestampTzGetDatum(c->times.expires));
}

// Reads the existing record after an insert found the key: Found, Again (deleted, i.e. purged,
// since the insert saw it: insert again) or Done (in_progress).
Step read_existing(Claim *c, bool busy, idem::pg::StoredRecord *rec) {
    if (busy) {
        // An unfinished transaction is inserting or changing this key's record. Under READ
        // COMMITTED its committed version, if there is one, still answers a replay, a mismatch
        // or an in_progress with the owner's attempt and lease; anything else (no committed
        // row, a takeover that would have to wait) is in_progress with nothing known.
        // REPEATABLE READ / SERIALIZABLE answer that at once.
        if (!c->snapshot_xact)
            need_spi(&c->spi); // the direct insert that said Busy did not enter it
        if (c->snapshot_xact || exec(plan_get(), c->keyv, nullptr, false, 1) == 0) {
            c->res.outcome = "in_progress";
            return Step::Done;
        }
    } else {
        // The insert has waited for any transaction that was inserting or changing the record:
        // this read sees the latest committed state.
        SPIPlanPtr get = c->snapshot_xact ? saved_plan(&plan_get_share, SQL_GET_SHARE, 2, KEY_TYPES)
                                          : plan_get();
        if (exec(get, c->keyv, nullptr, false, 1) == 0)
            return Step::Again;
    }
    read_spi_record(c->outer, rec);
    return Step::Found;
}

// The compare-and-set takeover of a record decided d (Fresh, Reclaim or Retry): Done, or
// Again when the record changed since it was read.
Step take_over(Claim *c, const idem::RecordState &st, idem::ClaimDecision d) {
    int32 current = st.attempt;
    int32 next = idem::pg::call_cpp([&] { return idem::next_attempt(current); }); // 22003 at max
    c->times = claim_times(c->now, c->lease_us, c->ttl_us);
    bool fresh = d == idem::ClaimDecision::Fresh;
    need_spi(&c->spi);
    Datum take[10] = {c->keyv[0],
                      c->keyv[1],
                      Int32GetDatum(st.attempt),
                      c->fingerprint,
                      TimestampTzGetDatum(c->now),
                      TimestampTzGetDatum(c->times.lease_expires),
                      TimestampTzGetDatum(c->times.expires),
                      BoolGetDatum(fresh),
                      CStringGetTextDatum(status_text(st.status)),
                      BoolGetDatum(st.retryable)};
    char take_nulls[10] = {' ', ' ', ' ', c->fp_null ? 'n' : ' ', ' ', ' ', ' ', ' ', ' ', ' '};
    saved_plan(&plan_take, SQL_TAKE, 10, TAKE_TYPES);
    if (exec(plan_take, take, take_nulls, false, 0) != 1)
        return Step::Again;
    c->res.outcome = idem::pg::call_cpp([&] { return idem::outcome_name(d); });
    set_out(&c->res, O_ATTEMPT, Int32GetDatum(next));
    set_out(&c->res, O_LEASE, TimestampTzGetDatum(c->times.lease_expires));
    set_out(&c->res, O_EXPIRES, TimestampTzGetDatum(c->times.expires));
    return Step::Done;
}

// Decides on the existing record rec (core/lease.hpp): Done, or Again after a lost takeover.
Step decide(Claim *c, const idem::pg::StoredRecord &rec, bool busy) {
    c->now = GetCurrentTimestamp();
    idem::RecordState st = record_state(rec);
    bool fp_equal = bytea_equal(rec.fingerprint_null, rec.fingerprint, c->fp_null, c->fingerprint);
    TimestampTz now = c->now;
    idem::ClaimDecision d =
        idem::pg::call_cpp([&] { return idem::decide_claim(st, fp_equal, now); });
    ClaimResult *res = &c->res;
    switch (d) {
    case idem::ClaimDecision::Mismatch:
        res->outcome = "mismatch";
        set_out(res, O_EXPIRES, TimestampTzGetDatum(rec.expires_at));
        return Step::Done;
    case idem::ClaimDecision::Replay:
        res->outcome = "replayed";
        set_out(res, O_ATTEMPT, Int32GetDatum(rec.attempt));
        if (!rec.resource_id_null)
            set_out(res, O_RESOURCE_ID, rec.resource_id);
        if (!rec.response_null)
            set_out(res, O_RESPONSE, rec.response);
        if (!rec.response_status_null)
            set_out(res, O_STATUS, Int32GetDatum(rec.response_status));
        if (!rec.body_null)
            set_out(res, O_BODY, rec.body);
        if (!rec.headers_null)
            set_out(res, O_HEADERS, rec.headers);
        set_out(res, O_EXPIRES, TimestampTzGetDatum(rec.expires_at));
        return Step::Done;
    case idem::ClaimDecision::InProgress:
        res->outcome = "in_progress";
        set_out(res, O_ATTEMPT, Int32GetDatum(st.attempt));
        set_out(res, O_LEASE, TimestampTzGetDatum(st.lease_expires));
        set_out(res, O_EXPIRES, TimestampTzGetDatum(rec.expires_at));
        return Step::Done;
    case idem::ClaimDecision::Fresh:
    case idem::ClaimDecision::Reclaim:
    case idem::ClaimDecision::Retry:
        break;
    }
    if (busy) { // the takeover would wait for the transaction holding the record
        res->outcome = "in_progress";
        return Step::Done;
    }
    return take_over(c, st, d);
}

// One round: insert the key, or read its record and decide on it.
Step claim_round(Claim *c) {
    bool inserted = false, busy = false;
    idem::pg::StoredRecord rec;
    Step s = c->direct ? insert_direct(c, &rec, &inserted, &busy) : Step::Next;
    if (s == Step::Again)
        return s;
    if (s == Step::Next && !inserted && !busy)
        inserted = insert_sql(c, &busy);
    if (inserted) {
        claimed(c);
        return Step::Done;
    }
    if (s == Step::Next) {
        s = read_existing(c, busy, &rec);
        if (s != Step::Found)
            return s;
    }
    return decide(c, rec, busy);
}

} // namespace

// (records.hpp) One claim: its rounds until an outcome is decided, then its result row.
void idem::pg::records::claim_row(FunctionCallInfo fcinfo, Datum *values, bool *nulls) {
    static_assert(O_COUNT == CLAIM_COLUMNS, "idem_claim_result's columns");
    Claim c;
    claim_args(fcinfo, &c);
    for (int round = 0; c.res.outcome == nullptr; round++) {
        if (round == 10)
            ereport(ERROR, (errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
                            errmsg("could not claim the key: its record kept changing "
                                   "concurrently"),
                            errhint("Retry the transaction.")));
        if (round > 0) {
            c.now = GetCurrentTimestamp();
            c.times = claim_times(c.now, c.lease_us, c.ttl_us);
        }
        claim_round(&c);
    }
    if (c.spi.entered)
        idem::pg::leave(&c.spi.user);
    idem::operations::count_claim(c.res.outcome);

    set_out(&c.res, O_OUTCOME, CStringGetTextDatum(c.res.outcome));
    memcpy(values, c.res.values, sizeof c.res.values);
    memcpy(nulls, c.res.nulls, sizeof c.res.nulls);
}

// idem_claim(scope, key, fingerprint, lease, ttl, wait): claims an Idempotency-Key.
IDEM_PG_FUNCTION(idem_claim) {
    Datum values[CLAIM_COLUMNS];
    bool nulls[CLAIM_COLUMNS];
    claim_row(fcinfo, values, nulls);
    PG_RETURN_DATUM(idem::pg::result_row(fcinfo, values, nulls));
}
