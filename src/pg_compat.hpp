// The differences between the supported PostgreSQL majors (15, 16, 17, 18), each behind a named
// helper. This is the one place that tests PG_VERSION_NUM; the rest of src/ calls the helpers.
#pragma once

extern "C" {
#include "postgres.h"

#include "access/genam.h"
#include "access/tableam.h"
#include "executor/executor.h"
#include "nodes/execnodes.h"
#include "nodes/pg_list.h"
#include "storage/itemptr.h"
#include "utils/guc.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "catalog/namespace.h"
#include "catalog/objectaccess.h"
#include "catalog/pg_proc.h"
#include "commands/explain.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "utils/acl.h"
#include "utils/lsyscache.h"
// EXPLAIN's property lines and ExplainState (the custom scan's EXPLAIN): commands/explain.h up
// to 17; 18 moved them to explain_format.h and explain_state.h.
#if PG_VERSION_NUM >= 180000
#include "commands/explain_format.h"
#include "commands/explain_state.h"
#endif
}

#include <cstdlib>

#if PG_VERSION_NUM < 150000 || PG_VERSION_NUM >= 190000
#error "idempotency supports PostgreSQL 15, 16, 17 and 18"
#endif

namespace idem::pg::compat {

// The OID of the table's primary key index (InvalidOid when it has none). From 18 on the
// caller says whether a deferrable one counts: it does not here (a deferrable key cannot be an
// arbiter of INSERT ... ON CONFLICT).
inline Oid primary_key_index(Relation rel) {
#if PG_VERSION_NUM >= 180000
    return RelationGetPrimaryKeyIndex(rel, false);
#else
    return RelationGetPrimaryKeyIndex(rel);
#endif
}

// An index scan of nkeys keys without ORDER BY operators. 18 added the instrumentation of
// EXPLAIN ANALYZE (none here).
inline IndexScanDesc begin_index_scan(Relation heap, Relation index, Snapshot snapshot, int nkeys) {
#if PG_VERSION_NUM >= 180000
    return index_beginscan(heap, index, snapshot, nullptr, nkeys, 0);
#else
    return index_beginscan(heap, index, snapshot, nkeys, 0);
#endif
}

// Inserts the index entries of a speculatively inserted tuple, noting a conflict on an arbiter
// in *spec_conflict instead of raising. 16 added onlySummarizing (false: every index).
inline List *insert_speculative_index_entries(ResultRelInfo *rri, TupleTableSlot *slot,
                                              EState *estate, bool *spec_conflict, List *arbiters) {
#if PG_VERSION_NUM >= 160000
    return ExecInsertIndexTuples(rri, slot, estate, false, true, spec_conflict, arbiters, false);
#else
    return ExecInsertIndexTuples(rri, slot, estate, false, true, spec_conflict, arbiters);
#endif
}

// table_tuple_update, waiting for a concurrent writer; *new_entries true when the new version
// needs entries in every index (not a HOT update). 16 replaced the bool by TU_UpdateIndexes,
// whose TU_Summarizing asks only summarizing (BRIN) indexes for one.
inline TM_Result tuple_update(Relation rel, ItemPointer tid, TupleTableSlot *slot, CommandId cid,
                              Snapshot snapshot, TM_FailureData *tmfd, bool *new_entries) {
    LockTupleMode lockmode;
#if PG_VERSION_NUM >= 160000
    TU_UpdateIndexes update_indexes = TU_None;
    TM_Result r = table_tuple_update(rel, tid, slot, cid, snapshot, InvalidSnapshot, true, tmfd,
                                     &lockmode, &update_indexes);
    *new_entries = update_indexes == TU_All;
#else
    TM_Result r = table_tuple_update(rel, tid, slot, cid, snapshot, InvalidSnapshot, true, tmfd,
                                     &lockmode, new_entries);
#endif
    return r;
}

// Lets the index access method finish what this statement's insertions into ix began (17 added
// the call to ExecCloseIndices; btree has nothing to finish).
inline void index_insert_done(Relation ix, IndexInfo *info) {
#if PG_VERSION_NUM >= 170000
    index_insert_cleanup(ix, info);
#else
    (void)ix;
    (void)info;
#endif
}

// Memory for the *extra of a setting's check hook, which PostgreSQL frees: malloc'd up to 15;
// from 16 on GUC memory is a memory context, allocated with guc_malloc. NULL when out of memory.
inline void *guc_extra_alloc(size_t size) {
#if PG_VERSION_NUM >= 160000
    return guc_malloc(LOG, size);
#else
    return malloc(size);
#endif
}

// The executor's check before it calls function funcid: EXECUTE for the current user (the
// usual 42501 error when refused), then the object access hook. 16 replaced pg_proc_aclcheck
// by object_aclcheck.
inline void check_function_execute(Oid funcid) {
#if PG_VERSION_NUM >= 160000
    AclResult r = object_aclcheck(ProcedureRelationId, funcid, GetUserId(), ACL_EXECUTE);
#else
    AclResult r = pg_proc_aclcheck(funcid, GetUserId(), ACL_EXECUTE);
#endif
    if (r != ACLCHECK_OK)
        aclcheck_error(r, OBJECT_FUNCTION, get_func_name(funcid));
    InvokeFunctionExecuteHook(funcid);
}

// expression_tree_walker with a walker of the type 16 declares (15 takes bool (*)() and calls
// it with the same two arguments).
using ExpressionWalker = bool (*)(Node *node, void *context);
inline bool walk_expression(Node *node, ExpressionWalker walker, void *context) {
#if PG_VERSION_NUM >= 160000
    return expression_tree_walker(node, walker, context);
#else
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wcast-function-type"
    return expression_tree_walker(node, reinterpret_cast<bool (*)()>(walker), context);
#pragma GCC diagnostic pop
#endif
}

// The search path of code that runs as the extension's owner: pg_catalog, never the
// caller's schemas nor its temporary schema, so that no type, function, operator or relation the
// caller planted is found by name. pin_search_path ... unpin_search_path; an error between them is
// undone by the (sub)transaction's abort. 15 and 16: an override search path of pg_catalog alone
// (the temporary schema is not searched at all; no setting changes, so nothing is reparsed). 17
// removed PushOverrideSearchPath: the setting, at a GUC nest level of its own, to
// "pg_catalog, pg_temp" (PostgreSQL's RestrictSearchPath: pg_temp last).
struct PinnedSearchPath {
    int guc_nest;
};

inline void pin_search_path(PinnedSearchPath *p) {
#if PG_VERSION_NUM >= 170000
    p->guc_nest = NewGUCNestLevel();
    (void)set_config_option("search_path", "pg_catalog, pg_temp", PGC_USERSET, PGC_S_SESSION,
                            GUC_ACTION_SAVE, true, 0, false);
#else
    OverrideSearchPath path = {NIL, true, false, 0};
    PushOverrideSearchPath(&path);
    p->guc_nest = -1;
#endif
}

inline void unpin_search_path(const PinnedSearchPath *p) {
#if PG_VERSION_NUM >= 170000
    AtEOXact_GUC(true, p->guc_nest);
#else
    (void)p;
    PopOverrideSearchPath();
#endif
}

} // namespace idem::pg::compat
