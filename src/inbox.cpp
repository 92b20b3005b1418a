// Inbox: idem_inbox_receive, idem_inbox_next, idem_inbox_done, idem_inbox_fail.
//
// A first delivery is one saved INSERT ... ON CONFLICT DO NOTHING into idempotency.inbox, in the
// caller's transaction: a concurrent delivery of the same event waits for that transaction and
// then sees the committed row (duplicate) or, after a rollback, inserts it itself (new). Only an
// existing row is locked and compared (payload hash, TTL). A unique violation never escapes.
// The ordering guard keeps the last applied sequence number per (consumer, entity key) in
// idempotency.inbox_entities and advances it with an upsert whose WHERE refuses older events.
#include "pg_cpp.hpp"
#include "settings.hpp"
#include "lease.hpp"
#include "errors.hpp"
#include "spi_util.hpp"
#include "operations.hpp"

extern "C" {
#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "common/int.h"
#include "funcapi.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
}

namespace {

using idem::pg::col;
using idem::pg::exec;
using idem::pg::saved_plan;

using idem::pg::IK_FENCED;
using idem::pg::IK_FINISHED;
using idem::pg::IK_NOT_FOUND;
using idem::pg::require_arg;

// Limits on caller-supplied values (bytes); consumer + event id must fit a btree index entry.
constexpr size_t MAX_CONSUMER = 255;
constexpr size_t MAX_EVENT_ID = 1024;
constexpr size_t MAX_ENTITY_KEY = 1024;
constexpr size_t MAX_EVENT_TYPE = 255;
constexpr size_t MAX_HASH = 64;
constexpr int MAX_BATCH = 10000;

#define WHERE_EVENT                                                                                \
    " WHERE i.consumer OPERATOR(pg_catalog.=) $1 AND i.event_id OPERATOR(pg_catalog.=) $2"

// Insert of a first delivery; the reset of an expired finished row takes the same parameters.
const char *const SQL_INSERT =
    "INSERT INTO idempotency.inbox AS i (consumer, event_id, status, payload_hash, event_type, "
    "payload, entity_key, entity_seq, attempt, received_at, updated_at, expires_at) "
    "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10, $11) "
    "ON CONFLICT (consumer, event_id) DO NOTHING";
const char *const SQL_RESET =
    "UPDATE idempotency.inbox AS i SET status = $3, payload_hash = $4, event_type = $5, "
    "payload = $6, entity_key = $7, entity_seq = $8, attempt = $9, last_error = NULL, "
    "lease_expires_at = NULL, received_at = $10, updated_at = $10, expires_at = $11" WHERE_EVENT;
const Oid INSERT_TYPES[] = {TEXTOID, TEXTOID, TEXTOID, BYTEAOID,       TEXTOID,       BYTEAOID,
                            TEXTOID, INT8OID, INT4OID, TIMESTAMPTZOID, TIMESTAMPTZOID};

const char *const SQL_LOCK = "SELECT i.status, i.payload_hash, i.expires_at, i.attempt "
                             "FROM idempotency.inbox i" WHERE_EVENT " FOR UPDATE";
const char *const SQL_GET = "SELECT i.status, i.payload_hash, i.expires_at, i.attempt "
                            "FROM idempotency.inbox i" WHERE_EVENT;
enum LockCol { L_STATUS = 1, L_HASH, L_EXPIRES, L_ATTEMPT };
const Oid KEY_TYPES[] = {TEXTOID, TEXTOID};

const char *const SQL_MARK_STALE =
    "UPDATE idempotency.inbox AS i SET status = 'stale', lease_expires_at = NULL, "
    "updated_at = $3" WHERE_EVENT;
const Oid MARK_TYPES[] = {TEXTOID, TEXTOID, TIMESTAMPTZOID};

// Advances the entity's last applied sequence number; no row when the event is not newer.
const char *const SQL_ENTITY_APPLY =
    "INSERT INTO idempotency.inbox_entities AS e (consumer, entity_key, last_seq, event_id, "
    "updated_at) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (consumer, entity_key) DO UPDATE SET "
    "last_seq = EXCLUDED.last_seq, event_id = EXCLUDED.event_id, updated_at = "
    "EXCLUDED.updated_at WHERE e.last_seq OPERATOR(pg_catalog.<) EXCLUDED.last_seq";
const Oid ENTITY_APPLY_TYPES[] = {TEXTOID, TEXTOID, INT8OID, TEXTOID, TIMESTAMPTZOID};

const char *const SQL_ENTITY_GET =
    "SELECT e.last_seq FROM idempotency.inbox_entities e WHERE e.consumer "
    "OPERATOR(pg_catalog.=) $1 AND e.entity_key OPERATOR(pg_catalog.=) $2";

// Leases a batch: queued events and leased events whose lease has expired, oldest first.
const char *const SQL_NEXT =
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
#define KEEP_AFTER_FINISH                                                                          \
    "GREATEST(i.expires_at, $4 OPERATOR(pg_catalog.+) "                                            \
    "(i.expires_at OPERATOR(pg_catalog.-) i.received_at))"

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

SPIPlanPtr plan_insert, plan_reset, plan_lock, plan_get, plan_mark_stale, plan_entity_apply,
    plan_entity_get, plan_next, plan_done, plan_fail;

// A detoasted text/bytea datum whose length is checked: empty (unless allowed) → 22023, longer
// than max → 22001.
Datum checked_varlena(Datum d, const char *name, size_t max, bool allow_empty) {
    struct varlena *v = pg_detoast_datum_packed(reinterpret_cast<struct varlena *>(d));
    size_t len = VARSIZE_ANY_EXHDR(v);
    if (len == 0 && !allow_empty)
        ereport(ERROR,
                (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("%s must not be empty", name)));
    if (len > max)
        ereport(ERROR,
                (errcode(ERRCODE_STRING_DATA_RIGHT_TRUNCATION), errmsg("%s is too long", name),
                 errdetail("%s has %zu bytes; the maximum is %zu bytes.", name, len, max)));
    return PointerGetDatum(v);
}

// Microseconds of an interval; 22008 on overflow (run as C++ so that the core's error is used).
bool interval_usec(const Interval *iv, int64 *out, idem::pg::PendingError *pe) {
    int32 month = iv->month, day = iv->day;
    int64 time = iv->time;
    return idem::pg::run_cpp(*pe, [&] { *out = idem::interval_usec(month, day, time); });
}

// now + usec, or 22008.
TimestampTz add_usec(TimestampTz now, int64 usec) {
    TimestampTz out;
    if (pg_add_s64_overflow(now, usec, &out))
        ereport(ERROR,
                (errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE), errmsg("timestamp out of range"),
                 errdetail("The interval is too long to be added to the current time.")));
    return out;
}

