// Inbox, the leased queue: idem_inbox_next (lease a batch of queued events), idem_inbox_done
// and idem_inbox_fail (finish one, fenced by its attempt). Receiving is src/inbox.cpp.
#include "inbox.hpp"
#include "errors.hpp"
#include "settings.hpp"

extern "C" {
#include "funcapi.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
}

namespace {

using namespace idem::pg;
using namespace idem::pg::inbox;

constexpr int MAX_BATCH = 10000;

const char *const SQL_GET = "SELECT " EVENT_COLUMNS " FROM idempotency.inbox i" WHERE_EVENT;

// Leases a batch: queued events and leased events whose lease has expired, oldest first. The
// batch is picked into an array of row addresses (an InitPlan; the rows stay locked, so their
// addresses hold) and updated by them, so that the one generic plan kept for it (see
// idem_inbox_next) walks the queue index and then fetches the rows, whatever LIMIT $3 is and
// however small the table was when it was planned (a key lookup by event id got a sequential
// scan of a small inbox, and kept it while the queue churned).
const char *const SQL_NEXT =
    "WITH taken AS (UPDATE idempotency.inbox AS i SET status = 'processing', "
    "attempt = i.attempt OPERATOR(pg_catalog.+) 1, lease_expires_at = $4, updated_at = $2 "
    "WHERE i.consumer OPERATOR(pg_catalog.=) $1 AND i.ctid OPERATOR(pg_catalog.=) ANY "
    "(ARRAY(SELECT s.ctid FROM idempotency.inbox s "
    "WHERE s.consumer OPERATOR(pg_catalog.=) $1 "
    "AND s.status OPERATOR(pg_catalog.=) ANY ('{received,processing}'::pg_catalog.text[]) "
    "AND (s.status OPERATOR(pg_catalog.=) 'received' "
    "OR s.lease_expires_at OPERATOR(pg_catalog.<=) $2) "
    "ORDER BY s.received_at, s.event_id LIMIT $3 FOR UPDATE SKIP LOCKED)) "
    "RETURNING i.event_id, i.event_type, i.payload, i.attempt, i.entity_key, i.entity_seq, "
    "i.payload_hash, i.received_at, i.lease_expires_at) "
    "SELECT * FROM taken ORDER BY received_at, event_id";
// The same on a Citus table, which refuses the row addresses (0A000): the batch joined back by
// key, planned per call as Citus routes it to the consumer's shard.
const char *const SQL_NEXT_CITUS =
    "WITH picked AS (SELECT i.consumer, i.event_id FROM idempotency.inbox i "
    "WHERE i.consumer OPERATOR(pg_catalog.=) $1 "
    "AND i.status OPERATOR(pg_catalog.=) ANY ('{received,processing}'::pg_catalog.text[]) "
    "AND (i.status OPERATOR(pg_catalog.=) 'received' "
    "OR i.lease_expires_at OPERATOR(pg_catalog.<=) $2) "
    "ORDER BY i.received_at, i.event_id LIMIT $3 FOR UPDATE SKIP LOCKED), "
    "taken AS (UPDATE idempotency.inbox AS i SET status = 'processing', "
    "attempt = i.attempt OPERATOR(pg_catalog.+) 1, lease_expires_at = $4, updated_at = $2 "
    "FROM picked WHERE i.consumer OPERATOR(pg_catalog.=) picked.consumer "
    "AND i.event_id OPERATOR(pg_catalog.=) picked.event_id "
    "RETURNING i.event_id, i.event_type, i.payload, i.attempt, i.entity_key, i.entity_seq, "
    "i.payload_hash, i.received_at, i.lease_expires_at) "
    "SELECT * FROM taken ORDER BY received_at, event_id";
const Oid NEXT_TYPES[] = {TEXTOID, TIMESTAMPTZOID, INT8OID, TIMESTAMPTZOID};
constexpr int NEXT_NCOLS = 9;

// A finished event is kept for at least as long after the finish as its TTL was at receipt.
// Computed in UTC (timestamp arithmetic, a day is 24 hours) with immutable functions only:
// Citus refuses STABLE ones (timestamptz + interval) on columns of a distributed table (0A000).
#define KEEP_AFTER_FINISH                                                                          \
    "GREATEST(i.expires_at, pg_catalog.timezone('UTC'::pg_catalog.text, "                          \
    "pg_catalog.timezone('UTC'::pg_catalog.text, $4) OPERATOR(pg_catalog.+) "                      \
    "(i.expires_at OPERATOR(pg_catalog.-) i.received_at)))"

const char *const SQL_DONE =
    "UPDATE idempotency.inbox AS i SET status = 'done', lease_expires_at = NULL, "
    "last_error = NULL, updated_at = $4, expires_at = " KEEP_AFTER_FINISH WHERE_EVENT
    " AND i.attempt OPERATOR(pg_catalog.=) $3 AND i.status OPERATOR(pg_catalog.=) 'processing' "
    "RETURNING i.entity_key, i.entity_seq";
const Oid DONE_TYPES[] = {TEXTOID, TEXTOID, INT4OID, TIMESTAMPTZOID};

const char *const SQL_FAIL =
    "UPDATE idempotency.inbox AS i SET status = CASE WHEN $5 AND ($7 IS NULL OR "
    "i.attempt OPERATOR(pg_catalog.<) $7) THEN 'received' ELSE 'failed' END, "
    "expires_at = CASE WHEN $5 AND ($7 IS NULL OR i.attempt OPERATOR(pg_catalog.<) $7) "
    "THEN i.expires_at ELSE " KEEP_AFTER_FINISH " END, "
    "lease_expires_at = NULL, last_error = $6, updated_at = $4" WHERE_EVENT
    " AND i.attempt OPERATOR(pg_catalog.=) $3 AND i.status OPERATOR(pg_catalog.=) 'processing' "
    "RETURNING i.status";
const Oid FAIL_TYPES[] = {TEXTOID, TEXTOID, INT4OID, TIMESTAMPTZOID, BOOLOID, TEXTOID, INT4OID};

SPIPlanPtr plan_get, plan_next, plan_next_citus, plan_done, plan_fail;

// A positive attempt argument (the fencing token from idem_inbox_next).
int32 attempt_arg(FunctionCallInfo fcinfo, int argno) {
    require_arg(fcinfo, argno, "attempt");
    int32 attempt = PG_GETARG_INT32(argno);
    if (attempt <= 0)
        ereport(ERROR,
                (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("attempt must be positive"),
                 errdetail("attempt is the fencing token idem_inbox_next returned (1, 2, "
                           "...).")));
    return attempt;
}

// Consumer and event id (arguments 0 and 1 of every function here).
void consumer_event_args(FunctionCallInfo fcinfo, Datum *consumer, Datum *event_id) {
    require_arg(fcinfo, 0, "consumer");
    require_arg(fcinfo, 1, "event_id");
    *consumer = checked_varlena(PG_GETARG_DATUM(0), "consumer", MAX_CONSUMER, false);
    *event_id = checked_varlena(PG_GETARG_DATUM(1), "event_id", MAX_EVENT_ID, false);
}

// The name of a status from its first letter (status_char).
const char *status_name(char c) {
    switch (c) {
    case 'r':
        return "received";
    case 'p':
        return "processing";
    case 'd':
        return "done";
    case 'f':
        return "failed";
    default:
        return "stale";
    }
}

// Why a done/fail of (consumer, event_id, attempt) matched no leased row: raises IK001, IK002
// or IK003.
[[noreturn]] void explain_refusal(Datum *keyv, int32 attempt, const char *action) {
    saved_plan(&plan_get, SQL_GET, 2, KEY_TYPES);
    if (exec(plan_get, keyv, nullptr, false, 1) == 0)
        ereport(ERROR,
                (errcode(IK_NOT_FOUND), errmsg("inbox event not found"),
                 errdetail("Consumer \"%s\" has no event \"%s\": it was never received, or it "
                           "expired and was purged.",
                           TextDatumGetCString(keyv[0]), TextDatumGetCString(keyv[1]))));
    char st = status_char(L_STATUS);
    bool isnull;
    int32 current = DatumGetInt32(col(0, L_ATTEMPT, &isnull));
    if (st == 'p' || st == 'r') {
        if (st == 'p' && current == attempt)
            elog(ERROR, "inbox event of the owning attempt changed concurrently");
        ereport(ERROR,
                (errcode(IK_FENCED), errmsg("attempt %d no longer owns this event", attempt),
                 st == 'p' ? errdetail("The current attempt is %d: the lease expired and "
                                       "another worker took the event.",
                                       current)
                 : current == 0
                     ? errdetail("The event is queued and was never taken by idem_inbox_next.")
                     : errdetail("The event is queued again after attempt %d failed.", current),
                 errhint("Do not %s it; roll back this attempt's effects.", action)));
    }
    ereport(ERROR, (errcode(IK_FINISHED), errmsg("the event is already %s", status_name(st)),
                    errdetail("Attempt %d finished it.", current)));
}

} // namespace

