// Direct access to idempotency.records (see records_direct.hpp).
#include "records_direct.hpp"
#include "pg_compat.hpp"
#include "spi_util.hpp"

extern "C" {
#include "access/genam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_namespace.h"
#include "executor/executor.h"
#include "nodes/makefuncs.h"
#include "storage/lmgr.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "catalog/pg_type.h"
}

namespace idem::pg {
namespace {

// The columns of idempotency.records, in the order of the names below.
enum Column {
    A_SCOPE,
    A_KEY,
    A_STATUS,
    A_RETRYABLE,
    A_FINGERPRINT,
    A_ATTEMPT,
    A_RESOURCE_ID,
    A_RESPONSE,
    A_RESPONSE_STATUS,
    A_CREATED,
    A_UPDATED,
    A_LEASE_EXPIRES,
    A_EXPIRES,
    A_COUNT
};
const char *const COLUMN_NAMES[A_COUNT] = {
    "scope",       "key",      "status",          "retryable",  "fingerprint", "attempt",
    "resource_id", "response", "response_status", "created_at", "updated_at",  "lease_expires_at",
    "expires_at"};

// The table, its primary key and the column numbers, resolved once per backend and forgotten
// when the relcache says the table changed (e.g. DROP/CREATE EXTENSION, ALTER TABLE).
struct RecordsRel {
    Oid relid;
    bool all_columns; // every column of COLUMN_NAMES exists
    bool citus;       // listed in Citus's pg_dist_partition (see citus_table)
    AttrNumber att[A_COUNT];
};
RecordsRel rel_cache;
bool callback_registered = false;

// Forgets the cached relation when it (or everything) is invalidated.
void relcache_changed(Datum, Oid relid) {
    if (relid == InvalidOid || relid == rel_cache.relid)
        rel_cache.relid = InvalidOid;
}

// Resolves idempotency.records and its column numbers (by name). A missing column is not an
// error here: the table is then not plain (plain_table) and the claim takes the SQL path.
const RecordsRel &records() {
    if (OidIsValid(rel_cache.relid))
        return rel_cache;
    if (!callback_registered) {
        CacheRegisterRelcacheCallback(relcache_changed, (Datum)0);
        callback_registered = true;
    }
    Oid relid = get_relname_relid("records", extension_schema());
    if (!OidIsValid(relid))
        elog(ERROR, "table idempotency.records is missing");
    RecordsRel r;
    r.relid = relid;
    r.citus = citus_table(relid);
    r.all_columns = true;
    for (int i = 0; i < A_COUNT; i++) {
        r.att[i] = get_attnum(relid, COLUMN_NAMES[i]);
        if (r.att[i] == InvalidAttrNumber)
            r.all_columns = false;
    }
    rel_cache = r;
    return rel_cache;
}

// The CHECK constraints of the extension's own table definition. The row insert_new builds
// satisfies both by construction (status 'processing', attempt 1), so they are not evaluated.
const char *const OWN_CHECKS[] = {"records_status_check", "records_attempt_check"};

// The type of each column, in the order of COLUMN_NAMES.
const Oid COLUMN_TYPES[A_COUNT] = {
    TEXTOID,  TEXTOID, TEXTOID,        BOOLOID,        BYTEAOID,       INT4OID,       TEXTOID,
    JSONBOID, INT4OID, TIMESTAMPTZOID, TIMESTAMPTZOID, TIMESTAMPTZOID, TIMESTAMPTZOID};

// True when the table is still exactly what insert_new writes and fetch_version reads: no
// Citus table (Citus invalidates the relation's relcache entry when it distributes it, which
// resets the cache), the known columns with their types and nothing else, the primary key as
// its only index (another unique index on (scope, key) would be an arbiter of the SQL statement
// too), no trigger, rule, row security or generated column, no CHECK constraint other than the
// extension's own, no NOT NULL on a column that a new record leaves NULL, and no default other
// than retryable's (the SQL statement leaves those columns to their defaults). Anything else:
// the SQL path.
bool plain_table(Relation rel, const RecordsRel &r) {
    TupleDesc desc = RelationGetDescr(rel);
    if (r.citus || !r.all_columns || rel->rd_rel->relkind != RELKIND_RELATION ||
        rel->trigdesc != nullptr || rel->rd_rel->relhasrules || rel->rd_rel->relrowsecurity ||
        desc->natts != A_COUNT)
        return false;
    for (int i = 0; i < desc->natts; i++)
        if (TupleDescAttr(desc, i)->attisdropped)
            return false;
    for (int c = 0; c < A_COUNT; c++)
        if (TupleDescAttr(desc, r.att[c] - 1)->atttypid != COLUMN_TYPES[c])
            return false;
    for (Column c : {A_FINGERPRINT, A_RESOURCE_ID, A_RESPONSE, A_RESPONSE_STATUS})
        if (TupleDescAttr(desc, r.att[c] - 1)->attnotnull)
            return false;
    if (desc->constr != nullptr) {
        const TupleConstr *constr = desc->constr;
        if (constr->has_generated_stored)
            return false;
        for (int i = 0; i < constr->num_check; i++) {
            const char *name = constr->check[i].ccname;
            if (strcmp(name, OWN_CHECKS[0]) != 0 && strcmp(name, OWN_CHECKS[1]) != 0)
                return false;
        }
        for (int i = 0; i < constr->num_defval; i++)
            if (constr->defval[i].adnum != r.att[A_RETRYABLE])
                return false;
    }
    Oid pkey = compat::primary_key_index(rel);
    List *indexes = RelationGetIndexList(rel);
    bool only_pkey = OidIsValid(pkey) && list_length(indexes) == 1 && linitial_oid(indexes) == pkey;
    list_free(indexes);
    return only_pkey;
}

// A varlena column of the slot, copied into cxt.
Datum copied(TupleTableSlot *slot, AttrNumber att, MemoryContext cxt, bool *isnull) {
    Datum d = slot_getattr(slot, att, isnull);
    if (*isnull)
        return (Datum)0;
    MemoryContext old = MemoryContextSwitchTo(cxt);
    d = datumCopy(d, false, -1);
    MemoryContextSwitchTo(old);
    return d;
}

// Reads the record version at tid into *out when snapshot sees it.
bool fetch_version(Relation rel, ItemPointer tid, Snapshot snapshot, TupleTableSlot *slot,
                   MemoryContext cxt, StoredRecord *out) {
    if (!table_tuple_fetch_row_version(rel, tid, snapshot, slot))
        return false;
    const RecordsRel &r = rel_cache;
    bool isnull;
    text *status = DatumGetTextPP(slot_getattr(slot, r.att[A_STATUS], &isnull));
    out->status = *VARDATA_ANY(status);
    out->retryable = DatumGetBool(slot_getattr(slot, r.att[A_RETRYABLE], &isnull));
    out->attempt = DatumGetInt32(slot_getattr(slot, r.att[A_ATTEMPT], &isnull));
    out->fingerprint = copied(slot, r.att[A_FINGERPRINT], cxt, &out->fingerprint_null);
    out->resource_id = copied(slot, r.att[A_RESOURCE_ID], cxt, &out->resource_id_null);
    out->response = copied(slot, r.att[A_RESPONSE], cxt, &out->response_null);
    out->response_status =
        DatumGetInt32(slot_getattr(slot, r.att[A_RESPONSE_STATUS], &out->response_status_null));
    out->lease_expires_at =
        DatumGetTimestampTz(slot_getattr(slot, r.att[A_LEASE_EXPIRES], &out->lease_null));
    out->expires_at = DatumGetTimestampTz(slot_getattr(slot, r.att[A_EXPIRES], &isnull));
    return true;
}

// Reads the version at tid that the index check found: the latest committed one, since the
// check waited for any transaction changing it. The statement's snapshot sees it unless it
// committed after the statement began; then a new snapshot (READ COMMITTED) does, unless it was
// changed once more in between (false: try again).
bool read_version(Relation rel, ItemPointer tid, TupleTableSlot *slot, MemoryContext cxt,
                  StoredRecord *out) {
    if (ActiveSnapshotSet() && fetch_version(rel, tid, GetActiveSnapshot(), slot, cxt, out))
        return true;
    return fetch_version(rel, tid, GetTransactionSnapshot(), slot, cxt, out);
}

} // namespace

// (records_direct.hpp) True when relid is a Citus table: listed in pg_dist_partition, the catalog
// of distributed, reference and Citus-local tables (on a worker it lists the shell tables too). Its
// rows live in shards, and a write to the relation itself would land in the coordinator's local
// copy or in a worker's shell table, where no query on the distributed table sees it (issue 16).
// Read by a plain catalog scan without Citus's headers or functions; no such catalog, no Citus.
bool citus_table(Oid relid) {
    Oid dist = get_relname_relid("pg_dist_partition", PG_CATALOG_NAMESPACE);
    if (!OidIsValid(dist))
        return false;
    AttrNumber att = get_attnum(dist, "logicalrelid");
    if (att == InvalidAttrNumber)
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("pg_catalog.pg_dist_partition has no column logicalrelid"),
                        errdetail("idem_claim cannot tell whether idempotency.records is a Citus "
                                  "table, so it does not write it directly.")));
    Relation d = table_open(dist, AccessShareLock);
    ScanKeyData key;
    ScanKeyInit(&key, att, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(relid));
    SysScanDesc scan = systable_beginscan(d, InvalidOid, false, nullptr, 1, &key);
    bool found = HeapTupleIsValid(systable_getnext(scan));
    systable_endscan(scan);
    table_close(d, AccessShareLock);
    return found;
}

