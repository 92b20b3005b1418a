// Outbox, the relay's side: idem_outbox_next (lease a batch, per key in emit order),
// idem_outbox_done, idem_outbox_fail and idem_outbox_requeue. Emitting is src/outbox.cpp; the
// leased-queue rules shared with the inbox are src/leased_queue.cpp.
//
// idem_outbox_next hands an event out only when no earlier event of its key is unfinished, and
// never skips one: it reads the queue of unfinished events from its start on every call, not
// from a high-water mark, so an event that
// committed late is still there (the key lock of src/outbox.cpp numbers a key's events in
// commit order).
#include "direct_access.hpp"
#include "arguments.hpp"
#include "limits.hpp"
#include "inbox.hpp"
#include "leased_queue.hpp"
#include "operations.hpp"
#include "outbox.hpp"
#include "settings.hpp"
#include "tenants.hpp"

extern "C" {
#include "funcapi.h"
#include "utils/timestamp.h"
#include "utils/array.h"
#include "utils/tuplestore.h"
#include "catalog/pg_type_d.h"
}

namespace {

using namespace idem::pg;
using namespace idem::pg::outbox;
using idem::pg::inbox::checked_varlena;

// The table's life stage, which its partial indexes read (src/sql/idempotency.sql): expires_at
// is NULL while an event is pending or leased, its retention when done, infinity when dead. A
// lease (pending <-> leased) changes no indexed column, so its new row version is a HOT one.
#define DEAD_EXPIRES "'infinity'::pg_catalog.timestamptz"
// The earlier event p not done: pending, leased or dead (the predicate of the index outbox_key).
#define P_UNFINISHED                                                                               \
    "AND (p.expires_at IS NULL OR p.expires_at OPERATOR(pg_catalog.=) " DEAD_EXPIRES ") "
// An expired lease that used up the attempt budget ($5 > 0) makes the event dead instead.
#define LEASE_USED_UP                                                                              \
    "(o.status OPERATOR(pg_catalog.=) 'leased' AND $5 OPERATOR(pg_catalog.>) 0 AND o.attempt "     \
    "OPERATOR(pg_catalog.-) o.attempt_base OPERATOR(pg_catalog.>=) $5)"
// An event due: pending from available_at, or leased with its lease expired; not done or dead
// (expires_at NULL: the queue index's predicate). Checked when the candidates are read and again
// when they are locked.
#define OUTBOX_DUE                                                                                 \
    "s.topic OPERATOR(pg_catalog.=) $1 AND s.expires_at IS NULL "                                  \
    "AND s.status OPERATOR(pg_catalog.=) ANY ('{pending,leased}'::pg_catalog.text[]) "             \
    "AND ((s.status OPERATOR(pg_catalog.=) 'pending' AND s.available_at OPERATOR(pg_catalog.<=) "  \
    "$2) "                                                                                         \
    "OR (s.status OPERATOR(pg_catalog.=) 'leased' AND s.lease_expires_at OPERATOR(pg_catalog.<=) " \
    "$2)) "
// ... of a key with no earlier unfinished event ($6: a dead one counts as unfinished).
#define OUTBOX_KEY_FREE                                                                            \
    "AND (s.key IS NULL OR NOT EXISTS (SELECT FROM idempotency.outbox p "                          \
    "WHERE p.topic OPERATOR(pg_catalog.=) $1 AND p.key OPERATOR(pg_catalog.=) s.key "              \
    "AND p.seq OPERATOR(pg_catalog.<) s.seq " P_UNFINISHED                                         \
    "AND p.status OPERATOR(pg_catalog.<>) 'done' "                                                 \
    "AND ($6 OR p.status OPERATOR(pg_catalog.<>) 'dead'))) "
// The batch is taken in rounds of two statements, each on a snapshot of its own, so that no
// statement walks the queue for long: the candidates, the due events of free keys after seq $7
// in emit order (at most $8), read without locks; then those of them still due, locked (others'
// locks are skipped) and leased by row address. One statement that both walked and locked, on
// the snapshot of its start, saw every event the other relays took since as pending and
// re-checked each on its newest version: under four relays on two cores it fell behind them for
// seconds and held back every backend's xmin (bench/RESULTS.md, the HOT lease).
#define OUTBOX_TAKE_SET                                                                            \
    "UPDATE idempotency.outbox AS o SET "                                                          \
    "status = CASE WHEN " LEASE_USED_UP " THEN 'dead' ELSE 'leased' END, "                         \
    "attempt = CASE WHEN " LEASE_USED_UP                                                           \
    " THEN o.attempt ELSE o.attempt OPERATOR(pg_catalog.+) 1 END, "                                \
    "lease_expires_at = CASE WHEN " LEASE_USED_UP " THEN NULL ELSE $4 END, "                       \
    "last_error = CASE WHEN " LEASE_USED_UP                                                        \
    " THEN 'the lease of the last attempt expired: no attempt left' ELSE o.last_error END, "       \
    "expires_at = CASE WHEN " LEASE_USED_UP " THEN " DEAD_EXPIRES " ELSE o.expires_at END, "       \
    "updated_at = $2 "
#define OUTBOX_RETURNING                                                                           \
    " RETURNING o.event_id, o.key, o.payload, o.headers, o.attempt, o.emitted_at, "                \
    "o.lease_expires_at, o.payload_bytes, o.dedup_key, o.status, o.seq) "                          \
    "SELECT * FROM taken ORDER BY seq"
const char *const SQL_CANDIDATES =
    "SELECT s.ctid, s.seq FROM idempotency.outbox s WHERE " OUTBOX_DUE OUTBOX_KEY_FREE
    "AND s.seq OPERATOR(pg_catalog.>) $7 ORDER BY s.seq LIMIT $8";
const Oid CANDIDATES_TYPES[] = {TEXTOID, TIMESTAMPTZOID, INT8OID, TIMESTAMPTZOID,
                                INT4OID, BOOLOID,        INT8OID, INT8OID};
const char *const SQL_NEXT =
    "WITH taken AS (" OUTBOX_TAKE_SET "WHERE o.topic OPERATOR(pg_catalog.=) $1 AND o.ctid "
    "OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT s.ctid FROM idempotency.outbox s "
    "WHERE s.ctid OPERATOR(pg_catalog.=) ANY ($7) AND " OUTBOX_DUE
    "ORDER BY s.seq LIMIT $3 FOR UPDATE SKIP LOCKED))" OUTBOX_RETURNING;
const Oid NEXT_TYPES[] = {TEXTOID, TIMESTAMPTZOID, INT8OID,    TIMESTAMPTZOID,
                          INT4OID, BOOLOID,        TIDARRAYOID};
// On Citus (no row addresses, 0A000): the batch joined back by key, planned per call.
const char *const SQL_NEXT_CITUS =
    "WITH picked AS (SELECT s.event_id FROM idempotency.outbox s WHERE " OUTBOX_DUE OUTBOX_KEY_FREE
    "ORDER BY s.seq LIMIT $3 FOR UPDATE SKIP LOCKED), "
    "taken AS (" OUTBOX_TAKE_SET "FROM picked WHERE o.topic OPERATOR(pg_catalog.=) $1 "
    "AND o.event_id OPERATOR(pg_catalog.=) picked.event_id" OUTBOX_RETURNING;
const Oid CITUS_NEXT_TYPES[] = {TEXTOID, TIMESTAMPTZOID, INT8OID, TIMESTAMPTZOID, INT4OID, BOOLOID};
constexpr int NEXT_NCOLS = 9; // the result columns; RETURNING adds status and seq

// By event id, and by topic too when the caller names it (on Citus that routes to one shard).
#define WHERE_ID " WHERE o.event_id OPERATOR(pg_catalog.=) $1"
#define AND_TOPIC(n) " AND o.topic OPERATOR(pg_catalog.=) $" #n
#define OUTBOX_DONE                                                                                \
    "UPDATE idempotency.outbox AS o SET status = 'done', lease_expires_at = NULL, "                \
    "last_error = NULL, updated_at = $3, expires_at = $4" WHERE_ID                                 \
    " AND o.attempt OPERATOR(pg_catalog.=) $2 AND o.status OPERATOR(pg_catalog.=) 'leased'"
const char *const SQL_DONE[2] = {OUTBOX_DONE, OUTBOX_DONE AND_TOPIC(5)};
const Oid DONE_TYPES[] = {UUIDOID, INT4OID, TIMESTAMPTZOID, TIMESTAMPTZOID, TEXTOID};

// The row fail and requeue decide on, and refusals explain (locked: the decision holds).
#define OUTBOX_GET "SELECT o.status, o.attempt, o.attempt_base FROM idempotency.outbox o" WHERE_ID
const char *const SQL_GET[2] = {OUTBOX_GET " FOR UPDATE", OUTBOX_GET AND_TOPIC(2) " FOR UPDATE"};
const Oid GET_TYPES[] = {UUIDOID, TEXTOID};

// A failed attempt: pending again from $4, or dead ($3 false) with the error kept.
#define OUTBOX_FAIL                                                                                \
    "UPDATE idempotency.outbox AS o SET status = CASE WHEN $3 THEN 'pending' ELSE 'dead' END, "    \
    "available_at = CASE WHEN $3 THEN $4 ELSE o.available_at END, lease_expires_at = NULL, "       \
    "expires_at = CASE WHEN $3 THEN o.expires_at ELSE " DEAD_EXPIRES " END, "                      \
    "last_error = $5, updated_at = $6" WHERE_ID " AND o.attempt OPERATOR(pg_catalog.=) $2"
const char *const SQL_FAIL[2] = {OUTBOX_FAIL, OUTBOX_FAIL AND_TOPIC(7)};
const Oid FAIL_TYPES[] = {UUIDOID, INT4OID,        BOOLOID, TIMESTAMPTZOID,
                          TEXTOID, TIMESTAMPTZOID, TEXTOID};

// A dead event back in the queue, with a new attempt budget (attempt_base).
#define OUTBOX_REQUEUE                                                                             \
    "UPDATE idempotency.outbox AS o SET status = 'pending', available_at = $2, expires_at = "      \
    "NULL, "                                                                                       \
    "attempt_base = o.attempt, updated_at = $2" WHERE_ID                                           \
    " AND o.status OPERATOR(pg_catalog.=) 'dead'"
const char *const SQL_REQUEUE[2] = {OUTBOX_REQUEUE, OUTBOX_REQUEUE AND_TOPIC(3)};
const Oid REQUEUE_TYPES[] = {UUIDOID, TIMESTAMPTZOID, TEXTOID};

// On Citus, the topic of an event named by its id alone (one read of every shard).
const char *const SQL_TOPIC = "SELECT o.topic FROM idempotency.outbox o WHERE o.event_id "
                              "OPERATOR(pg_catalog.=) $1 LIMIT 1";
const Oid TOPIC_TYPES[] = {UUIDOID};

SPIPlanPtr plan_candidates, plan_next, plan_next_citus, plan_topic;
SPIPlanPtr plan_done[2], plan_get[2], plan_fail[2], plan_requeue[2];

// The optional topic argument argno (checked), or null.
bool topic_arg(FunctionCallInfo fcinfo, int argno, Datum *topic) {
    if (idem::pg::arg_null(fcinfo, argno))
        return false;
    *topic = checked_varlena(PG_GETARG_DATUM(argno), "topic", MAX_TOPIC, false);
    return true;
}

// The stored topic of an event (one read of every shard on Citus); false when none has it.
bool citus_topic_if_any(Datum id, Datum *topic) {
    Datum v[1] = {id};
    if (exec(saved_plan(&plan_topic, SQL_TOPIC, 1, TOPIC_TYPES, 0), v, nullptr, false, 1) == 0)
        return false;
    bool isnull;
    *topic = col(0, 1, &isnull);
    return true;
}

// On Citus, the topic of an event named without one, so that the statements that follow are
// routed to the topic's shard: Citus refuses a row lock in a multi-shard query (0A000), and
// fail, requeue and every refusal read the row FOR UPDATE. IK001 when no shard has the event.
// False (nothing read) when the outbox is not a Citus table.
bool citus_topic(Datum id, Datum *topic) {
    if (!citus_outbox())
        return false;
    if (!citus_topic_if_any(id, topic))
        queue::not_found(NAMES, "No such event: it was never emitted, or it was done and purged.");
    return true;
}

// The event's row, locked (status, attempt, attempt_base), or IK001.
struct Row {
    char status; // p(ending), l(eased), d(one) or dead: 'x'
    int32 attempt, attempt_base;
};
// The event's row, locked; false when there is none.
bool find_row(Datum id, bool has_topic, Datum topic, Row *row) {
    Datum v[2] = {id, topic};
    int t = has_topic ? 1 : 0;
    if (exec(saved_plan(&plan_get[t], SQL_GET[t], 1 + t, GET_TYPES), v, nullptr, false, 1) == 0)
        return false;
    bool isnull;
    text *st = DatumGetTextPP(col(0, 1, &isnull));
    const char *s = VARDATA_ANY(st);
    *row = Row{s[0] == 'd' && s[1] == 'e' ? 'x' : s[0], DatumGetInt32(col(0, 2, &isnull)),
               DatumGetInt32(col(0, 3, &isnull))};
    return true;
}

Row get_row(Datum id, bool has_topic, Datum topic) {
    Row r;
    if (!find_row(id, has_topic, topic, &r))
        queue::not_found(NAMES, has_topic
                                    ? "The topic has no such event: it was never emitted, or it "
                                      "was done and purged."
                                    : "No such event: it was never emitted, or it was done and "
                                      "purged.");
    return r;
}

// Why an attempt of the row cannot finish it: IK002 or IK003.
[[noreturn]] void refuse(const Row &r, int32 attempt, const char *action) {
    using queue::Found;
    Found f = r.status == 'l' ? Found::Leased : r.status == 'p' ? Found::Queued : Found::Finished;
    queue::refuse(NAMES, f, r.status == 'd' ? "done" : "dead", r.attempt, attempt, action);
}

// The done statement of one event; true when it finished it.
bool exec_done(Datum id, int32 attempt, bool has_topic, Datum topic, TimestampTz now,
               TimestampTz expires) {
    int t = has_topic ? 1 : 0;
    Datum v[5] = {id, Int32GetDatum(attempt), TimestampTzGetDatum(now),
                  TimestampTzGetDatum(expires), topic};
    return exec(saved_plan(&plan_done[t], SQL_DONE[t], 4 + t, DONE_TYPES), v, nullptr, false, 0) ==
           1;
}

// The row addresses of the candidates in the SPI result (column 1), as a tid[]; *last: the seq
// of the last one (column 2).
ArrayType *candidate_tids(uint64 n, int64 *last) {
    Datum *tids = static_cast<Datum *>(palloc(sizeof(Datum) * n));
    bool isnull;
    for (uint64 r = 0; r < n; r++)
        tids[r] = col(r, 1, &isnull); // construct_array copies them before the next statement
    *last = DatumGetInt64(col(n - 1, 2, &isnull));
    return construct_array(tids, static_cast<int>(n), TIDOID, sizeof(ItemPointerData), false,
                           TYPALIGN_SHORT);
}

// Leases up to batch events into the result in rounds (SQL_CANDIDATES above): each round reads a
// few more candidates than are still wanted, after the last round's, and leases those still due;
// it ends when the batch is full or the queue has no candidate left. A round never starts from a
// row address older than its own candidates, and the next call starts from the queue's start: an
// event that committed late is never skipped. v: the first six parameters of SQL_NEXT.
void lease_in_rounds(Datum *v, int64 batch, ReturnSetInfo *rsinfo) {
    constexpr int64 extra = 32; // candidates beyond the events wanted (taken by other relays)
    int64 last = PG_INT64_MIN;
    for (;;) {
        int64 left = batch - static_cast<int64>(tuplestore_tuple_count(rsinfo->setResult));
        if (left <= 0)
            return;
        Datum c[8] = {
            v[0], v[1], v[2], v[3], v[4], v[5], Int64GetDatum(last), Int64GetDatum(left + extra)};
        uint64 n = exec(saved_plan(&plan_candidates, SQL_CANDIDATES, 8, CANDIDATES_TYPES), c,
                        nullptr, false, 0);
        if (n == 0)
            return;
        Datum t[7] = {
            v[0], v[1], v[2], v[3], v[4], v[5], PointerGetDatum(candidate_tids(n, &last))};
        queue::lease_batch(saved_plan(&plan_next, SQL_NEXT, 7, NEXT_TYPES), t, 2, left, NEXT_NCOLS,
                           'l', idem::operations::OutboxDead, rsinfo);
        if (n < static_cast<uint64>(left + extra))
            return; // the queue had no more candidates
    }
}

} // namespace

