// Outbox, the relay's side after the pick (src/outbox_next.cpp): idem_outbox_done,
// idem_outbox_fail and idem_outbox_requeue, and their single-event forms the batch forms use
// (src/outbox_batch.cpp). Emitting is src/outbox.cpp; the leased-queue rules shared with the
// inbox are src/leased_queue.cpp.
#include "direct_access.hpp"
#include "arguments.hpp"
#include "limits.hpp"
#include "inbox.hpp"
#include "leased_queue.hpp"
#include "counters.hpp"
#include "outbox.hpp"
#include "settings.hpp"
#include "tenants.hpp"

extern "C" {
#include "funcapi.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
#include "catalog/pg_type_d.h"
}

namespace {

using namespace idem::pg;
using namespace idem::pg::outbox;
using idem::pg::inbox::checked_varlena;

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
    "expires_at = CASE WHEN $3 THEN o.expires_at ELSE " OUTBOX_DEAD_EXPIRES " END, "               \
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

SPIPlanPtr plan_topic;
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
