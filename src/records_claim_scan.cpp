// idem_claim's custom scan: `SELECT ... FROM idem_claim(...)` without the function scan.
//
// A function in FROM is a function scan: every execution copies the result type's descriptor
// four times, puts the one row into a tuplestore (a 16 KiB array allocated and freed per
// execution) and reads it back. For a replay that machinery, not the claim, was what kept
// idem_claim under 0.9 x the bare SELECT of the same row (bench/RESULTS.md). This
// planner hook replaces the function scan of a lone idem_claim call by a custom scan that calls
// the claim (claim_row) and hands its columns to the plan in a virtual slot. It takes only the
// calls whose meaning it keeps: no WITH ORDINALITY, no LATERAL reference, no whole-row
// reference, idem_claim as installed (not SECURITY DEFINER, no SET, not STRICT). A rescan with
// unchanged parameters returns the same row, as the function scan's tuplestore does.
// idempotency.claim_scan = off plans the function scan (docs/records.md, "The custom scan").
#include "records.hpp"
#include "pg_compat.hpp"
#include "settings.hpp"

extern "C" {
#include "executor/executor.h"
#include "nodes/extensible.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/clauses.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/paths.h"
#include "optimizer/restrictinfo.h"
#include "optimizer/tlist.h"
#include "parser/parsetree.h"
#include "pgstat.h"
#include "utils/memutils.h"
#include "utils/ruleutils.h"
}