// (src/outbox.hpp)
bool idem::pg::outbox::done_one(Datum id, int32 attempt, bool has_topic, Datum topic,
                                TimestampTz now, TimestampTz expires) {
    if (!has_topic && citus_outbox()) {
        if (!citus_topic_if_any(id, &topic))
            return false;
        has_topic = true;
    }
    return exec_done(id, attempt, has_topic, topic, now, expires);
}

// (src/outbox.hpp)
const char *idem::pg::outbox::fail_one(const Failure &f, Datum id, int32 attempt, bool has_topic,
                                       Datum topic, bool raise) {
    if (!has_topic && citus_outbox()) {
        if (!citus_topic_if_any(id, &topic))
            return nullptr;
        has_topic = true;
    }
    Row r;
    if (!find_row(id, has_topic, topic, &r)) {
        if (raise)
            get_row(id, has_topic, topic); // IK001
        return nullptr;
    }
    if (r.status != 'l' || r.attempt != attempt) {
        if (raise)
            refuse(r, attempt, "fail");
        return nullptr;
    }
    queue::Retry retry =
        queue::decide_retry(f.retryable, attempt - r.attempt_base, f.max_attempts, f.now);
    int t = has_topic ? 1 : 0;
    Datum v[7] = {id,
                  Int32GetDatum(attempt),
                  BoolGetDatum(retry.retry),
                  TimestampTzGetDatum(retry.available),
                  f.error,
                  TimestampTzGetDatum(f.now),
                  topic};
    char n[7] = {' ', ' ', ' ', ' ', f.error_null ? 'n' : ' ', ' ', ' '};
    if (exec(saved_plan(&plan_fail[t], SQL_FAIL[t], 6 + t, FAIL_TYPES), v, n, false, 0) != 1)
        elog(ERROR, "outbox event of the owning attempt changed concurrently");
    idem::operations::count(retry.retry ? idem::operations::OutboxRetried
                                        : idem::operations::OutboxDead);
    return retry.retry ? "pending" : "dead";
}

