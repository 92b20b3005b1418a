// Outbox, emitting: idem_outbox_emit (an event written in the caller's transaction). The relay's
// side (idem_outbox_next, _done, _fail, _requeue) is src/outbox_queue.cpp.
//
// Per-key order. An emit with a key takes a transaction lock on (topic, key) before it draws its
// sequence number, so the events of one key are numbered in the order their transactions commit:
// a relay that sees an event of a key sees every earlier one too. idem_outbox_next hands an
// event out only when no earlier event of its key is unfinished, and never skips one: it reads
// the queue by status, not from a high-water mark, so an event committed late is still there.
#include "direct_access.hpp"
#include "arguments.hpp"
#include "inbox.hpp"
#include "leased_queue.hpp"
#include "limits.hpp"
#include "outbox.hpp"
#include "counters.hpp"
#include "settings.hpp"
#include "tenants.hpp"
#include "utilities.hpp"

#include "crypto.hpp"

#include <string>
#include <string_view>

extern "C" {
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/pg_namespace.h"
#include "commands/async.h"
#include "storage/lmgr.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
}

namespace {

using namespace idem::pg;
using namespace idem::pg::outbox;
using idem::pg::inbox::checked_varlena;
// pg_locks shows the key lock as an advisory lock with objsubid 18756 (0x4944, 'ID'), apart
// from the key spaces of pg_advisory_xact_lock (1: bigint, 2: two integers).
constexpr uint16 KEY_LOCK_SPACE = 0x4944;

#define OUTBOX_INSERT                                                                              \
    "INSERT INTO idempotency.outbox AS o (event_id, topic, seq, key, dedup_key, payload, "         \
    "payload_bytes, headers, status, attempt, attempt_base, emitted_at, available_at, "            \
    "updated_at) VALUES ($1, $2, "                                                                 \
    "pg_catalog.nextval('idempotency.outbox_seq'::pg_catalog.regclass), "                          \
    "$3, $4, $5, $6, $7, 'pending', 0, 0, $8, $9, $8)"
const char *const SQL_EMIT = OUTBOX_INSERT;
const char *const SQL_EMIT_DEDUP =
    OUTBOX_INSERT " ON CONFLICT (topic, dedup_key) WHERE dedup_key IS NOT NULL DO NOTHING";
const Oid EMIT_TYPES[] = {UUIDOID,  TEXTOID,  TEXTOID,        TEXTOID,       JSONBOID,
                          BYTEAOID, JSONBOID, TIMESTAMPTZOID, TIMESTAMPTZOID};
const char *const SQL_DEDUP_ID =
    "SELECT o.event_id FROM idempotency.outbox o WHERE o.topic OPERATOR(pg_catalog.=) $1 "
    "AND o.dedup_key OPERATOR(pg_catalog.=) $2";
const Oid DEDUP_TYPES[] = {TEXTOID, TEXTOID};

SPIPlanPtr plan_emit, plan_emit_dedup, plan_dedup_id;

// True on a Citus worker: Citus's one-row catalog pg_dist_local_group names a group other than
// the coordinator's (0). No such catalog, no Citus. Read by a plain catalog scan, as
// direct::citus_table reads pg_dist_partition.
bool on_citus_worker() {
    Oid grp = get_relname_relid("pg_dist_local_group", PG_CATALOG_NAMESPACE);
    if (!OidIsValid(grp))
        return false;
    AttrNumber att = get_attnum(grp, "groupid");
    if (att == InvalidAttrNumber)
        return false;
    Relation r = table_open(grp, AccessShareLock);
    SysScanDesc scan = systable_beginscan(r, InvalidOid, false, nullptr, 0, nullptr);
    HeapTuple tup = systable_getnext(scan);
    bool worker = false;
    if (HeapTupleIsValid(tup)) {
        bool isnull;
        Datum g = heap_getattr(tup, att, RelationGetDescr(r), &isnull);
        worker = !isnull && DatumGetInt32(g) != 0;
    }
    systable_endscan(scan);
    table_close(r, AccessShareLock);
    return worker;
}

// The arguments of an emit, checked.
struct Emit {
    Datum topic, key, dedup_key, headers, payload;
    bool key_null, dedup_null, headers_null;
    int64 deliver_after_us;
};

Emit emit_args(FunctionCallInfo fcinfo) {
    Emit e{};
    require_arg(fcinfo, 0, "topic");
    require_arg(fcinfo, 1, "payload", "Pass '{}' or '\\x'::bytea for an event without a body.");
    e.topic = checked_varlena(PG_GETARG_DATUM(0), "topic", MAX_TOPIC, false);
    e.payload = PG_GETARG_DATUM(1);
    e.key_null = PG_ARGISNULL(2);
    if (!e.key_null)
        e.key = checked_varlena(PG_GETARG_DATUM(2), "key", MAX_KEY, false);
    e.dedup_null = PG_ARGISNULL(3);
    if (!e.dedup_null)
        e.dedup_key = checked_varlena(PG_GETARG_DATUM(3), "dedup_key", MAX_KEY, false);
    e.headers_null = PG_ARGISNULL(4);
    if (!e.headers_null) {
        Jsonb *h = PG_GETARG_JSONB_P(4);
        if (!JB_ROOT_IS_OBJECT(h) || JB_ROOT_IS_SCALAR(h))
            ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                            errmsg("headers must be a JSON object"),
                            errdetail("headers holds name/value pairs, such as "
                                      "'{\"content-type\": \"application/json\"}'.")));
        e.headers = PointerGetDatum(h);
    }
    e.deliver_after_us = interval_arg_usec(fcinfo, 5, 0);
    if (e.deliver_after_us < 0)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("deliver_after must not be negative")));
    return e;
}

