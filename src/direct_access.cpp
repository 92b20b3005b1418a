// Direct access to the extension's own tables (see direct_access.hpp).
#include "direct_access.hpp"
#include "direct_internal.hpp"
#include "pg_compat.hpp"
#include "spi_util.hpp"

extern "C" {
#include "access/genam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_namespace.h"
#include "executor/executor.h"
#include "nodes/makefuncs.h"
#include "storage/lmgr.h"
#include "storage/procarray.h"
#include "access/relscan.h"
#include "access/skey.h"
#include "utils/snapmgr.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
}

namespace idem::pg::direct {
using namespace internal;
namespace {

// The tables resolved in this backend, forgotten together on an invalidation.
constexpr int MAX_TABLES = 4;
Table *known[MAX_TABLES];
int n_known = 0;
bool callback_registered = false;

// Forgets a resolved table when it (or everything) is invalidated.
void relcache_changed(Datum, Oid relid) {
    for (int i = 0; i < n_known; i++)
        if (relid == InvalidOid || relid == known[i]->relid)
            known[i]->relid = InvalidOid;
}

// Remembers t for the invalidation callback (once per table).
void track(Table *t) {
    if (!callback_registered) {
        CacheRegisterRelcacheCallback(relcache_changed, (Datum)0);
        callback_registered = true;
    }
    for (int i = 0; i < n_known; i++)
        if (known[i] == t)
            return;
    if (n_known == MAX_TABLES)
        elog(ERROR, "too many tables for direct access");
    known[n_known++] = t;
}

bool is_own(const char *name, const char *const *own, int n) {
    for (int i = 0; i < n; i++)
        if (strcmp(name, own[i]) == 0)
            return true;
    return false;
}

// True when the table has no column, constraint or default beyond the shape's.
bool plain_columns(Relation rel, const Table &t) {
    const TableShape &s = *t.shape;
    TupleDesc desc = RelationGetDescr(rel);
    if (desc->natts != s.ncolumns)
        return false;
    for (int i = 0; i < desc->natts; i++)
        if (TupleDescAttr(desc, i)->attisdropped)
            return false;
    for (int c = 0; c < s.ncolumns; c++) {
        Form_pg_attribute a = TupleDescAttr(desc, t.att[c] - 1);
        if (a->atttypid != s.types[c] || (a->attnotnull && (s.nullable & (1u << c))))
            return false;
    }
    const TupleConstr *constr = desc->constr;
    if (constr == nullptr)
        return true;
    if (constr->has_generated_stored)
        return false;
    for (int i = 0; i < constr->num_check; i++)
        if (!is_own(constr->check[i].ccname, s.own_checks, s.n_checks))
            return false;
    for (int i = 0; i < constr->num_defval; i++) {
        int c = 0;
        while (c < s.ncolumns && t.att[c] != constr->defval[i].adnum)
            c++;
        if (c == s.ncolumns || !(s.defaulted & (1u << c)))
            return false;
    }
    return true;
}

// The position of index ix among the shape's own indexes when its definition is the one the
// install script gives it; -1 otherwise.
int own_index(const TableShape &s, Oid ix) {
    char *name = get_rel_name(ix);
    for (int i = 0; name != nullptr && i < s.n_indexes; i++) {
        if (strcmp(name, s.own_indexes[i]) != 0)
            continue;
        // deparsed under the pinned search path: the caller's would change how names print
        compat::PinnedSearchPath path;
        compat::pin_search_path(&path);
        text *def = DatumGetTextPP(DirectFunctionCall1(pg_get_indexdef, ObjectIdGetDatum(ix)));
        compat::unpin_search_path(&path);
        return strcmp(text_to_cstring(def), s.own_index_defs[i]) == 0 ? i : -1;
    }
    return -1;
}

// True when the table is still exactly what a direct write assumes: not a Citus table, a plain
// heap relation with the shape's columns and nothing else, no trigger, rule or row security, the
// primary key and the shape's own indexes, as defined, and no other (another unique index would
// be an arbiter of the SQL statement too). Anything else: the SQL path. Notes the indexes in t.
bool plain_table(Relation rel, Table *t) {
    if (t->citus || !t->all_columns || rel->rd_rel->relkind != RELKIND_RELATION ||
        rel->trigdesc != nullptr || rel->rd_rel->relhasrules || rel->rd_rel->relrowsecurity ||
        !plain_columns(rel, *t))
        return false;
    Oid pkey = compat::primary_key_index(rel);
    if (!OidIsValid(pkey))
        return false;
    t->indexes[0] = pkey;
    List *indexes = RelationGetIndexList(rel);
    bool plain = list_length(indexes) == 1 + t->shape->n_indexes;
    ListCell *lc;
    foreach (lc, indexes) {
        Oid ix = lfirst_oid(lc);
        if (ix == pkey)
            continue;
        int i = own_index(*t->shape, ix);
        plain = plain && i >= 0;
        if (i >= 0)
            t->indexes[1 + i] = ix;
    }
    list_free(indexes);
    return plain;
}

// Opens the indexes the row has entries in, as ExecOpenIndices opens all of them: the primary
// key (pk, open already: the arbiter) first; a partial index's predicate is not evaluated again.
// Their locks are kept until the end of the transaction, as the table's and the primary key's.
void open_indexes(ResultRelInfo *rri, Table &t, Relation pk, const Datum *values,
                  const bool *nulls) {
    const TableShape &s = *t.shape;
    int n = 0;
    rri->ri_IndexRelationDescs = (Relation *)palloc(sizeof(Relation) * (1 + s.n_indexes));
    rri->ri_IndexRelationInfo = (IndexInfo **)palloc(sizeof(IndexInfo *) * (1 + s.n_indexes));
    for (int i = 0; i <= s.n_indexes; i++) {
        if (i > 0 && s.has_entry != nullptr && !s.has_entry(i - 1, values, nulls))
            continue;
        Relation ix = i == 0 ? pk : index_open(t.indexes[i], RowExclusiveLock);
        rri->ri_IndexRelationDescs[n] = ix;
        rri->ri_IndexRelationInfo[n] = index_info(t, i, ix);
        n++;
    }
    rri->ri_NumIndices = n;
}

// Closes what open_indexes opened (pk stays open), keeping the locks.
void close_indexes(ResultRelInfo *rri) {
    for (int i = 0; i < rri->ri_NumIndices; i++) {
        compat::index_insert_done(rri->ri_IndexRelationDescs[i], rri->ri_IndexRelationInfo[i]);
        if (i > 0)
            index_close(rri->ri_IndexRelationDescs[i], NoLock);
    }
}

} // namespace

// Raises the error of a call that finds the extension's table gone: the schema's (3F000, as in a
// database without the extension) when DROP EXTENSION removed both, else 42P01. Never XX000:
// a DROP EXTENSION that commits while a call waits for the table's lock is an ordinary race
// (test/isolation/specs/drop_extension_race.spec).
[[noreturn]] void internal::table_missing(const char *relname) {
    (void)extension_schema();
    ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE),
                    errmsg("table idempotency.%s does not exist", relname),
                    errhint("Run CREATE EXTENSION idempotency in this database, or ALTER EXTENSION "
                            "idempotency UPDATE if it is installed.")));
}