namespace {

using idem::pg::records::CLAIM_COLUMNS;

constexpr const char *NAME = "IdemClaim";

// The scan's state: the call, its arguments, and the row once claimed.
struct ClaimScanState {
    CustomScanState css; // first: PostgreSQL sees a CustomScanState
    FuncExpr *call;
    List *args;              // ExprState of each argument
    FmgrInfo flinfo;         // idem_claim's, as fmgr_info sets it for a plain C function
    FunctionCallInfo fcinfo; // the arguments of the claim
    Bitmapset *arg_params;   // the PARAM_EXEC parameters the arguments read
    int ncols;               // columns of the scan tuple,
    AttrNumber *attnos;      // each one's column of idem_claim_result
    MemoryContext row_cxt;   // holds the claimed row until the next claim
    bool claimed;            // values and nulls hold the row for the current parameters
    int position;            // 0 before the row, 1 on it, 2 after it (backward fetches)
    Datum values[CLAIM_COLUMNS];
    bool nulls[CLAIM_COLUMNS];
};

set_rel_pathlist_hook_type prev_pathlist_hook = nullptr;
CustomPathMethods path_methods;
CustomScanMethods scan_methods;
CustomExecMethods exec_methods;

// The idem_claim call of a function RTE the scan can take, or nullptr.
FuncExpr *claim_call(const RangeTblEntry *rte) {
    if (rte->rtekind != RTE_FUNCTION || rte->funcordinality || list_length(rte->functions) != 1)
        return nullptr;
    Node *expr = linitial_node(RangeTblFunction, rte->functions)->funcexpr;
    if (!IsA(expr, FuncExpr) || castNode(FuncExpr, expr)->funcretset)
        return nullptr;
    return castNode(FuncExpr, expr);
}

// True when funcid is idem_claim as the extension installs it: this library's entry point,
// called without fmgr's SECURITY DEFINER / SET wrapper, not STRICT, not a set.
bool is_idem_claim(Oid funcid) {
    FmgrInfo fi;
    fmgr_info(funcid, &fi);
    return fi.fn_addr == idem_claim && !fi.fn_strict && !fi.fn_retset;
}

// True when an expression of exprs refers to the whole row or a system column of relation relid.
bool whole_row_reference(List *exprs, Index relid) {
    List *vars = pull_var_clause(reinterpret_cast<Node *>(exprs), PVC_RECURSE_AGGREGATES |
                                                                      PVC_RECURSE_WINDOWFUNCS |
                                                                      PVC_RECURSE_PLACEHOLDERS);
    ListCell *lc;
    foreach (lc, vars) {
        const Var *v = static_cast<const Var *>(lfirst(lc));
        if (v->varno == static_cast<int>(relid) && v->varattno <= 0)
            return true;
    }
    return false;
}

// set_rel_pathlist_hook: a lone idem_claim call in FROM becomes the custom scan, at the cost
// of the function scan it replaces.
void add_claim_path(PlannerInfo *root, RelOptInfo *rel, Index rti, RangeTblEntry *rte) {
    if (prev_pathlist_hook != nullptr)
        prev_pathlist_hook(root, rel, rti, rte);
    FuncExpr *call = claim_call(rte);
    if (call == nullptr || !IS_SIMPLE_REL(rel) || !bms_is_empty(rel->lateral_relids) ||
        !idem::settings::claim_scan_on() || !is_idem_claim(call->funcid))
        return;
    List *used = list_copy(rel->reltarget->exprs);
    ListCell *lc;
    foreach (lc, rel->baserestrictinfo)
        used = lappend(used, lfirst_node(RestrictInfo, lc)->clause);
    if (whole_row_reference(used, rti))
        return;
    const Path *function_scan = nullptr;
    List *kept = NIL;
    foreach (lc, rel->pathlist) {
        Path *p = static_cast<Path *>(lfirst(lc));
        if (p->pathtype == T_FunctionScan)
            function_scan = p;
        else
            kept = lappend(kept, p); // another hook's
    }
    if (function_scan == nullptr) // a relation proven empty has none
        return;
    CustomPath *path = makeNode(CustomPath);
    path->path.pathtype = T_CustomScan;
    path->path.parent = rel;
    path->path.pathtarget = rel->reltarget;
    path->path.rows = function_scan->rows;
    path->path.startup_cost = function_scan->startup_cost;
    path->path.total_cost = function_scan->total_cost;
    path->flags = CUSTOMPATH_SUPPORT_PROJECTION | CUSTOMPATH_SUPPORT_BACKWARD_SCAN;
    path->methods = &path_methods;
    rel->pathlist = kept;
    add_path(rel, &path->path);
}

// The scan tuple: each column of the function's row that the plan above or a qual uses, once.
// Not the tlist PlanCustomPath is given: a projection above hands it none (CP_IGNORE_TLIST) and
// sets the scan's target list afterwards, from the Vars of the relation's target.
List *scan_tlist(RelOptInfo *rel, List *quals) {
    List *vars = pull_var_clause(
        reinterpret_cast<Node *>(list_concat_copy(rel->reltarget->exprs, quals)),
        PVC_RECURSE_AGGREGATES | PVC_RECURSE_WINDOWFUNCS | PVC_RECURSE_PLACEHOLDERS);
    List *out = NIL;
    ListCell *lc;
    foreach (lc, vars) {
        Expr *var = static_cast<Expr *>(lfirst(lc));
        if (tlist_member(var, out) == nullptr)
            out = lappend(out, makeTargetEntry(static_cast<Expr *>(copyObjectImpl(var)),
                                               list_length(out) + 1, nullptr, false));
    }
    return out;
}

// PlanCustomPath: the CustomScan, scanning no relation (scanrelid 0) and producing the columns
// of scan_tlist; the call is its one custom expression.
Plan *plan_claim_scan(PlannerInfo *root, RelOptInfo *rel, CustomPath *path, List *tlist,
                      List *clauses, List *) {
    CustomScan *scan = makeNode(CustomScan);
    List *quals = extract_actual_clauses(clauses, false);
    scan->scan.plan.targetlist = tlist;
    scan->scan.plan.qual = quals;
    scan->scan.scanrelid = 0;
    scan->flags = path->flags;
    scan->custom_exprs = list_make1(claim_call(planner_rt_fetch(rel->relid, root)));
    scan->custom_scan_tlist = scan_tlist(rel, quals);
    scan->custom_relids = bms_make_singleton(rel->relid);
    scan->methods = &scan_methods;
    return &scan->scan.plan;
}

// CreateCustomScanState.
Node *create_state(CustomScan *) {
    auto *s = static_cast<ClaimScanState *>(palloc0(sizeof(ClaimScanState)));
    NodeSetTag(s, T_CustomScanState);
    s->css.methods = &exec_methods;
    return reinterpret_cast<Node *>(s);
}

// Adds the PARAM_EXEC parameters that node reads to the Bitmapset *context points to.
bool exec_params(Node *node, void *context) {
    if (node == nullptr)
        return false;
    if (IsA(node, Param) && castNode(Param, node)->paramkind == PARAM_EXEC) {
        auto *params = static_cast<Bitmapset **>(context);
        *params = bms_add_member(*params, castNode(Param, node)->paramid);
    }
    return idem::pg::compat::walk_expression(node, exec_params, context);
}

// BeginCustomScan: the arguments' expressions, the call's fmgr state, the scan columns.
void begin_scan(CustomScanState *node, EState *estate, int) {
    auto *s = reinterpret_cast<ClaimScanState *>(node);
    const CustomScan *scan = castNode(CustomScan, node->ss.ps.plan);
    s->call = linitial_node(FuncExpr, scan->custom_exprs);
    idem::pg::compat::check_function_execute(s->call->funcid); // as the function scan's start
    s->args = ExecInitExprList(s->call->args, &node->ss.ps);
    s->arg_params = nullptr;
    exec_params(reinterpret_cast<Node *>(s->call->args), &s->arg_params);
    // The plan was made for idem_claim as installed (is_idem_claim: no SECURITY DEFINER, SET or
    // hook of fmgr), and a change of the function invalidates it; a hook's view of the function
    // (sepgsql's label) can change without that.
    if (FmgrHookIsNeeded(s->call->funcid))
        ereport(ERROR,
                (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                 errmsg("idem_claim's custom scan cannot call idem_claim under a hook of fmgr"),
                 errhint("Run DISCARD PLANS, or SET idempotency.claim_scan = off.")));
    int nargs = list_length(s->call->args);
    s->flinfo.fn_addr = idem_claim;
    s->flinfo.fn_oid = s->call->funcid;
    s->flinfo.fn_nargs = static_cast<short>(nargs);
    s->flinfo.fn_stats = TRACK_FUNC_PL; // counted with track_functions = all, as a C function
    s->flinfo.fn_mcxt = CurrentMemoryContext;
    fmgr_info_set_expr(reinterpret_cast<Node *>(s->call), &s->flinfo);
    s->fcinfo = static_cast<FunctionCallInfo>(palloc0(SizeForFunctionCallInfo(nargs)));
    InitFunctionCallInfoData(*s->fcinfo, &s->flinfo, nargs, s->call->inputcollid, nullptr, nullptr);
    s->ncols = list_length(scan->custom_scan_tlist);
    s->attnos = static_cast<AttrNumber *>(palloc(sizeof(AttrNumber) * s->ncols));
    int i = 0;
    ListCell *lc;
    foreach (lc, scan->custom_scan_tlist)
        s->attnos[i++] = castNode(Var, lfirst_node(TargetEntry, lc)->expr)->varattno;
    s->row_cxt =
        AllocSetContextCreate(estate->es_query_cxt, "idem_claim row", ALLOCSET_SMALL_SIZES);
}

// The claim of the current arguments into s->values / s->nulls (memory of row_cxt).
void claim(ClaimScanState *s) {
    ExprContext *econtext = s->css.ss.ps.ps_ExprContext;
    FunctionCallInfo fcinfo = s->fcinfo;
    MemoryContextReset(s->row_cxt);
    MemoryContext old = MemoryContextSwitchTo(econtext->ecxt_per_tuple_memory);
    int i = 0;
    ListCell *lc;
    foreach (lc, s->args) {
        fcinfo->args[i].value =
            ExecEvalExpr(static_cast<ExprState *>(lfirst(lc)), econtext, &fcinfo->args[i].isnull);
        i++;
    }
    MemoryContextSwitchTo(s->row_cxt);
    PgStat_FunctionCallUsage usage;
    pgstat_init_function_usage(fcinfo, &usage);
    idem::pg::guard("idem_claim",
                    [s, fcinfo] { idem::pg::records::claim_row(fcinfo, s->values, s->nulls); });
    pgstat_end_function_usage(&usage, true);
    MemoryContextSwitchTo(old);
    s->claimed = true;
}

// Stores the claimed row's scan columns in slot.
TupleTableSlot *store_row(ClaimScanState *s, TupleTableSlot *slot) {
    ExecClearTuple(slot);
    for (int c = 0; c < s->ncols; c++) {
        slot->tts_values[c] = s->values[s->attnos[c] - 1];
        slot->tts_isnull[c] = s->nulls[s->attnos[c] - 1];
    }
    return ExecStoreVirtualTuple(slot);
}

// ExecScan's access method: the row once, forward or backward.
TupleTableSlot *next_row(ScanState *ss) {
    auto *s = reinterpret_cast<ClaimScanState *>(ss);
    bool forward = ScanDirectionIsForward(ss->ps.state->es_direction);
    int target = s->position + (forward ? 1 : -1);
    s->position = Max(0, Min(2, target));
    if (target != 1)
        return ExecClearTuple(ss->ss_ScanTupleSlot);
    if (!s->claimed)
        claim(s);
    return store_row(s, ss->ss_ScanTupleSlot);
}

// ExecScan's recheck method. Inside an EvalPlanQual recheck PostgreSQL asks a scan of no relation
// (scanrelid 0) for its tuple through this method, where a minor release does so for a scan
// outside the rechecked rows (the planner takes no call that a row mark covers): then it is the
// scan's next row, as the function scan would run.
bool recheck_row(ScanState *ss, TupleTableSlot *) {
    return !TupIsNull(next_row(ss));
}

// ExecCustomScan.
TupleTableSlot *exec_scan(CustomScanState *node) {
    return ExecScan(&node->ss, next_row, recheck_row);
}

// EndCustomScan: the memory goes with the query's.
void end_scan(CustomScanState *) {}

// ReScanCustomScan: claims again when a parameter of the arguments changed; otherwise (nothing
// changed, or only a parameter of a qual or the target list) the same row again, as the function
// scan rereads its tuplestore.
void rescan(CustomScanState *node) {
    auto *s = reinterpret_cast<ClaimScanState *>(node);
    if (bms_overlap(node->ss.ps.chgParam, s->arg_params))
        s->claimed = false;
    s->position = 0;
    ExecScanReScan(&node->ss);
}

// ExplainCustomScan: the call, as EXPLAIN VERBOSE shows a function scan's.
void explain_scan(CustomScanState *node, List *ancestors, ExplainState *es) {
    if (!es->verbose)
        return;
    auto *s = reinterpret_cast<ClaimScanState *>(node);
    List *context = set_deparse_context_plan(es->deparse_cxt, node->ss.ps.plan, ancestors);
    ExplainPropertyText("Function Call",
                        deparse_expression(reinterpret_cast<Node *>(s->call), context, true, false),
                        es);
}

} // namespace

// (records.hpp) Registers the scan and installs the planner hook, once per process.
void idem::pg::records::claim_scan_init() {
    path_methods.CustomName = NAME;
    path_methods.PlanCustomPath = plan_claim_scan;
    scan_methods.CustomName = NAME;
    scan_methods.CreateCustomScanState = create_state;
    exec_methods.CustomName = NAME;
    exec_methods.BeginCustomScan = begin_scan;
    exec_methods.ExecCustomScan = exec_scan;
    exec_methods.EndCustomScan = end_scan;
    exec_methods.ReScanCustomScan = rescan;
    exec_methods.ExplainCustomScan = explain_scan;
    RegisterCustomScanMethods(&scan_methods);
    prev_pathlist_hook = set_rel_pathlist_hook;
    set_rel_pathlist_hook = add_claim_path;
}