// The secret of the key lock: the one row of idempotency.outbox_key_lock, read once per backend
// and again when that table is another one (the extension dropped and created anew). A plain heap
// scan, as the extension's own storage: no privilege of the caller is involved. A 1.x database
// (no such table until ALTER EXTENSION UPDATE) gets 32 zero bytes in every backend alike.
struct KeyLockSecret {
    Oid relid = InvalidOid;
    unsigned char bytes[32];
};
KeyLockSecret key_lock_secret;

const unsigned char *lock_secret() {
    static const unsigned char none[32] = {};
    Oid relid = get_relname_relid("outbox_key_lock", extension_schema());
    if (!OidIsValid(relid)) // a 1.x database not yet updated: every backend without a secret
        return none;
    if (relid == key_lock_secret.relid)
        return key_lock_secret.bytes;
    Relation r = table_open(relid, AccessShareLock);
    SysScanDesc scan = systable_beginscan(r, InvalidOid, false, nullptr, 0, nullptr);
    HeapTuple tup = systable_getnext(scan);
    bool isnull = true;
    Datum d = HeapTupleIsValid(tup) ? heap_getattr(tup, 2, RelationGetDescr(r), &isnull) : (Datum)0;
    bytea *b = isnull ? nullptr : DatumGetByteaPP(d);
    if (b == nullptr || VARSIZE_ANY_EXHDR(b) != sizeof key_lock_secret.bytes)
        ereport(ERROR, (errcode(ERRCODE_DATA_CORRUPTED),
                        errmsg("idempotency.outbox_key_lock holds no 32-byte secret")));
    memcpy(key_lock_secret.bytes, VARDATA_ANY(b), sizeof key_lock_secret.bytes);
    systable_endscan(scan);
    table_close(r, AccessShareLock);
    key_lock_secret.relid = relid;
    return key_lock_secret.bytes;
}

// The transaction lock on (topic, key) that orders the emits of one key (see the top). Its tag is
// the first 8 bytes of HMAC-SHA256(secret, topic NUL key): pg_locks, which every role reads, shows
// nothing another role can match to a topic and key (docs/security.md "What pg_locks shows").
void lock_key(Datum topic, Datum key) {
    text *t = DatumGetTextPP(topic), *k = DatumGetTextPP(key);
    std::string_view secret(reinterpret_cast<const char *>(lock_secret()), 32);
    std::string_view ts(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t)),
        ks(VARDATA_ANY(k), VARSIZE_ANY_EXHDR(k));
    idem::Digest d = idem::pg::call_cpp([&] {
        std::string message;
        message.reserve(ts.size() + 1 + ks.size());
        message.append(ts).push_back('\0'); // a text holds no NUL: topic and key stay apart
        message.append(ks);
        return idem::hmac_sha256(secret, message);
    });
    uint64 h = 0;
    for (int i = 0; i < 8; i++)
        h = (h << 8) | d[i];
    LOCKTAG tag;
    SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, static_cast<uint32>(h >> 32), static_cast<uint32>(h),
                         KEY_LOCK_SPACE);
    idem::pg::limits::lock_outbox_key(&tag); // 54000 past max_outbox_keys_per_transaction
}

// How the payload argument is stored.
enum class Body { Json, Text, Bytes };