// idem_outbox_next(topic, batch_size, lease): leases a batch of due events of a topic.
IDEM_PG_FUNCTION(idem_outbox_next) {
    require_arg(fcinfo, 0, "topic");
    Datum topic = checked_varlena(PG_GETARG_DATUM(0), "topic", MAX_TOPIC, false);
    idem::pg::tenants::check(idem::pg::tenants::TOPIC, topic);
    int32 batch = queue::batch_arg(fcinfo, 1, 100);
    int64 lease_us = inbox::positive_interval_arg(fcinfo, 2, idem::settings::outbox_lease_s,
                                                  "lease", "idempotency.outbox_lease");
    int32 max_attempts = queue::max_attempts_arg(fcinfo, -1);
    bool dead_blocks = idem::settings::outbox_dead_blocks_key();
    TimestampTz now = GetCurrentTimestamp();
    TimestampTz lease_expires = inbox::add_usec(now, lease_us);
    InitMaterializedSRF(fcinfo, 0);
    ReturnSetInfo *rsinfo = reinterpret_cast<ReturnSetInfo *>(fcinfo->resultinfo);

    SavedUser su;
    enter(&su);
    Datum v[6] = {topic,
                  TimestampTzGetDatum(now),
                  Int64GetDatum(batch),
                  TimestampTzGetDatum(lease_expires),
                  Int32GetDatum(max_attempts),
                  BoolGetDatum(dead_blocks)};
    if (citus_outbox())
        queue::lease_batch(saved_plan(&plan_next_citus, SQL_NEXT_CITUS, 6, CITUS_NEXT_TYPES, 0), v,
                           2, batch, NEXT_NCOLS, 'l', idem::operations::OutboxDead, rsinfo);
    else
        lease_in_rounds(v, batch, rsinfo);
    leave(&su);
    return (Datum)0;
}