// The IndexInfo of index i (0: the primary key, with what a speculative insertion needs), built
// once per resolution of the table: neither the arbiter check nor the insertion of btree entries
// without expressions changes it.
IndexInfo *internal::index_info(Table &t, int i, Relation ix) {
    if (t.infos[i] != nullptr)
        return t.infos[i];
    if (t.cxt == nullptr)
        t.cxt = AllocSetContextCreate(CacheMemoryContext, "idempotency direct access",
                                      ALLOCSET_SMALL_SIZES);
    MemoryContext old = MemoryContextSwitchTo(t.cxt);
    IndexInfo *info = BuildIndexInfo(ix);
    if (i == 0)
        BuildSpeculativeIndexInfo(ix, info);
    else if (t.shape->has_entry != nullptr)
        info->ii_Predicate = NIL; // has_entry decides it by the verified definition
    MemoryContextSwitchTo(old);
    t.infos[i] = info;
    return info;
}

// (direct_access.hpp) Resolves the table and its column numbers (by name). A missing column is
// not an error here: the table is then not plain and the caller takes the SQL path.
const Table &resolve(Table *t) {
    if (OidIsValid(t->relid))
        return *t;
    track(t);
    const TableShape &s = *t->shape;
    Assert(s.ncolumns <= MAX_COLUMNS);
    Oid relid = get_relname_relid(s.relname, extension_schema());
    if (!OidIsValid(relid))
        table_missing(s.relname);
    t->citus = citus_table(relid);
    t->all_columns = true;
    for (int c = 0; c < s.ncolumns; c++) {
        t->att[c] = get_attnum(relid, s.columns[c]);
        if (t->att[c] == InvalidAttrNumber)
            t->all_columns = false;
    }
    t->plain = -1;
    if (t->cxt != nullptr)
        MemoryContextReset(t->cxt);
    for (IndexInfo *&info : t->infos)
        info = nullptr;
    t->relid = relid; // last: an error above leaves the table unresolved
    return *t;
}