// idem_inbox_next(consumer, batch_size, lease): leases a batch of queued events.
IDEM_PG_FUNCTION(idem_inbox_next) {
    require_arg(fcinfo, 0, "consumer");
    Datum consumer = checked_varlena(PG_GETARG_DATUM(0), "consumer", MAX_CONSUMER, false);
    int32 batch = PG_ARGISNULL(1) ? 10 : PG_GETARG_INT32(1);
    if (batch < 1 || batch > MAX_BATCH)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("batch_size must be between 1 and %d", MAX_BATCH)));
    int64 lease_us = positive_interval_arg(fcinfo, 2, idem::settings::inbox_lease_s, "lease",
                                           "idempotency.inbox_lease");
    TimestampTz now = GetCurrentTimestamp();
    TimestampTz lease_expires = add_usec(now, lease_us);
    InitMaterializedSRF(fcinfo, 0);
    ReturnSetInfo *rsinfo = reinterpret_cast<ReturnSetInfo *>(fcinfo->resultinfo);

    idem::pg::SavedUser su;
    idem::pg::enter(&su);
    // One generic plan (the queue index in its order, then the rows by address): custom plans,
    // which the plan cache would keep choosing for LIMIT $3, cost a planning per call (issue 18:
    // 650k of 1.2M instructions).
    SPIPlanPtr plan = inbox_on_citus()
                          ? saved_plan(&plan_next_citus, SQL_NEXT_CITUS, 4, NEXT_TYPES, 0)
                          : saved_plan(&plan_next, SQL_NEXT, 4, NEXT_TYPES);
    Datum v[4] = {consumer, TimestampTzGetDatum(now), Int64GetDatum(batch),
                  TimestampTzGetDatum(lease_expires)};
    uint64 n = exec(plan, v, nullptr, false, 0);
    for (uint64 r = 0; r < n; r++) {
        Datum values[NEXT_NCOLS];
        bool nulls[NEXT_NCOLS];
        for (int c = 0; c < NEXT_NCOLS; c++)
            values[c] = col(r, c + 1, &nulls[c]);
        // tuplestore_putvalues copies the row into the tuplestore's own memory
        tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
    }
    idem::pg::leave(&su);
    return (Datum)0;
}

