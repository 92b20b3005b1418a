// Inbox: idem_inbox_receive, and what the queue functions (src/inbox_queue.cpp) share with it.
//
// A first delivery is one INSERT ... ON CONFLICT DO NOTHING into idempotency.inbox, in the
// caller's transaction, through the access methods (src/direct_access.hpp; a saved SQL statement
// when idempotency.direct_access is off or the table is not the extension's plain one). Most
// deliveries are first ones, so the direct path inserts before it looks the event up (a
// redelivery then leaves a killed row version). A concurrent delivery of the same event waits for
// that transaction and then sees the committed entry (duplicate) or, after a rollback, inserts it
// itself (new). An existing entry is answered from its latest committed version without a lock
// (duplicate or mismatch by the payload hash); only a finished entry past its TTL is locked and
// written anew. A unique violation never escapes. The ordering guard keeps the last applied
// sequence number per (consumer, entity key) in idempotency.inbox_entities and advances it with
// an upsert whose WHERE refuses older events.
#include "inbox.hpp"
#include "direct_access.hpp"
#include "arguments.hpp"
#include "limits.hpp"
#include "counters.hpp"
#include "settings.hpp"
#include "tenants.hpp"

extern "C" {
#include "access/xact.h"
#include "common/int.h"
#include "utils/timestamp.h"
}

namespace idem::pg::inbox {

namespace {

// Advances the entity's last applied sequence number; no row when the event is not newer.
const char *const SQL_ENTITY_APPLY =
    "INSERT INTO idempotency.inbox_entities AS e (consumer, entity_key, last_seq, event_id, "
    "updated_at) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (consumer, entity_key) DO UPDATE SET "
    "last_seq = EXCLUDED.last_seq, event_id = EXCLUDED.event_id, updated_at = "
    "EXCLUDED.updated_at WHERE e.last_seq OPERATOR(pg_catalog.<) EXCLUDED.last_seq";
const Oid ENTITY_APPLY_TYPES[] = {TEXTOID, TEXTOID, INT8OID, TEXTOID, TIMESTAMPTZOID};

const char *const SQL_MARK_STALE =
    "UPDATE idempotency.inbox AS i SET status = 'stale', lease_expires_at = NULL, "
    "updated_at = $3" WHERE_EVENT;
const Oid MARK_TYPES[] = {TEXTOID, TEXTOID, TIMESTAMPTZOID};

SPIPlanPtr plan_entity_apply, plan_mark_stale;

} // namespace

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

TimestampTz add_usec(TimestampTz now, int64 usec) {
    TimestampTz out;
    if (pg_add_s64_overflow(now, usec, &out))
        ereport(ERROR,
                (errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE), errmsg("timestamp out of range"),
                 errdetail("The interval is too long to be added to the current time.")));
    return out;
}

int64 positive_interval_arg(FunctionCallInfo fcinfo, int argno, int default_s, const char *name,
                            const char *setting) {
    int64 us = interval_arg_usec(fcinfo, argno, default_s);
    if (!PG_ARGISNULL(argno) && us <= 0)
        ereport(
            ERROR,
            (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("%s must be positive", name),
             errhint("Pass an interval such as interval '1 minute', or NULL for %s.", setting)));
    return us;
}

char status_char(int attno) {
    bool isnull;
    text *t = DatumGetTextPP(col(0, attno, &isnull));
    return *VARDATA_ANY(t);
}

bool entity_apply(Datum consumer, Datum entity_key, int64 seq, Datum event_id, TimestampTz now) {
    saved_plan(&plan_entity_apply, SQL_ENTITY_APPLY, 5, ENTITY_APPLY_TYPES);
    Datum v[5] = {consumer, entity_key, Int64GetDatum(seq), event_id, TimestampTzGetDatum(now)};
    return exec(plan_entity_apply, v, nullptr, false, 0) == 1;
}

void mark_stale(Datum consumer, Datum event_id, TimestampTz now) {
    saved_plan(&plan_mark_stale, SQL_MARK_STALE, 3, MARK_TYPES);
    Datum v[3] = {consumer, event_id, TimestampTzGetDatum(now)};
    if (exec(plan_mark_stale, v, nullptr, false, 0) != 1)
        elog(ERROR, "inbox event vanished while being marked stale");
}

} // namespace idem::pg::inbox