namespace {

// The values of the primary key's columns, from the row in shape order (plain_columns made sure
// that every column of the table is one of the shape's).
void key_values(const Table &t, const IndexInfo *info, const Datum *values, Datum *key) {
    for (int k = 0; k < info->ii_NumIndexKeyAttrs; k++) {
        int c = 0;
        while (t.att[c] != info->ii_IndexAttrNumbers[k])
            c++;
        key[k] = values[c];
    }
}

// What find_key found.
enum class Found {
    None, // the key has no row (or only versions that are dead to every transaction)
    Row,  // found holds the row's latest committed version (or this transaction's own)
    Busy  // nowait: another transaction is inserting, changing or deleting the row right now
};

// Looks the key up as the executor's arbiter check does, through the primary key with a dirty
// snapshot: waits for a transaction that is inserting, changing or deleting its row, then looks
// again. nowait: such a transaction still in progress is Busy instead, without waiting; one that
// ended meanwhile is looked past again as after a wait. A speculative insertion still in flight
// is waited for either way: that wait is bounded by the insertion itself (its index entries),
// never by its transaction, and its row is then found again, Busy when its inserter goes on.
Found find_key(Relation rel, Relation pk, const IndexInfo *info, const Datum *key,
               TupleTableSlot *found, bool nowait) {
    int n = info->ii_NumIndexKeyAttrs;
    ScanKeyData keys[INDEX_MAX_KEYS];
    key_scan_keys(pk, info, key, keys);
    SnapshotData dirty;
    InitDirtySnapshot(dirty);
    for (;;) {
        IndexScanDesc scan = compat::begin_index_scan(rel, pk, &dirty, n);
        index_rescan(scan, keys, n, nullptr, 0);
        bool got = index_getnext_slot(scan, ForwardScanDirection, found);
        index_endscan(scan);
        if (!got)
            return Found::None;
        TransactionId xwait = TransactionIdIsValid(dirty.xmin) ? dirty.xmin : dirty.xmax;
        if (!TransactionIdIsValid(xwait))
            return Found::Row;
        if (dirty.speculativeToken != 0)
            SpeculativeInsertionWait(dirty.xmin, dirty.speculativeToken);
        else if (!nowait)
            XactLockTableWait(xwait, rel, &found->tts_tid, XLTW_InsertIndex);
        else if (TransactionIdIsInProgress(xwait))
            return Found::Busy;
    }
}

// Inserts the row with a speculative token, its index entries, and confirms it; false (the row
// killed) when a concurrent insert of the same key won the race in between.
bool insert_row(Table *t, Relation rel, Relation pk, const Datum *values, const bool *nulls) {
    const Table &r = *t;
    EState *estate = CreateExecutorState();
    MemoryContext old = MemoryContextSwitchTo(estate->es_query_cxt);
    ResultRelInfo *rri = makeNode(ResultRelInfo);
    InitResultRelInfo(rri, rel, 1, nullptr, 0);
    open_indexes(rri, *t, pk, values, nulls);
    TupleTableSlot *slot = table_slot_create(rel, nullptr);
    ExecClearTuple(slot);
    for (int i = 0; i < slot->tts_tupleDescriptor->natts; i++)
        slot->tts_isnull[i] = true;
    for (int c = 0; c < r.shape->ncolumns; c++) {
        slot->tts_values[r.att[c] - 1] = values[c];
        slot->tts_isnull[r.att[c] - 1] = nulls[c];
    }
    ExecStoreVirtualTuple(slot);
    estate->es_output_cid = GetCurrentCommandId(true);
    List *arbiters = list_make1_oid(r.indexes[0]);
    uint32 token = SpeculativeInsertionLockAcquire(GetCurrentTransactionId());
    table_tuple_insert_speculative(rel, slot, estate->es_output_cid, 0, nullptr, token);
    bool spec_conflict = false;
    List *recheck =
        compat::insert_speculative_index_entries(rri, slot, estate, &spec_conflict, arbiters);
    table_tuple_complete_speculative(rel, slot, token, !spec_conflict);
    SpeculativeInsertionLockRelease(GetCurrentTransactionId());
    list_free(recheck);
    ExecDropSingleTupleTableSlot(slot);
    close_indexes(rri);
    MemoryContextSwitchTo(old);
    FreeExecutorState(estate);
    return !spec_conflict;
}

} // namespace