// idem_inbox_done(consumer, event_id, attempt): done, or stale (a newer event of its entity was
// applied; the caller skips the effect).
IDEM_PG_FUNCTION(idem_inbox_done) {
    Datum consumer, event_id;
    consumer_event_args(fcinfo, &consumer, &event_id);
    int32 attempt = attempt_arg(fcinfo, 2);
    TimestampTz now = GetCurrentTimestamp();
    const char *outcome = "done";

    idem::pg::SavedUser su;
    idem::pg::enter(&su);
    saved_plan(&plan_done, SQL_DONE, 4, DONE_TYPES);
    Datum v[4] = {consumer, event_id, Int32GetDatum(attempt), TimestampTzGetDatum(now)};
    Datum keyv[2] = {consumer, event_id};
    if (exec(plan_done, v, nullptr, false, 0) != 1)
        explain_refusal(keyv, attempt, "complete");
    bool key_null, seq_null;
    Datum entity = col(0, 1, &key_null);
    int64 seq = DatumGetInt64(col(0, 2, &seq_null));
    if (!key_null && !seq_null) {
        // the entity key lives in SPI memory that the next statement may free: copy it
        entity = PointerGetDatum(DatumGetTextPCopy(entity));
        if (!entity_apply(consumer, entity, seq, event_id, now)) {
            mark_stale(consumer, event_id, now);
            outcome = "stale";
        }
    }
    idem::pg::leave(&su);
    PG_RETURN_TEXT_P(cstring_to_text(outcome));
}

// idem_inbox_fail(consumer, event_id, attempt, retryable, error, max_attempts): received (queued
// again) or failed (dead).
IDEM_PG_FUNCTION(idem_inbox_fail) {
    Datum consumer, event_id;
    consumer_event_args(fcinfo, &consumer, &event_id);
    int32 attempt = attempt_arg(fcinfo, 2);
    bool retryable = PG_ARGISNULL(3) ? true : PG_GETARG_BOOL(3);
    bool err_null = PG_ARGISNULL(4);
    Datum err = err_null ? (Datum)0 : PG_GETARG_DATUM(4);
    bool max_null = PG_ARGISNULL(5);
    int32 max_attempts = max_null ? 0 : PG_GETARG_INT32(5);
    if (!max_null && max_attempts < 1)
        ereport(ERROR,
                (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("max_attempts must be positive"),
                 errhint("Pass NULL for no limit.")));
    TimestampTz now = GetCurrentTimestamp();
    char status = 'f';

    idem::pg::SavedUser su;
    idem::pg::enter(&su);
    saved_plan(&plan_fail, SQL_FAIL, 7, FAIL_TYPES);
    Datum v[7] = {consumer,
                  event_id,
                  Int32GetDatum(attempt),
                  TimestampTzGetDatum(now),
                  BoolGetDatum(retryable),
                  err,
                  Int32GetDatum(max_attempts)};
    char n[7] = {' ', ' ', ' ', ' ', ' ', err_null ? 'n' : ' ', max_null ? 'n' : ' '};
    Datum keyv[2] = {consumer, event_id};
    if (exec(plan_fail, v, n, false, 0) != 1)
        explain_refusal(keyv, attempt, "fail");
    status = status_char(1);
    idem::pg::leave(&su);
    PG_RETURN_TEXT_P(cstring_to_text(status_name(status)));
}