namespace {

using namespace idem::pg;
using namespace idem::pg::inbox;

constexpr size_t MAX_ENTITY_KEY = 1024;
constexpr size_t MAX_EVENT_TYPE = 255;
constexpr size_t MAX_HASH = 64;

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

const char *const SQL_LOCK =
    "SELECT " EVENT_COLUMNS " FROM idempotency.inbox i" WHERE_EVENT " FOR UPDATE";

const char *const SQL_ENTITY_GET =
    "SELECT e.last_seq FROM idempotency.inbox_entities e WHERE e.consumer "
    "OPERATOR(pg_catalog.=) $1 AND e.entity_key OPERATOR(pg_catalog.=) $2";

SPIPlanPtr plan_insert, plan_reset, plan_lock, plan_entity_get;

// The columns of idempotency.inbox as the direct path writes them, in table order (test/drift
// holds them equal to the install script's table: a difference turns the direct path off).
enum InboxColumn {
    C_CONSUMER,
    C_EVENT_ID,
    C_STATUS,
    C_HASH,
    C_TYPE,
    C_PAYLOAD,
    C_ENTITY_KEY,
    C_ENTITY_SEQ,
    C_ATTEMPT,
    C_LAST_ERROR,
    C_LEASE,
    C_RECEIVED,
    C_UPDATED,
    C_EXPIRES,
    C_AVAILABLE,
    C_COUNT
};
const char *const INBOX_COLUMNS[C_COUNT] = {
    "consumer",         "event_id",    "status",     "payload_hash", "event_type",
    "payload",          "entity_key",  "entity_seq", "attempt",      "last_error",
    "lease_expires_at", "received_at", "updated_at", "expires_at",   "available_at"};
const Oid INBOX_TYPES[C_COUNT] = {TEXTOID,        TEXTOID,        TEXTOID,        BYTEAOID,
                                  TEXTOID,        BYTEAOID,       TEXTOID,        INT8OID,
                                  INT4OID,        TEXTOID,        TIMESTAMPTZOID, TIMESTAMPTZOID,
                                  TIMESTAMPTZOID, TIMESTAMPTZOID, TIMESTAMPTZOID};
// Satisfied by construction: status received or done, attempt 0 or 1, entity key and sequence
// number given together (check_delivery).
const char *const INBOX_CHECKS[] = {"inbox_status_check", "inbox_attempt_check", "inbox_check"};
const char *const INBOX_INDEXES[] = {"inbox_queue"};
const char *const INBOX_INDEX_DEFS[] = {
    "CREATE INDEX inbox_queue ON idempotency.inbox USING btree (consumer, received_at, event_id) "
    "WHERE "
    "(status = ANY (ARRAY['received'::text, 'processing'::text]))"};
constexpr uint32 INBOX_NULLABLE = 1u << C_HASH | 1u << C_TYPE | 1u << C_PAYLOAD |
                                  1u << C_ENTITY_KEY | 1u << C_ENTITY_SEQ | 1u << C_LAST_ERROR |
                                  1u << C_LEASE | 1u << C_AVAILABLE;
// A new entry is in the queue index (received or processing) only when it is queued.
bool queue_entry(int, const Datum *values, const bool *) {
    return *VARDATA_ANY(DatumGetPointer(values[C_STATUS])) == 'r';
}
const idem::pg::direct::TableShape INBOX_SHAPE = {
    "inbox",          C_COUNT, INBOX_COLUMNS,  INBOX_TYPES, INBOX_CHECKS, 3,   INBOX_INDEXES,
    INBOX_INDEX_DEFS, 1,       INBOX_NULLABLE, 0,           queue_entry,  true};
idem::pg::direct::Table inbox_table = {&INBOX_SHAPE};

// NULL-aware bytea equality; a missing hash on either side matches (nothing to compare).
bool hashes_match(bool a_null, Datum a, bool b_null, Datum b) {
    if (a_null || b_null)
        return true;
    bytea *x = DatumGetByteaPP(a);
    bytea *y = DatumGetByteaPP(b);
    return VARSIZE_ANY_EXHDR(x) == VARSIZE_ANY_EXHDR(y) &&
           memcmp(VARDATA_ANY(x), VARDATA_ANY(y), VARSIZE_ANY_EXHDR(x)) == 0;
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

// The checked values of one delivery and the row a first delivery writes.
struct Delivery {
    Datum consumer, event_id, hash, type, entity;
    TimestampTz now;
    Datum row[11];
    char row_nulls[11];
};

// Checks the arguments of a delivery and builds the row to write.
void check_delivery(const ReceiveArgs *a, Delivery *d) {
    d->consumer = checked_varlena(a->consumer, "consumer", MAX_CONSUMER, false);
    d->event_id = checked_varlena(a->event_id, "event_id", MAX_EVENT_ID, false);
    d->hash =
        a->hash_null ? (Datum)0 : checked_varlena(a->payload_hash, "payload_hash", MAX_HASH, false);
    d->type = a->type_null ? (Datum)0
                           : checked_varlena(a->event_type, "event_type", MAX_EVENT_TYPE, false);
    d->entity = a->entity_key_null
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
    idem::pg::limits::check_size(a->payload_null, a->payload, idem::pg::limits::Cap::InboxPayload,
                                 "payload");
    d->now = GetCurrentTimestamp();
    TimestampTz expires = add_usec(d->now, a->ttl_usec);
    bool has_entity = !a->entity_key_null;
    Datum row[11] = {d->consumer,
                     d->event_id,
                     CStringGetTextDatum(a->enqueue ? "received" : "done"),
                     d->hash,
                     d->type,
                     a->payload,
                     d->entity,
                     Int64GetDatum(a->entity_seq),
                     Int32GetDatum(a->enqueue ? 0 : 1),
                     TimestampTzGetDatum(d->now),
                     TimestampTzGetDatum(expires)};
    const char row_nulls[11] = {' ',
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
    memcpy(d->row, row, sizeof row);
    memcpy(d->row_nulls, row_nulls, sizeof row_nulls);
}

// What the reader of an event found by the direct insert compares, and its answer.
struct Found {
    const ReceiveArgs *a;
    const Delivery *d;
    const char *outcome;
};

// Answers a delivery of an event that has an entry from the entry's latest committed version
// (or this transaction's own), without a lock, as idem_claim answers a replay: duplicate or
// mismatch by the payload hash. False for a finished entry past its TTL: only the locked path of
// insert_or_compare may reset it.
bool read_found(Relation, TupleTableSlot *found, void *arg) {
    auto *f = static_cast<Found *>(arg);
    const idem::pg::direct::Table &r = inbox_table;
    bool isnull, hash_null;
    text *status = DatumGetTextPP(slot_getattr(found, r.att[C_STATUS], &isnull));
    char st = *VARDATA_ANY(status);
    TimestampTz expires = DatumGetTimestampTz(slot_getattr(found, r.att[C_EXPIRES], &isnull));
    if ((st == 'd' || st == 'f' || st == 's') && expires <= f->d->now)
        return false;
    Datum hash = slot_getattr(found, r.att[C_HASH], &hash_null);
    f->outcome =
        hashes_match(hash_null, hash, f->a->hash_null, f->d->hash) ? "duplicate" : "mismatch";
    return true;
}

// Writes a first delivery through the access methods (the row of SQL_INSERT): Inserted, Read
// (the event has an entry, and f->outcome is the answer), Exists (an entry that only the locked
// path may decide on, or f is nullptr) or Unusable (the table is not the extension's plain one).
idem::pg::direct::InsertResult insert_direct(const Delivery *d, Found *f) {
    Datum v[C_COUNT];
    bool n[C_COUNT];
    for (int c = C_CONSUMER; c <= C_ATTEMPT; c++) {
        v[c] = d->row[c];
        n[c] = d->row_nulls[c] == 'n';
    }
    v[C_LAST_ERROR] = v[C_LEASE] = v[C_AVAILABLE] = (Datum)0;
    n[C_LAST_ERROR] = n[C_LEASE] = n[C_AVAILABLE] = true;
    v[C_RECEIVED] = v[C_UPDATED] = d->row[9];
    v[C_EXPIRES] = d->row[10];
    n[C_RECEIVED] = n[C_UPDATED] = n[C_EXPIRES] = false;
    auto r = idem::pg::direct::insert(&inbox_table, "idem_inbox_receive", v, n,
                                      f != nullptr ? read_found : nullptr, f);
    if (r == idem::pg::direct::InsertResult::Unusable)
        // Said at DEBUG1 so that a test can tell the direct path ran (test/regress/sql/inbox.sql).
        ereport(DEBUG1, (errmsg_internal("idem_inbox_receive takes the SQL path: "
                                         "idempotency.inbox is not the extension's plain table")));
    return r;
}

// Writes the delivery as a first one (nullptr: written) or compares it with the stored event
// (duplicate or mismatch); exists: the direct insert found an entry, so the first round only
// reads it. Runs as the extension owner.
const char *insert_or_compare(const ReceiveArgs *a, Delivery *d, bool exists) {
    saved_plan(&plan_insert, SQL_INSERT, 11, INSERT_TYPES);
    saved_plan(&plan_lock, SQL_LOCK, 2, KEY_TYPES);
    Datum keyv[2] = {d->consumer, d->event_id};
    for (int round = 0;; round++) {
        if (round == 10)
            ereport(ERROR, (errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
                            errmsg("could not record the event: its inbox entry kept being "
                                   "deleted concurrently"),
                            errhint("Retry the transaction.")));
        if (!(round == 0 && exists) && exec(plan_insert, d->row, d->row_nulls, false, 0) == 1)
            return nullptr;
        if (exec(plan_lock, keyv, nullptr, false, 1) == 0)
            continue; // purged since the insert saw it: insert again
        char st = status_char(L_STATUS);
        bool isnull;
        TimestampTz row_expires = DatumGetTimestampTz(col(0, L_EXPIRES, &isnull));
        bool finished = st == 'd' || st == 'f' || st == 's';
        if (finished && row_expires <= d->now) {
            // past its TTL the entry counts as absent: this delivery is a first one again
            saved_plan(&plan_reset, SQL_RESET, 11, INSERT_TYPES);
            if (exec(plan_reset, d->row, d->row_nulls, false, 0) != 1)
                elog(ERROR, "reset of a locked inbox entry updated no row");
            return nullptr;
        }
        bool stored_null;
        Datum stored = col(0, L_HASH, &stored_null);
        return hashes_match(stored_null, stored, a->hash_null, d->hash) ? "duplicate" : "mismatch";
    }
}

// Records one delivery and returns its outcome.
const char *receive(const ReceiveArgs *a) {
    Delivery d;
    check_delivery(a, &d);
    using idem::pg::direct::InsertResult;
    Found found{a, &d, nullptr};
    // REPEATABLE READ / SERIALIZABLE decide on an existing entry through the locked path: 40001
    // when it was committed after the transaction's snapshot, as idem_claim does.
    Found *reader = IsolationUsesXactSnapshot() ? nullptr : &found;
    InsertResult first =
        idem::settings::direct_access_on() ? insert_direct(&d, reader) : InsertResult::Unusable;
    if (first == InsertResult::Read || (first == InsertResult::Inserted && a->entity_key_null)) {
        const char *outcome = first == InsertResult::Read ? found.outcome : "new";
        idem::operations::count_inbox(outcome);
        return outcome;
    }
    idem::pg::SavedUser su;
    idem::pg::enter(&su);
    const char *outcome = first == InsertResult::Inserted
                              ? nullptr
                              : insert_or_compare(a, &d, first == InsertResult::Exists);
    if (outcome == nullptr) {
        outcome = "new";
        if (!a->entity_key_null) {
            bool stale =
                a->enqueue ? entity_stale(d.consumer, d.entity, a->entity_seq)
                           : !entity_apply(d.consumer, d.entity, a->entity_seq, d.event_id, d.now);
            if (stale) {
                mark_stale(d.consumer, d.event_id, d.now);
                outcome = "stale";
            }
        }
    }
    idem::pg::leave(&su);
    idem::operations::count_inbox(outcome);
    return outcome;
}

} // namespace

// idem_inbox_receive(consumer, event_id, payload_hash, enqueue, event_type, payload, entity_key,
// entity_seq, ttl): records an event; new | duplicate | mismatch | stale.
IDEM_PG_FUNCTION(idem_inbox_receive) {
    require_arg(fcinfo, 0, "consumer");
    require_arg(fcinfo, 1, "event_id");
    idem::pg::tenants::check(idem::pg::tenants::CONSUMER, PG_GETARG_DATUM(0));
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
    a.ttl_usec = positive_interval_arg(fcinfo, 8, idem::settings::inbox_ttl_s, "ttl",
                                       "idempotency.inbox_ttl");
    PG_RETURN_TEXT_P(cstring_to_text(receive(&a)));
}

bool idem::pg::inbox::inbox_on_citus() {
    return idem::pg::direct::citus_table(idem::pg::direct::resolve(&inbox_table).relid);
}