// The scan keys of the primary key's equality on key (its values in index column order).
void internal::key_scan_keys(Relation pk, const IndexInfo *info, const Datum *key,
                             ScanKeyData *keys) {
    for (int k = 0; k < info->ii_NumIndexKeyAttrs; k++)
        ScanKeyEntryInitialize(&keys[k], 0, k + 1, info->ii_UniqueStrats[k], InvalidOid,
                               pk->rd_indcollation[k], info->ii_UniqueProcs[k], key[k]);
}

// With rel open (and locked): resolved again, since taking the lock processed pending
// invalidations (ALTER TABLE, REINDEX CONCURRENTLY, a new primary key), whether the table is the
// one relid names, has the shape's definition and is no Citus table (its rows live in shards:
// the caller takes the SQL path, which Citus routes). With Citus installed the catalog is read
// again under the lock, even when a cached answer says otherwise.
bool internal::usable(Table *t, Relation rel, Oid relid) {
    const Table &r = resolve(t);
    if (r.relid == relid && r.plain < 0)
        t->plain = plain_table(rel, t) ? 1 : 0;
    if (r.relid != relid || r.plain == 0 || citus_table(relid)) {
        t->citus = t->citus || citus_table(relid);
        return false;
    }
    return true;
}

// (direct_internal.hpp) What a direct write does first, as SPI before a statement that writes.
Relation internal::open_for_write(Table *t, const char *caller) {
    PreventCommandIfReadOnly(caller);
    PreventCommandIfParallelMode(caller);
    PreventCommandDuringRecovery(caller);
    // As SPI before each statement: what this statement wrote so far (a CTE, an earlier call in
    // the same statement) is visible to the lookup and the read.
    CommandCounterIncrement();
    Oid relid = resolve(t).relid;
    // try_: a DROP EXTENSION that committed while this waited for the lock leaves no table
    Relation rel = try_table_open(relid, RowExclusiveLock);
    if (rel == nullptr) {
        t->relid = InvalidOid;
        table_missing(t->shape->relname);
    }
    // Never write a Citus table here, even when the cached answer is out of date (a backend that
    // resolved the table before Citus listed it).
    if (!usable(t, rel, relid)) {
        table_close(rel, NoLock);
        return nullptr;
    }
    return rel;
}