// The speculative insertion of nodeModifyTable.c's ExecInsert for ON CONFLICT DO NOTHING:
// check the arbiter index (waiting for in-progress transactions), insert the heap tuple with a
// speculative token, insert its index entries, and confirm it, or kill it and start over when
// a concurrent insert of the same key won the race in between.
InsertResult insert_new(const NewRecord &rec, bool read, MemoryContext cxt, StoredRecord *out) {
    PreventCommandIfReadOnly("idem_claim");
    PreventCommandIfParallelMode("idem_claim");
    PreventCommandDuringRecovery("idem_claim");
    // As SPI before each statement: what this statement wrote so far (a CTE, an earlier call in
    // the same statement) is visible to the check and the read below.
    CommandCounterIncrement();
    Oid relid = records().relid;
    Relation rel = table_open(relid, RowExclusiveLock);
    // Taking the lock processed pending invalidations (ALTER TABLE, REINDEX CONCURRENTLY, a
    // new primary key): resolve again now that the definition cannot change under us.
    const RecordsRel &r = records();
    if (r.relid != relid || !plain_table(rel, r)) {
        table_close(rel, NoLock);
        return InsertResult::Unusable;
    }
    // Never write a Citus table here, even when the cached answer is out of date (a backend
    // that resolved the table before Citus listed it): with Citus installed, the catalog is read
    // again under the lock, and the claim takes the SQL path, which Citus routes to the shard.
    if (citus_table(relid)) {
        rel_cache.citus = true;
        table_close(rel, NoLock);
        return InsertResult::Unusable;
    }
    Oid pkey = compat::primary_key_index(rel);
    EState *estate = CreateExecutorState();
    MemoryContext old = MemoryContextSwitchTo(estate->es_query_cxt);
    ResultRelInfo *rri = makeNode(ResultRelInfo);
    InitResultRelInfo(rri, rel, 1, nullptr, 0);
    ExecOpenIndices(rri, true);
    TupleTableSlot *slot = table_slot_create(rel, nullptr);
    ExecClearTuple(slot);
    Datum *v = slot->tts_values;
    bool *n = slot->tts_isnull;
    for (int i = 0; i < A_COUNT; i++)
        n[i] = true;
    auto set = [&](Column c, Datum d) {
        v[r.att[c] - 1] = d;
        n[r.att[c] - 1] = false;
    };
    set(A_SCOPE, rec.scope);
    set(A_KEY, rec.key);
    set(A_STATUS, CStringGetTextDatum("processing"));
    set(A_RETRYABLE, BoolGetDatum(false));
    if (!rec.fingerprint_null)
        set(A_FINGERPRINT, rec.fingerprint);
    set(A_ATTEMPT, Int32GetDatum(1));
    set(A_CREATED, TimestampTzGetDatum(rec.now));
    set(A_UPDATED, TimestampTzGetDatum(rec.now));
    set(A_LEASE_EXPIRES, TimestampTzGetDatum(rec.lease_expires_at));
    set(A_EXPIRES, TimestampTzGetDatum(rec.expires_at));
    ExecStoreVirtualTuple(slot);

    estate->es_output_cid = GetCurrentCommandId(true);
    List *arbiters = list_make1_oid(pkey);
    InsertResult result;
    ItemPointerData conflict;
    for (;;) {
        if (!compat::check_arbiters(rri, slot, estate, &conflict, arbiters)) {
            result = InsertResult::Exists;
            if (read && read_version(rel, &conflict, slot, cxt, out))
                result = InsertResult::Read;
            break;
        }
        uint32 token = SpeculativeInsertionLockAcquire(GetCurrentTransactionId());
        table_tuple_insert_speculative(rel, slot, estate->es_output_cid, 0, nullptr, token);
        bool spec_conflict = false;
        List *recheck =
            compat::insert_speculative_index_entries(rri, slot, estate, &spec_conflict, arbiters);
        table_tuple_complete_speculative(rel, slot, token, !spec_conflict);
        SpeculativeInsertionLockRelease(GetCurrentTransactionId());
        list_free(recheck);
        if (!spec_conflict) {
            result = InsertResult::Inserted;
            break;
        }
    }
    ExecDropSingleTupleTableSlot(slot);
    ExecCloseIndices(rri);
    MemoryContextSwitchTo(old);
    FreeExecutorState(estate);
    table_close(rel, NoLock);
    return result;
}

} // namespace idem::pg
