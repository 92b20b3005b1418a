// Inbox, the leased queue: idem_inbox_next (lease a batch of queued events), idem_inbox_done
// and idem_inbox_fail (finish one, fenced by its attempt), idem_inbox_done_batch (a worker's
// batch in one statement, each event fenced by its own attempt). Receiving is src/inbox.cpp.
#include "inbox.hpp"
#include "arguments.hpp"
#include "limits.hpp"
#include "leased_queue.hpp"
#include "counters.hpp"
#include "settings.hpp"
#include "tenants.hpp"

extern "C" {
#include "catalog/pg_type_d.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
}

namespace {

using namespace idem::pg;
using namespace idem::pg::inbox;

const char *const SQL_GET = "SELECT " EVENT_COLUMNS " FROM idempotency.inbox i" WHERE_EVENT;

// A finished event is kept for at least as long after the finish as its TTL was at receipt.
// Computed in UTC (timestamp arithmetic, a day is 24 hours) with immutable functions only:
// Citus refuses STABLE ones (timestamptz + interval) on columns of a distributed table (0A000).
#define KEEP_AFTER_FINISH(now)                                                                     \
    "GREATEST(i.expires_at, pg_catalog.timezone('UTC'::pg_catalog.text, "                          \
    "pg_catalog.timezone('UTC'::pg_catalog.text, " now ") OPERATOR(pg_catalog.+) "                 \
    "(i.expires_at OPERATOR(pg_catalog.-) i.received_at)))"

// Leases a batch: queued events that are due and leased events whose lease has expired, oldest
// first. The batch is picked into an array of row addresses (an InitPlan; the rows stay locked,
// so their addresses hold) and updated by them, so that the one generic plan kept for it (see
// idem_inbox_next) walks the queue index and then fetches the rows, whatever LIMIT $3 is and
// however small the table was when it was planned (a key lookup by event id got a sequential
// scan of a small inbox, and kept it while the queue churned). An expired lease whose attempt
// used up the budget ($5 > 0 attempts) makes the event failed (dead) instead; the caller leaves
// such rows out of the result. A queued event is due at available_at (a retry's backoff).
#define LEASE_USED_UP                                                                              \
    "(i.status OPERATOR(pg_catalog.=) 'processing' AND $5 OPERATOR(pg_catalog.>) 0 AND "           \
    "i.attempt OPERATOR(pg_catalog.>=) $5)"
#define TAKE_SET                                                                                   \
    "UPDATE idempotency.inbox AS i SET "                                                           \
    "status = CASE WHEN " LEASE_USED_UP " THEN 'failed' ELSE 'processing' END, "                   \
    "attempt = CASE WHEN " LEASE_USED_UP                                                           \
    " THEN i.attempt ELSE i.attempt OPERATOR(pg_catalog.+) 1 END, "                                \
    "lease_expires_at = CASE WHEN " LEASE_USED_UP " THEN NULL ELSE $4 END, "                       \
    "last_error = CASE WHEN " LEASE_USED_UP                                                        \
    " THEN 'the lease of the last attempt expired: no attempt left' ELSE i.last_error END, "       \
    "expires_at = CASE WHEN " LEASE_USED_UP                                                        \
    " THEN " KEEP_AFTER_FINISH("$2") " ELSE i.expires_at END, "                                    \
                                     "updated_at = $2 "
#define DUE                                                                                        \
    "((s.status OPERATOR(pg_catalog.=) 'received' AND (s.available_at IS NULL OR "                 \
    "s.available_at OPERATOR(pg_catalog.<=) $2)) OR s.lease_expires_at OPERATOR(pg_catalog.<=) "   \
    "$2)"
#define PICK                                                                                       \
    "s.consumer OPERATOR(pg_catalog.=) $1 "                                                        \
    "AND s.status OPERATOR(pg_catalog.=) ANY ('{received,processing}'::pg_catalog.text[]) "        \
    "AND " DUE " ORDER BY s.received_at, s.event_id LIMIT $3 FOR UPDATE SKIP LOCKED"
#define TAKEN_RETURNING                                                                            \
    " RETURNING i.event_id, i.event_type, i.payload, i.attempt, i.entity_key, i.entity_seq, "      \
    "i.payload_hash, i.received_at, i.lease_expires_at, i.status) "                                \
    "SELECT * FROM taken ORDER BY received_at, event_id"
const char *const SQL_NEXT =
    "WITH taken AS (" TAKE_SET "WHERE i.consumer OPERATOR(pg_catalog.=) $1 AND i.ctid "
    "OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT s.ctid FROM idempotency.inbox s WHERE " PICK
    "))" TAKEN_RETURNING;
// The same on a Citus table, which refuses the row addresses (0A000): the batch joined back by
// key, planned per call as Citus routes it to the consumer's shard.
const char *const SQL_NEXT_CITUS =
    "WITH picked AS (SELECT s.consumer, s.event_id FROM idempotency.inbox s WHERE " PICK
    "), taken AS (" TAKE_SET "FROM picked WHERE i.consumer OPERATOR(pg_catalog.=) picked.consumer "
    "AND i.event_id OPERATOR(pg_catalog.=) picked.event_id" TAKEN_RETURNING;
const Oid NEXT_TYPES[] = {TEXTOID, TIMESTAMPTZOID, INT8OID, TIMESTAMPTZOID, INT4OID};
constexpr int NEXT_NCOLS = 9; // the result columns; RETURNING adds status

const char *const SQL_DONE =
    "UPDATE idempotency.inbox AS i SET status = 'done', lease_expires_at = NULL, "
    "last_error = NULL, updated_at = $4, expires_at = " KEEP_AFTER_FINISH("$4") WHERE_EVENT
    " AND i.attempt OPERATOR(pg_catalog.=) $3 AND i.status OPERATOR(pg_catalog.=) 'processing' "
    "RETURNING i.entity_key, i.entity_seq";
const Oid DONE_TYPES[] = {TEXTOID, TEXTOID, INT4OID, TIMESTAMPTZOID};

// The batch: joined to the table by (consumer, event id), each row matched on its own attempt;
// returns each finished row's place in the arrays, for the entity guard in the callers' order.
const char *const SQL_DONE_BATCH =
    "UPDATE idempotency.inbox AS i SET status = 'done', lease_expires_at = NULL, "
    "last_error = NULL, updated_at = $4, expires_at = " KEEP_AFTER_FINISH(
        "$4") " FROM ROWS FROM (pg_catalog.unnest($2), pg_catalog.unnest($3)) WITH ORDINALITY "
              "AS b(event_id, attempt, ord) WHERE i.consumer OPERATOR(pg_catalog.=) $1 "
              "AND i.event_id OPERATOR(pg_catalog.=) b.event_id "
              "AND i.attempt OPERATOR(pg_catalog.=) b.attempt "
              "AND i.status OPERATOR(pg_catalog.=) 'processing' "
              "RETURNING b.ord, i.event_id, i.entity_key, i.entity_seq";
const Oid DONE_BATCH_TYPES[] = {TEXTOID, TEXTARRAYOID, INT4ARRAYOID, TIMESTAMPTZOID};

// A failed attempt: queued again, due at $7, when $5 (the caller decided the retry and its
// backoff, src/leased_queue.cpp), else failed (dead) and kept as long as a done event would be.
const char *const SQL_FAIL =
    "UPDATE idempotency.inbox AS i SET status = CASE WHEN $5 THEN 'received' ELSE 'failed' END, "
    "expires_at = CASE WHEN $5 THEN i.expires_at ELSE " KEEP_AFTER_FINISH(
        "$4") " END, "
              "available_at = CASE WHEN $5 THEN $7 ELSE NULL END, "
              "lease_expires_at = NULL, last_error = $6, updated_at = $4" WHERE_EVENT
              " AND i.attempt OPERATOR(pg_catalog.=) $3 AND i.status OPERATOR(pg_catalog.=) "
              "'processing' "
              "RETURNING i.status";
const Oid FAIL_TYPES[] = {TEXTOID, TEXTOID, INT4OID,       TIMESTAMPTZOID,
                          BOOLOID, TEXTOID, TIMESTAMPTZOID};

SPIPlanPtr plan_get, plan_next, plan_next_citus, plan_done, plan_done_batch, plan_fail;

const idem::pg::queue::Names NAMES{"inbox event", "idem_inbox_next", "received"};

// Consumer and event id (arguments 0 and 1 of every function here).
void consumer_event_args(FunctionCallInfo fcinfo, Datum *consumer, Datum *event_id) {
    require_arg(fcinfo, 0, "consumer");
    require_arg(fcinfo, 1, "event_id");
    *consumer = checked_varlena(PG_GETARG_DATUM(0), "consumer", MAX_CONSUMER, false);
    *event_id = checked_varlena(PG_GETARG_DATUM(1), "event_id", MAX_EVENT_ID, false);
    idem::pg::tenants::check(idem::pg::tenants::CONSUMER, *consumer);
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
    using idem::pg::queue::Found;
    saved_plan(&plan_get, SQL_GET, 2, KEY_TYPES);
    if (exec(plan_get, keyv, nullptr, false, 1) == 0) {
        char *detail = psprintf("Consumer \"%s\" has no event \"%s\": it was never received, or "
                                "it expired and was purged.",
                                TextDatumGetCString(keyv[0]), TextDatumGetCString(keyv[1]));
        idem::pg::queue::not_found(NAMES, detail);
    }
    char st = status_char(L_STATUS);
    bool isnull;
    int32 current = DatumGetInt32(col(0, L_ATTEMPT, &isnull));
    Found f = st == 'p' ? Found::Leased : st == 'r' ? Found::Queued : Found::Finished;
    idem::pg::queue::refuse(NAMES, f, status_name(st), current, attempt, action);
}

// An event a batch finished, copied out of SPI's memory (the entity guard runs statements).
struct Finished {
    int64 ord; // its place in the arrays, from 1
    Datum event_id;
    bool has_entity;
    Datum entity;
    int64 seq;
};

// Row r of the done statement's result (columns from first: event_id, entity_key, entity_seq).
Finished copy_finished(uint64 r, int first, int64 ord) {
    bool isnull, key_null, seq_null;
    Finished f{ord, PointerGetDatum(DatumGetTextPCopy(col(r, first, &isnull))), false, 0, 0};
    Datum entity = col(r, first + 1, &key_null);
    Datum seq = col(r, first + 2, &seq_null);
    if (!key_null && !seq_null) {
        f.has_entity = true;
        f.entity = PointerGetDatum(DatumGetTextPCopy(entity));
        f.seq = DatumGetInt64(seq);
    }
    return f;
}

int compare_ord(const void *a, const void *b) {
    int64 x = static_cast<const Finished *>(a)->ord, y = static_cast<const Finished *>(b)->ord;
    return x < y ? -1 : x > y ? 1 : 0;
}

// The events of the arrays that the batch finished, in the arrays' order: one statement, or on
// Citus the single form's statement per event (routed by consumer).
int finish_batch(Datum consumer, Datum ids, Datum attempts, Datum *id, int32 *attempt, int n,
                 TimestampTz now, Finished **out) {
    *out = static_cast<Finished *>(palloc(sizeof(Finished) * (n > 0 ? n : 1)));
    int done = 0;
    if (inbox_on_citus()) {
        saved_plan(&plan_done, SQL_DONE, 4, DONE_TYPES);
        for (int i = 0; i < n; i++) {
            Datum v[4] = {consumer, id[i], Int32GetDatum(attempt[i]), TimestampTzGetDatum(now)};
            if (exec(plan_done, v, nullptr, false, 0) == 1) {
                bool key_null, seq_null;
                Datum entity = col(0, 1, &key_null);
                Datum seq = col(0, 2, &seq_null);
                Finished f{i + 1, PointerGetDatum(DatumGetTextPCopy(id[i])), false, 0, 0};
                if (!key_null && !seq_null)
                    f = Finished{i + 1, f.event_id, true,
                                 PointerGetDatum(DatumGetTextPCopy(entity)), DatumGetInt64(seq)};
                (*out)[done++] = f;
            }
        }
        return done;
    }
    Datum v[4] = {consumer, ids, attempts, TimestampTzGetDatum(now)};
    uint64 rows = exec(saved_plan(&plan_done_batch, SQL_DONE_BATCH, 4, DONE_BATCH_TYPES), v,
                       nullptr, false, 0);
    for (uint64 r = 0; r < rows; r++) {
        bool isnull;
        (*out)[done++] = copy_finished(r, 2, DatumGetInt64(col(r, 1, &isnull)));
    }
    qsort(*out, done, sizeof(Finished), compare_ord);
    return done;
}

} // namespace