// A positive interval argument in microseconds, or the setting (seconds) when NULL.
int64 positive_interval_arg(FunctionCallInfo fcinfo, int argno, int default_s, const char *name,
                            const char *example, const char *setting) {
    if (PG_ARGISNULL(argno))
        return static_cast<int64>(default_s) * USECS_PER_SEC;
    idem::pg::PendingError pe;
    int64 us = 0;
    if (!interval_usec(PG_GETARG_INTERVAL_P(argno), &us, &pe))
        idem::pg::raise(pe);
    if (us <= 0)
        ereport(
            ERROR,
            (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("%s must be positive", name),
             errhint("Pass an interval such as interval '1 minute', or NULL for %s.", setting)));
    return us;
}

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

// NULL-aware bytea equality; a missing hash on either side matches (nothing to compare).
bool hashes_match(bool a_null, Datum a, bool b_null, Datum b) {
    if (a_null || b_null)
        return true;
    bytea *x = DatumGetByteaPP(a);
    bytea *y = DatumGetByteaPP(b);
    return VARSIZE_ANY_EXHDR(x) == VARSIZE_ANY_EXHDR(y) &&
           memcmp(VARDATA_ANY(x), VARDATA_ANY(y), VARSIZE_ANY_EXHDR(x)) == 0;
}

// The first character of a status text column of the current SPI row.
char status_char(int attno) {
    bool isnull;
    text *t = DatumGetTextPP(col(0, attno, &isnull));
    // received, processing, done, failed, stale: the first letters differ
    return *VARDATA_ANY(t);
}

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

// Advances the ordering guard of (consumer, entity_key) to seq; false when the event is stale.
bool entity_apply(Datum consumer, Datum entity_key, int64 seq, Datum event_id, TimestampTz now) {
    saved_plan(&plan_entity_apply, SQL_ENTITY_APPLY, 5, ENTITY_APPLY_TYPES);
    Datum v[5] = {consumer, entity_key, Int64GetDatum(seq), event_id, TimestampTzGetDatum(now)};
    return exec(plan_entity_apply, v, nullptr, false, 0) == 1;
}

