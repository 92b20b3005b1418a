// Outbox, the relay's batch forms over arrays of event ids and attempts: idem_outbox_done_batch
// (one statement for the batch) and idem_outbox_fail_batch (the single form's statements per
// event: failures are the rare path). The single forms are src/outbox_queue.cpp. Each event is
// fenced by its own attempt; an event the batch cannot finish (fenced, already finished,
// unknown) is left out, never raised: the rest of the batch is finished.
#include "arguments.hpp"
#include "limits.hpp"
#include "inbox.hpp"
#include "leased_queue.hpp"
#include "counters.hpp"
#include "outbox.hpp"
#include "settings.hpp"
#include "spi_util.hpp"
#include "tenants.hpp"

extern "C" {
#include "catalog/pg_type_d.h"
#include "funcapi.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
}

namespace {

using namespace idem::pg;
using namespace idem::pg::outbox;
using idem::pg::inbox::checked_varlena;

// The batch joined to the table by event id (the primary key's first column), each row matched on
// its own attempt and leased; by topic too when the caller names it.
#define OUTBOX_DONE_BATCH                                                                          \
    "UPDATE idempotency.outbox AS o SET status = 'done', lease_expires_at = NULL, "                \
    "last_error = NULL, updated_at = $3, expires_at = $4 "                                         \
    "FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2)) AS b(event_id, attempt) "       \
    "WHERE o.event_id OPERATOR(pg_catalog.=) b.event_id "                                          \
    "AND o.attempt OPERATOR(pg_catalog.=) b.attempt "                                              \
    "AND o.status OPERATOR(pg_catalog.=) 'leased'"
const char *const SQL_DONE_BATCH[2] = {
    OUTBOX_DONE_BATCH " RETURNING o.event_id",
    OUTBOX_DONE_BATCH " AND o.topic OPERATOR(pg_catalog.=) $5 RETURNING o.event_id"};
const Oid DONE_BATCH_TYPES[] = {UUIDARRAYOID, INT4ARRAYOID, TIMESTAMPTZOID, TIMESTAMPTZOID,
                                TEXTOID};
SPIPlanPtr plan_done_batch[2];

// One result row per finished event.
void put_id(ReturnSetInfo *rsinfo, Datum id) {
    bool isnull = false;
    tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, &id, &isnull);
}

} // namespace

// idem_outbox_done_batch(event_ids, attempts, topic) -> SETOF uuid: the events it finished.
IDEM_PG_FUNCTION(idem_outbox_done_batch) {
    Datum *ids;
    int32 *attempts;
    int n = queue::batch_arrays(fcinfo, 0, UUIDOID, &ids, &attempts);
    Datum topic = (Datum)0;
    bool has_topic = !arg_null(fcinfo, 2);
    if (has_topic)
        topic = checked_varlena(PG_GETARG_DATUM(2), "topic", MAX_TOPIC, false);
    for (int i = 0; i < n; i++)
        idem::pg::tenants::check_event(ids[i], has_topic, topic);
    TimestampTz now = GetCurrentTimestamp();
    int64 ttl_us = static_cast<int64>(idem::settings::outbox_ttl_s()) * USECS_PER_SEC;
    TimestampTz expires = inbox::add_usec(now, ttl_us);
    InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC); // one column, event_id
    ReturnSetInfo *rsinfo = reinterpret_cast<ReturnSetInfo *>(fcinfo->resultinfo);
    if (n == 0)
        return (Datum)0;

    SavedUser su;
    enter(&su);
    uint64 done = 0;
    if (citus_outbox()) {
        // Citus routes a statement by topic: one event at a time (src/outbox_queue.cpp)
        for (int i = 0; i < n; i++)
            if (done_one(ids[i], attempts[i], has_topic, topic, now, expires)) {
                put_id(rsinfo, ids[i]);
                done++;
            }
    } else {
        int t = has_topic ? 1 : 0;
        Datum v[5] = {PG_GETARG_DATUM(0), PG_GETARG_DATUM(1), TimestampTzGetDatum(now),
                      TimestampTzGetDatum(expires), topic};
        done = exec(saved_plan(&plan_done_batch[t], SQL_DONE_BATCH[t], 4 + t, DONE_BATCH_TYPES), v,
                    nullptr, false, 0);
        for (uint64 r = 0; r < done; r++) {
            bool isnull;
            put_id(rsinfo, col(r, 1, &isnull));
        }
    }
    leave(&su);
    idem::operations::count(idem::operations::OutboxDone, done);
    return (Datum)0;
}

// idem_outbox_fail_batch(event_ids, attempts, retryable, error, topic) -> (event_id, status)
// for each event it failed: pending (queued again after its backoff) or dead.
IDEM_PG_FUNCTION(idem_outbox_fail_batch) {
    Datum *ids;
    int32 *attempts;
    int n = queue::batch_arrays(fcinfo, 0, UUIDOID, &ids, &attempts);
    Failure f{true, arg_null(fcinfo, 3), (Datum)0, queue::max_attempts_arg(fcinfo, -1),
              GetCurrentTimestamp()};
    if (!arg_null(fcinfo, 2))
        f.retryable = PG_GETARG_BOOL(2);
    if (!f.error_null)
        f.error = PG_GETARG_DATUM(3);
    idem::pg::limits::check_size(f.error_null, f.error, idem::pg::limits::Cap::Error, "error");
    Datum topic = (Datum)0;
    bool has_topic = !arg_null(fcinfo, 4);
    if (has_topic)
        topic = checked_varlena(PG_GETARG_DATUM(4), "topic", MAX_TOPIC, false);
    for (int i = 0; i < n; i++)
        idem::pg::tenants::check_event(ids[i], has_topic, topic);
    InitMaterializedSRF(fcinfo, 0);
    ReturnSetInfo *rsinfo = reinterpret_cast<ReturnSetInfo *>(fcinfo->resultinfo);

    SavedUser su;
    enter(&su);
    for (int i = 0; i < n; i++) {
        const char *status = fail_one(f, ids[i], attempts[i], has_topic, topic, false);
        if (status == nullptr)
            continue;
        Datum row[2] = {ids[i], CStringGetTextDatum(status)};
        bool nulls[2] = {false, false};
        tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, row, nulls);
    }
    leave(&su);
    return (Datum)0;
}