// idem_inbox_next(consumer, batch_size, lease): leases a batch of queued events.
IDEM_PG_FUNCTION(idem_inbox_next) {
    require_arg(fcinfo, 0, "consumer");
    Datum consumer = checked_varlena(PG_GETARG_DATUM(0), "consumer", MAX_CONSUMER, false);
    idem::pg::tenants::check(idem::pg::tenants::CONSUMER, consumer);
    int32 batch = idem::pg::queue::batch_arg(fcinfo, 1, 10);
    int64 lease_us = positive_interval_arg(fcinfo, 2, idem::settings::inbox_lease_s, "lease",
                                           "idempotency.inbox_lease");
    TimestampTz now = GetCurrentTimestamp();
    TimestampTz lease_expires = add_usec(now, lease_us);
    InitMaterializedSRF(fcinfo, 0);
    ReturnSetInfo *rsinfo = reinterpret_cast<ReturnSetInfo *>(fcinfo->resultinfo);

    int32 max_attempts = idem::pg::queue::max_attempts_arg(fcinfo, -1);

    idem::pg::SavedUser su;
    idem::pg::enter(&su);
    // One generic plan (the queue index in its order, then the rows by address): custom plans,
    // which the plan cache would keep choosing for LIMIT $3, cost a planning per call
    // (650k of 1.2M instructions).
    SPIPlanPtr plan = inbox_on_citus()
                          ? saved_plan(&plan_next_citus, SQL_NEXT_CITUS, 5, NEXT_TYPES, 0)
                          : saved_plan(&plan_next, SQL_NEXT, 5, NEXT_TYPES);
    Datum v[5] = {consumer, TimestampTzGetDatum(now), Int64GetDatum(batch),
                  TimestampTzGetDatum(lease_expires), Int32GetDatum(max_attempts)};
    idem::pg::queue::lease_batch(plan, v, 2, batch, NEXT_NCOLS, 'p', idem::operations::InboxDead,
                                 rsinfo);
    idem::pg::leave(&su);
    return (Datum)0;
}