// True when (consumer, entity_key) already applied seq or a later event (no lock taken).
bool entity_stale(Datum consumer, Datum entity_key, int64 seq) {
    saved_plan(&plan_entity_get, SQL_ENTITY_GET, 2, KEY_TYPES);
    Datum v[2] = {consumer, entity_key};
    if (exec(plan_entity_get, v, nullptr, true, 1) == 0)
        return false;
    bool isnull;
    return DatumGetInt64(col(0, 1, &isnull)) >= seq;
}

void mark_stale(Datum consumer, Datum event_id, TimestampTz now) {
    saved_plan(&plan_mark_stale, SQL_MARK_STALE, 3, MARK_TYPES);
    Datum v[3] = {consumer, event_id, TimestampTzGetDatum(now)};
    if (exec(plan_mark_stale, v, nullptr, false, 0) != 1)
        elog(ERROR, "inbox event vanished while being marked stale");
}

// The arguments of one delivery; datums are text/bytea varlenas (payload may be either).
struct ReceiveArgs {
    Datum consumer, event_id;
    bool hash_null;
    Datum payload_hash;
    bool enqueue;
    bool type_null;
    Datum event_type;
    bool payload_null;
    Datum payload;
    bool entity_key_null;
    Datum entity_key;
    bool entity_seq_null;
    int64 entity_seq;
    int64 ttl_usec;
};

// Records one delivery and returns its outcome. Runs as the extension owner.
const char *receive(const ReceiveArgs *a) {
    Datum consumer = checked_varlena(a->consumer, "consumer", MAX_CONSUMER, false);
    Datum event_id = checked_varlena(a->event_id, "event_id", MAX_EVENT_ID, false);
    Datum hash =
        a->hash_null ? (Datum)0 : checked_varlena(a->payload_hash, "payload_hash", MAX_HASH, false);
    Datum type = a->type_null ? (Datum)0
                              : checked_varlena(a->event_type, "event_type", MAX_EVENT_TYPE, false);
    Datum entity = a->entity_key_null
                       ? (Datum)0
                       : checked_varlena(a->entity_key, "entity_key", MAX_ENTITY_KEY, false);
    if (a->entity_key_null != a->entity_seq_null)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("entity_key and entity_seq must be given together"),
                        errdetail("The ordering guard compares entity_seq with the last applied "
                                  "sequence number of entity_key.")));
    if (!a->payload_null && !a->enqueue)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("payload is stored only for queued events"),
                        errhint("Pass enqueue => true to store the event for idem_inbox_next, or "
                                "leave payload out and pass its hash as payload_hash.")));
    TimestampTz now = GetCurrentTimestamp();
    TimestampTz expires = add_usec(now, a->ttl_usec);
    const char *status = a->enqueue ? "received" : "done";
    bool has_entity = !a->entity_key_null;

    idem::pg::SavedUser su;
    idem::pg::enter(&su);
    saved_plan(&plan_insert, SQL_INSERT, 11, INSERT_TYPES);
    saved_plan(&plan_lock, SQL_LOCK, 2, KEY_TYPES);
    Datum row[11] = {consumer,
                     event_id,
                     CStringGetTextDatum(status),
                     hash,
                     type,
                     a->payload,
                     entity,
                     Int64GetDatum(a->entity_seq),
                     Int32GetDatum(a->enqueue ? 0 : 1),
                     TimestampTzGetDatum(now),
                     TimestampTzGetDatum(expires)};
    char row_nulls[11] = {' ',
                          ' ',
                          ' ',
                          a->hash_null ? 'n' : ' ',
                          a->type_null ? 'n' : ' ',
                          a->payload_null ? 'n' : ' ',
                          has_entity ? ' ' : 'n',
                          has_entity ? ' ' : 'n',
                          ' ',
                          ' ',
                          ' '};
    Datum keyv[2] = {consumer, event_id};
    const char *outcome = nullptr;
    bool recorded = false; // this call wrote the row as a first delivery
    for (int round = 0; outcome == nullptr && !recorded; round++) {
        if (round == 10)
            ereport(ERROR, (errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
                            errmsg("could not record the event: its inbox entry kept being "
                                   "deleted concurrently"),
                            errhint("Retry the transaction.")));
        if (exec(plan_insert, row, row_nulls, false, 0) == 1) {
            recorded = true;
            break;
        }
        if (exec(plan_lock, keyv, nullptr, false, 1) == 0)
            continue; // purged since the insert saw it: insert again
        char st = status_char(L_STATUS);
        bool isnull;
        TimestampTz row_expires = DatumGetTimestampTz(col(0, L_EXPIRES, &isnull));
        bool finished = st == 'd' || st == 'f' || st == 's';
        if (finished && row_expires <= now) {
            // past its TTL the entry counts as absent: this delivery is a first one again
            saved_plan(&plan_reset, SQL_RESET, 11, INSERT_TYPES);
            if (exec(plan_reset, row, row_nulls, false, 0) != 1)
                elog(ERROR, "reset of a locked inbox entry updated no row");
            recorded = true;
            break;
        }
        bool stored_null;
        Datum stored = col(0, L_HASH, &stored_null);
        outcome = hashes_match(stored_null, stored, a->hash_null, hash) ? "duplicate" : "mismatch";
    }
    if (recorded) {
        outcome = "new";
        if (has_entity) {
            bool stale = a->enqueue ? entity_stale(consumer, entity, a->entity_seq)
                                    : !entity_apply(consumer, entity, a->entity_seq, event_id, now);
            if (stale) {
                mark_stale(consumer, event_id, now);
                outcome = "stale";
            }
        }
    }
    idem::pg::leave(&su);
    idem::stats::count_inbox(outcome);
    return outcome;
}

} // namespace

