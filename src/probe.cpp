// Direct primary-key probe of idempotency.records (see probe.hpp).
#include "probe.hpp"

extern "C" {
#include "access/genam.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/namespace.h"
#include "executor/tuptable.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/snapmgr.h"
}

namespace idem::pg {
namespace {

// The table, its primary key and the column numbers, resolved once per backend and forgotten
// when the relcache says the table changed (e.g. DROP/CREATE EXTENSION).
struct RecordsRel {
    Oid relid, pkey;
    AttrNumber status, retryable, fingerprint, attempt, resource_id, response, response_status,
        lease_expires_at, expires_at;
};
RecordsRel rel_cache;
bool callback_registered = false;

// Forgets the cached relation when it (or everything) is invalidated.
void relcache_changed(Datum, Oid relid) {
    if (relid == InvalidOid || relid == rel_cache.relid || relid == rel_cache.pkey)
        rel_cache.relid = InvalidOid;
}

// Column number of name in idempotency.records.
AttrNumber column(Oid relid, const char *name) {
    AttrNumber n = get_attnum(relid, name);
    if (n == InvalidAttrNumber)
        elog(ERROR, "column \"%s\" of idempotency.records is missing", name);
    return n;
}

// Resolves idempotency.records, its primary key and its columns.
void resolve() {
    if (!callback_registered) {
        CacheRegisterRelcacheCallback(relcache_changed, (Datum)0);
        callback_registered = true;
    }
    Oid nsp = get_namespace_oid("idempotency", false);
    Oid relid = get_relname_relid("records", nsp);
    if (!OidIsValid(relid))
        elog(ERROR, "table idempotency.records is missing");
    Relation rel = table_open(relid, AccessShareLock);
    Oid pkey = RelationGetPrimaryKeyIndex(rel);
    table_close(rel, NoLock);
    if (!OidIsValid(pkey))
        elog(ERROR, "table idempotency.records has no primary key");
    RecordsRel r;
    r.relid = relid;
    r.pkey = pkey;
    r.status = column(relid, "status");
    r.retryable = column(relid, "retryable");
    r.fingerprint = column(relid, "fingerprint");
    r.attempt = column(relid, "attempt");
    r.resource_id = column(relid, "resource_id");
    r.response = column(relid, "response");
    r.response_status = column(relid, "response_status");
    r.lease_expires_at = column(relid, "lease_expires_at");
    r.expires_at = column(relid, "expires_at");
    rel_cache = r;
}

// A varlena column of the slot, copied into the current memory context.
Datum copied(TupleTableSlot *slot, AttrNumber att, bool *isnull) {
    Datum d = slot_getattr(slot, att, isnull);
    return *isnull ? (Datum)0 : datumCopy(d, false, -1);
}

} // namespace

// Index probe of (scope, key) under the active snapshot.
bool probe_record(Datum scope, Datum key, ProbedRecord *out) {
    if (!OidIsValid(rel_cache.relid))
        resolve();
    RecordsRel r = rel_cache;
    Relation rel = table_open(r.relid, AccessShareLock);
    Relation idx = index_open(r.pkey, AccessShareLock);
    ScanKeyData keys[2];
    ScanKeyEntryInitialize(&keys[0], 0, 1, BTEqualStrategyNumber, InvalidOid,
                           idx->rd_indcollation[0], F_TEXTEQ, scope);
    ScanKeyEntryInitialize(&keys[1], 0, 2, BTEqualStrategyNumber, InvalidOid,
                           idx->rd_indcollation[1], F_TEXTEQ, key);
    IndexScanDesc scan = index_beginscan(rel, idx, GetActiveSnapshot(), 2, 0);
    index_rescan(scan, keys, 2, nullptr, 0);
    TupleTableSlot *slot = table_slot_create(rel, nullptr);
    bool found = index_getnext_slot(scan, ForwardScanDirection, slot);
    if (found) {
        bool isnull;
        text *status = DatumGetTextPP(slot_getattr(slot, r.status, &isnull));
        out->status = *VARDATA_ANY(status);
        out->retryable = DatumGetBool(slot_getattr(slot, r.retryable, &isnull));
        out->attempt = DatumGetInt32(slot_getattr(slot, r.attempt, &isnull));
        out->fingerprint = copied(slot, r.fingerprint, &out->fingerprint_null);
        out->resource_id = copied(slot, r.resource_id, &out->resource_id_null);
        out->response = copied(slot, r.response, &out->response_null);
        out->response_status =
            DatumGetInt32(slot_getattr(slot, r.response_status, &out->response_status_null));
        out->lease_expires_at =
            DatumGetTimestampTz(slot_getattr(slot, r.lease_expires_at, &out->lease_null));
        out->expires_at = DatumGetTimestampTz(slot_getattr(slot, r.expires_at, &isnull));
    }
    ExecDropSingleTupleTableSlot(slot);
    index_endscan(scan);
    index_close(idx, NoLock);
    table_close(rel, NoLock);
    return found;
}

} // namespace idem::pg