// idem_inbox_done(consumer, event_id, attempt): done, or stale (a newer event of its entity was
// applied; the caller skips the effect).
IDEM_PG_FUNCTION(idem_inbox_done) {
    Datum consumer, event_id;
    consumer_event_args(fcinfo, &consumer, &event_id);
    int32 attempt = idem::pg::queue::attempt_arg(fcinfo, 2, NAMES);
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
// again, due after a backoff) or failed (dead).
IDEM_PG_FUNCTION(idem_inbox_fail) {
    Datum consumer, event_id;
    consumer_event_args(fcinfo, &consumer, &event_id);
    int32 attempt = idem::pg::queue::attempt_arg(fcinfo, 2, NAMES);
    bool retryable = PG_ARGISNULL(3) ? true : PG_GETARG_BOOL(3);
    bool err_null = PG_ARGISNULL(4);
    Datum err = err_null ? (Datum)0 : PG_GETARG_DATUM(4);
    idem::pg::limits::check_size(err_null, err, idem::pg::limits::Cap::Error, "error");
    int32 max_attempts = idem::pg::queue::max_attempts_arg(fcinfo, 5);
    TimestampTz now = GetCurrentTimestamp();
    // The event has no requeue: its attempts count from its receipt.
    idem::pg::queue::Retry retry =
        idem::pg::queue::decide_retry(retryable, attempt, max_attempts, now);

    idem::pg::SavedUser su;
    idem::pg::enter(&su);
    saved_plan(&plan_fail, SQL_FAIL, 7, FAIL_TYPES);
    Datum v[7] = {consumer,
                  event_id,
                  Int32GetDatum(attempt),
                  TimestampTzGetDatum(now),
                  BoolGetDatum(retry.retry),
                  err,
                  TimestampTzGetDatum(retry.available)};
    char n[7] = {' ', ' ', ' ', ' ', ' ', err_null ? 'n' : ' ', ' '};
    Datum keyv[2] = {consumer, event_id};
    if (exec(plan_fail, v, n, false, 0) != 1)
        explain_refusal(keyv, attempt, "fail");
    char status = status_char(1);
    idem::pg::leave(&su);
    idem::operations::count(status == 'r' ? idem::operations::InboxRetried
                                          : idem::operations::InboxDead);
    PG_RETURN_TEXT_P(cstring_to_text(status_name(status)));
}

// idem_inbox_done_batch(consumer, event_ids, attempts) -> (event_id, outcome) for each event it
// finished: done, or stale (the entity guard, as idem_inbox_done). An event it cannot finish
// (fenced, finished, unknown) is left out, never raised.
IDEM_PG_FUNCTION(idem_inbox_done_batch) {
    require_arg(fcinfo, 0, "consumer");
    Datum consumer = checked_varlena(PG_GETARG_DATUM(0), "consumer", MAX_CONSUMER, false);
    idem::pg::tenants::check(idem::pg::tenants::CONSUMER, consumer);
    Datum *ids;
    int32 *attempts;
    int n = idem::pg::queue::batch_arrays(fcinfo, 1, TEXTOID, &ids, &attempts);
    TimestampTz now = GetCurrentTimestamp();
    InitMaterializedSRF(fcinfo, 0);
    ReturnSetInfo *rsinfo = reinterpret_cast<ReturnSetInfo *>(fcinfo->resultinfo);
    if (n == 0)
        return (Datum)0;

    idem::pg::SavedUser su;
    idem::pg::enter(&su);
    Finished *f;
    int done =
        finish_batch(consumer, PG_GETARG_DATUM(1), PG_GETARG_DATUM(2), ids, attempts, n, now, &f);
    for (int i = 0; i < done; i++) {
        const char *outcome = "done";
        if (f[i].has_entity && !entity_apply(consumer, f[i].entity, f[i].seq, f[i].event_id, now)) {
            mark_stale(consumer, f[i].event_id, now);
            outcome = "stale";
        }
        Datum row[2] = {f[i].event_id, CStringGetTextDatum(outcome)};
        bool nulls[2] = {false, false};
        tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, row, nulls);
    }
    idem::pg::leave(&su);
    return (Datum)0;
}