// idem_inbox_receive(consumer, event_id, payload_hash, enqueue, event_type, payload, entity_key,
// entity_seq, ttl): records an event; new | duplicate | mismatch | stale.
IDEM_PG_FUNCTION(idem_inbox_receive) {
    require_arg(fcinfo, 0, "consumer");
    require_arg(fcinfo, 1, "event_id");
    ReceiveArgs a{};
    a.consumer = PG_GETARG_DATUM(0);
    a.event_id = PG_GETARG_DATUM(1);
    a.hash_null = PG_ARGISNULL(2);
    a.payload_hash = a.hash_null ? (Datum)0 : PG_GETARG_DATUM(2);
    a.enqueue = PG_ARGISNULL(3) ? false : PG_GETARG_BOOL(3);
    a.type_null = PG_ARGISNULL(4);
    a.event_type = a.type_null ? (Datum)0 : PG_GETARG_DATUM(4);
    a.payload_null = PG_ARGISNULL(5);
    a.payload = a.payload_null ? (Datum)0 : PointerGetDatum(PG_GETARG_BYTEA_PP(5));
    a.entity_key_null = PG_ARGISNULL(6);
    a.entity_key = a.entity_key_null ? (Datum)0 : PG_GETARG_DATUM(6);
    a.entity_seq_null = PG_ARGISNULL(7);
    a.entity_seq = a.entity_seq_null ? 0 : PG_GETARG_INT64(7);
    a.ttl_usec = positive_interval_arg(fcinfo, 8, idem::guc::inbox_ttl_s, "ttl", "7 days",
                                       "idempotency.inbox_ttl");
    PG_RETURN_TEXT_P(cstring_to_text(receive(&a)));
}

// idem_inbox_next(consumer, batch_size, lease): leases a batch of queued events.
IDEM_PG_FUNCTION(idem_inbox_next) {
    require_arg(fcinfo, 0, "consumer");
    Datum consumer = checked_varlena(PG_GETARG_DATUM(0), "consumer", MAX_CONSUMER, false);
    int32 batch = PG_ARGISNULL(1) ? 10 : PG_GETARG_INT32(1);
    if (batch < 1 || batch > MAX_BATCH)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("batch_size must be between 1 and %d", MAX_BATCH)));
    int64 lease_us = positive_interval_arg(fcinfo, 2, idem::guc::inbox_lease_s, "lease", "1 minute",
                                           "idempotency.inbox_lease");
    TimestampTz now = GetCurrentTimestamp();
    TimestampTz lease_expires = add_usec(now, lease_us);
    InitMaterializedSRF(fcinfo, 0);
    ReturnSetInfo *rsinfo = reinterpret_cast<ReturnSetInfo *>(fcinfo->resultinfo);

    idem::pg::SavedUser su;
    idem::pg::enter(&su);
    saved_plan(&plan_next, SQL_NEXT, 4, NEXT_TYPES);
    Datum v[4] = {consumer, TimestampTzGetDatum(now), Int64GetDatum(batch),
                  TimestampTzGetDatum(lease_expires)};
    uint64 n = exec(plan_next, v, nullptr, false, 0);
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

namespace {

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