// Writes the event (payload in column payload or payload_bytes) and returns its id: a new one,
// or the kept event's of the same (topic, dedup_key). A text payload is parsed as JSON (22P02).
Datum emit(FunctionCallInfo fcinfo, Body body) {
    Emit e = emit_args(fcinfo);
    tenants::check(tenants::TOPIC, e.topic); // 42501 for another tenant's topic
    bool bytes = body == Body::Bytes;
    if (body == Body::Text)
        e.payload = DirectFunctionCall1(jsonb_in, CStringGetDatum(TextDatumGetCString(e.payload)));
    idem::pg::limits::check_size(false, e.payload, idem::pg::limits::Cap::OutboxPayload, "payload");
    idem::pg::limits::check_size(e.headers_null, e.headers, idem::pg::limits::Cap::OutboxPayload,
                                 "headers");
    TimestampTz now = GetCurrentTimestamp();
    TimestampTz available = inbox::add_usec(now, e.deliver_after_us);
    // On Citus every emit runs on the coordinator (idem_distribute() does not delegate it): the
    // key lock and the sequence number order a key's events only when all its emits take both
    // on one node, and emits in a transaction block, the usual kind, run on the coordinator.
    if (citus_outbox() && on_citus_worker()) // the cached test first: no catalog scan per emit
        ereport(ERROR,
                (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                 errmsg("idem_outbox_emit runs on the Citus coordinator, not on a worker"),
                 errdetail("The per-key order of the outbox rests on the coordinator's key lock "
                           "and its sequence idempotency.outbox_seq."),
                 errhint("Connect to the coordinator and emit there (in the transaction of the "
                         "state change).")));
    pg_uuid_t *id = new_uuid_v7();
    if (!e.key_null)
        lock_key(e.topic, e.key);

    SavedUser su;
    enter(&su);
    Datum v[9] = {UUIDPGetDatum(id),
                  e.topic,
                  e.key,
                  e.dedup_key,
                  bytes ? (Datum)0 : e.payload,
                  bytes ? e.payload : (Datum)0,
                  e.headers,
                  TimestampTzGetDatum(now),
                  TimestampTzGetDatum(available)};
    char n[9] = {' ',
                 ' ',
                 e.key_null ? 'n' : ' ',
                 e.dedup_null ? 'n' : ' ',
                 bytes ? 'n' : ' ',
                 bytes ? ' ' : 'n',
                 e.headers_null ? 'n' : ' ',
                 ' ',
                 ' '};
    Datum result = UUIDPGetDatum(id);
    bool duplicate = false;
    if (e.dedup_null) {
        exec(saved_plan(&plan_emit, SQL_EMIT, 9, EMIT_TYPES), v, n, false, 0);
    } else {
        // A kept event of the dedup key wins; one purged between the insert and the read is
        // gone, and the insert is tried again.
        for (int tries = 0;; tries++) {
            if (exec(saved_plan(&plan_emit_dedup, SQL_EMIT_DEDUP, 9, EMIT_TYPES), v, n, false, 0) ==
                1)
                break;
            Datum dv[2] = {e.topic, e.dedup_key};
            if (exec(saved_plan(&plan_dedup_id, SQL_DEDUP_ID, 2, DEDUP_TYPES), dv, nullptr, false,
                     1) == 1) {
                bool isnull;
                pg_uuid_t *found = DatumGetUUIDP(col(0, 1, &isnull));
                memcpy(id->data, found->data, UUID_LEN);
                duplicate = true;
                break;
            }
            if (tries >= 3)
                elog(ERROR, "outbox event of dedup_key changed concurrently");
        }
    }
    leave(&su);
    idem::operations::count(duplicate ? idem::operations::OutboxDeduplicated
                                      : idem::operations::OutboxEmitted);
    if (!duplicate && idem::settings::outbox_notify())
        Async_Notify("idem_outbox", ""); // no topic: a listener of another role learns nothing
    return result;
}

} // namespace

// idem_outbox_emit(topic, payload jsonb, key, dedup_key, headers, deliver_after) -> uuid
IDEM_PG_FUNCTION(idem_outbox_emit) {
    return emit(fcinfo, Body::Json);
}

// idem_outbox_emit(topic, payload text, ...) -> uuid: JSON text (also an untyped literal).
IDEM_PG_FUNCTION(idem_outbox_emit_text) {
    return emit(fcinfo, Body::Text);
}

// idem_outbox_emit(topic, payload bytea, ...) -> uuid: a body that is not JSON.
IDEM_PG_FUNCTION(idem_outbox_emit_bytes) {
    return emit(fcinfo, Body::Bytes);
}

// (outbox.hpp) Cached per call: a syscache lookup and Citus's table cache.
bool idem::pg::outbox::citus_outbox() {
    return direct::citus_table(get_relname_relid("outbox", extension_schema()));
}

const idem::pg::queue::Names idem::pg::outbox::NAMES{"outbox event", "idem_outbox_next", "pending"};