// (direct_access.hpp) The speculative insertion of nodeModifyTable.c's ExecInsert for ON
// CONFLICT DO NOTHING: look the key up (waiting for in-progress transactions, or with nowait
// answering Busy), insert the heap tuple with a speculative token, insert its index entries, and
// confirm it, or kill it and start over when a concurrent insert of the same key won the race in
// between (the lookup then finds that insert's row: with nowait, Busy while its transaction goes
// on). The lookup is this file's own (find_key) rather than ExecCheckIndexConstraints, so that a
// key that exists costs one index descent and no executor state, and the reader gets the version
// it found.
InsertResult insert(Table *t, const char *caller, const Datum *values, const bool *nulls,
                    ConflictReader read, void *read_arg, bool nowait) {
    Relation rel = open_for_write(t, caller);
    if (rel == nullptr)
        return InsertResult::Unusable;
    const Table &r = *t;
    Relation pk = index_open(r.indexes[0], RowExclusiveLock);
    InsertResult result = InsertResult::Exists;
    if (r.shape->insert_first && insert_row(t, rel, pk, values, nulls)) {
        result = InsertResult::Inserted;
    } else {
        const IndexInfo *pk_info = index_info(*t, 0, pk);
        Datum key[INDEX_MAX_KEYS];
        key_values(r, pk_info, values, key);
        TupleTableSlot *found = table_slot_create(rel, nullptr);
        Found f;
        while ((f = find_key(rel, pk, pk_info, key, found, nowait)) == Found::None)
            if (insert_row(t, rel, pk, values, nulls)) {
                result = InsertResult::Inserted;
                break;
            }
        if (f == Found::Busy)
            result = InsertResult::Busy;
        else if (result == InsertResult::Exists && read != nullptr && read(rel, found, read_arg))
            result = InsertResult::Read;
        ExecDropSingleTupleTableSlot(found);
    }
    index_close(pk, NoLock);
    table_close(rel, NoLock);
    return result;
}

// (direct_access.hpp) The primary key looked up with a dirty snapshot, without waiting: a row
// version of another transaction in progress sets the snapshot's xmin (inserting) or xmax
// (updating, deleting).
bool held_elsewhere(Table *t, const Datum *key) {
    Oid relid = resolve(t).relid;
    Relation rel = try_table_open(relid, AccessShareLock);
    if (rel == nullptr)
        return false;
    bool held = false;
    if (usable(t, rel, relid)) {
        Relation pk = index_open(t->indexes[0], AccessShareLock);
        const IndexInfo *info = index_info(*t, 0, pk);
        int n = info->ii_NumIndexKeyAttrs;
        ScanKeyData keys[INDEX_MAX_KEYS];
        key_scan_keys(pk, info, key, keys);
        SnapshotData dirty;
        InitDirtySnapshot(dirty);
        TupleTableSlot *found = table_slot_create(rel, nullptr);
        IndexScanDesc scan = compat::begin_index_scan(rel, pk, &dirty, n);
        index_rescan(scan, keys, n, nullptr, 0);
        held = index_getnext_slot(scan, ForwardScanDirection, found) &&
               (TransactionIdIsValid(dirty.xmin) || TransactionIdIsValid(dirty.xmax));
        index_endscan(scan);
        ExecDropSingleTupleTableSlot(found);
        index_close(pk, AccessShareLock);
    }
    table_close(rel, AccessShareLock);
    return held;
}

} // namespace idem::pg::direct