// idem_outbox_done(event_id, attempt, topic) -> 'done'
IDEM_PG_FUNCTION(idem_outbox_done) {
    require_arg(fcinfo, 0, "event_id");
    Datum id = PG_GETARG_DATUM(0);
    int32 attempt = queue::attempt_arg(fcinfo, 1, NAMES);
    Datum topic = (Datum)0;
    bool has_topic = topic_arg(fcinfo, 2, &topic);
    idem::pg::tenants::check_event(id, has_topic, topic);
    TimestampTz now = GetCurrentTimestamp();
    int64 ttl_us = static_cast<int64>(idem::settings::outbox_ttl_s()) * USECS_PER_SEC;
    TimestampTz expires = inbox::add_usec(now, ttl_us);

    SavedUser su;
    enter(&su);
    if (!has_topic)
        has_topic = citus_topic(id, &topic);
    if (!exec_done(id, attempt, has_topic, topic, now, expires))
        refuse(get_row(id, has_topic, topic), attempt, "complete");
    leave(&su);
    idem::operations::count(idem::operations::OutboxDone);
    PG_RETURN_TEXT_P(cstring_to_text("done"));
}

// idem_outbox_fail(event_id, attempt, retryable, error, topic) -> 'pending' | 'dead'
IDEM_PG_FUNCTION(idem_outbox_fail) {
    require_arg(fcinfo, 0, "event_id");
    Datum id = PG_GETARG_DATUM(0);
    int32 attempt = queue::attempt_arg(fcinfo, 1, NAMES);
    bool retryable = PG_ARGISNULL(2) ? true : PG_GETARG_BOOL(2);
    bool err_null = PG_ARGISNULL(3);
    Datum err = err_null ? (Datum)0 : PG_GETARG_DATUM(3);
    idem::pg::limits::check_size(err_null, err, idem::pg::limits::Cap::Error, "error");
    Datum topic = (Datum)0;
    bool has_topic = topic_arg(fcinfo, 4, &topic);
    idem::pg::tenants::check_event(id, has_topic, topic);
    int32 max_attempts = queue::max_attempts_arg(fcinfo, -1);
    TimestampTz now = GetCurrentTimestamp();

    SavedUser su;
    enter(&su);
    if (!has_topic)
        has_topic = citus_topic(id, &topic);
    Failure f{retryable, err_null, err, max_attempts, now};
    const char *status = fail_one(f, id, attempt, has_topic, topic, true);
    leave(&su);
    PG_RETURN_TEXT_P(cstring_to_text(status));
}

// idem_outbox_requeue(event_id, topic) -> 'pending': a dead event queued again.
IDEM_PG_FUNCTION(idem_outbox_requeue) {
    require_arg(fcinfo, 0, "event_id");
    Datum id = PG_GETARG_DATUM(0);
    Datum topic = (Datum)0;
    bool has_topic = topic_arg(fcinfo, 1, &topic);
    idem::pg::tenants::check_event(id, has_topic, topic);
    TimestampTz now = GetCurrentTimestamp();

    SavedUser su;
    enter(&su);
    if (!has_topic)
        has_topic = citus_topic(id, &topic);
    int t = has_topic ? 1 : 0;
    Datum v[3] = {id, TimestampTzGetDatum(now), topic};
    if (exec(saved_plan(&plan_requeue[t], SQL_REQUEUE[t], 2 + t, REQUEUE_TYPES), v, nullptr, false,
             0) != 1) {
        Row r = get_row(id, has_topic, topic);
        const char *st = r.status == 'p' ? "pending" : r.status == 'l' ? "leased" : "done";
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("outbox event is not dead"),
                        errdetail("The event is %s; only a dead event can be requeued.", st)));
    }
    leave(&su);
    PG_RETURN_TEXT_P(cstring_to_text("pending"));
}
