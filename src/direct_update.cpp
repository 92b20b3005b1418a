// The direct UPDATE of one row of an extension table (direct_access.hpp's update): what
// nodeModifyTable.c's ExecUpdate does for `UPDATE t SET ... WHERE <primary key> = key AND ...`
// when the row is visible and no other transaction changes it meanwhile, without SPI, a plan or
// executor state. Any other case goes back to the SQL statement, which decides as UPDATE does.
#include "direct_internal.hpp"
#include "pg_compat.hpp"

extern "C" {
#include "access/genam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "executor/executor.h"
#include "tcop/utility.h"
#include "utils/snapmgr.h"
}

namespace idem::pg::direct {
using namespace internal;
namespace {

// The version of key's row that snapshot sees, into found; false when none is visible. An MVCC
// snapshot: the index scan takes the predicate locks of a serializable transaction.
bool find_visible(Relation rel, Relation pk, const IndexInfo *info, const Datum *key,
                  Snapshot snapshot, TupleTableSlot *found) {
    int n = info->ii_NumIndexKeyAttrs;
    ScanKeyData keys[INDEX_MAX_KEYS];
    key_scan_keys(pk, info, key, keys);
    IndexScanDesc scan = compat::begin_index_scan(rel, pk, snapshot, n);
    index_rescan(scan, keys, n, nullptr, 0);
    bool got = index_getnext_slot(scan, ForwardScanDirection, found);
    index_endscan(scan);
    return got;
}

// Writes values / nulls (shape order) as the new version of the row at tid, waiting for a
// transaction that is changing it. When the update is not HOT, the new version gets its primary
// key entry (the key never changes: key is its value). Unusable when that transaction changed or
// deleted the row (TM_Updated, TM_Deleted), or this one did in a later command (TM_SelfModified).
UpdateResult write_version(Table *t, Relation rel, Relation pk, ItemPointer tid, const Datum *key,
                           const Datum *values, const bool *nulls, Snapshot snapshot) {
    TupleTableSlot *slot = table_slot_create(rel, nullptr);
    ExecClearTuple(slot);
    for (int c = 0; c < t->shape->ncolumns; c++) {
        slot->tts_values[t->att[c] - 1] = values[c];
        slot->tts_isnull[t->att[c] - 1] = nulls[c];
    }
    ExecStoreVirtualTuple(slot);
    TM_FailureData tmfd;
    bool new_entries = false;
    TM_Result r = compat::tuple_update(rel, tid, slot, GetCurrentCommandId(true), snapshot, &tmfd,
                                       &new_entries);
    if (r == TM_Ok && new_entries) {
        IndexInfo *info = index_info(*t, 0, pk);
        Datum kv[INDEX_MAX_KEYS];
        bool kn[INDEX_MAX_KEYS] = {};
        for (int k = 0; k < info->ii_NumIndexKeyAttrs; k++)
            kv[k] = key[k];
        index_insert(pk, kv, kn, &slot->tts_tid, rel, UNIQUE_CHECK_YES, true, info);
        compat::index_insert_done(pk, info);
    }
    ExecDropSingleTupleTableSlot(slot);
    return r == TM_Ok ? UpdateResult::Updated : UpdateResult::Unusable;
}

} // namespace

// (direct_access.hpp) As SPI runs a statement that writes: the command counter advanced
// (open_for_write), a snapshot of the transaction's (a new one per statement under READ COMMITTED)
// with the current command id; then the visible version looked up through the primary key, change's
// decision, and table_tuple_update. What ExecUpdate checks besides is true of a plain table (no
// trigger, rule, row security, partition or foreign key; the shape's CHECK constraints hold by
// construction, which change guarantees) or checked here (the replica identity of a published
// table).
UpdateResult update(Table *t, const char *caller, const Datum *key, RowChanger change, void *arg) {
    Assert(t->shape->n_indexes == 0);
    Relation rel = open_for_write(t, caller);
    if (rel == nullptr)
        return UpdateResult::Unusable;
    CheckCmdReplicaIdentity(rel, CMD_UPDATE);
    Relation pk = index_open(t->indexes[0], RowExclusiveLock);
    PushActiveSnapshot(GetTransactionSnapshot());
    UpdateActiveSnapshotCommandId();
    Snapshot snapshot = GetActiveSnapshot();
    TupleTableSlot *found = table_slot_create(rel, nullptr);
    UpdateResult result = UpdateResult::Skipped;
    if (find_visible(rel, pk, index_info(*t, 0, pk), key, snapshot, found)) {
        Datum values[MAX_COLUMNS];
        bool nulls[MAX_COLUMNS];
        slot_getallattrs(found);
        switch (change(found, values, nulls, arg)) {
        case Change::Skip:
            break;
        case Change::UseSql:
            result = UpdateResult::Unusable;
            break;
        case Change::Write:
            result = write_version(t, rel, pk, &found->tts_tid, key, values, nulls, snapshot);
            break;
        }
    }
    ExecDropSingleTupleTableSlot(found);
    PopActiveSnapshot();
    index_close(pk, NoLock);
    table_close(rel, NoLock);
    return result;
}

} // namespace idem::pg::direct
