// SPI helpers: saved plans, the extension owner, entering/leaving SPI as that owner, and the
// result row type of a function.
//
// An error raised inside one of the extension's statements (a constraint or trigger of the
// operator's, a statement_timeout, a cancel, a lock timeout, a deadlock) reaches the caller
// without the statement's text: SPI's error context callback adds 'SQL statement "<text>"' to
// CONTEXT (or, for an error with a position, sets the internal query shown as QUERY), and that
// text is the extension's internals, not the caller's SQL. exec and saved_plan catch the error,
// remove exactly that text and raise it again; every other context line stays (the caller's
// PL/pgSQL, a trigger's statements, PostgreSQL's "while inserting index tuple ...").
#include "spi_util.hpp"

#include <algorithm>

extern "C" {
#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_namespace.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "utils/memutils.h"
#include "utils/inval.h"
#include "utils/guc.h"
#include "utils/plancache.h"
#include "utils/syscache.h"
#include "utils/typcache.h"
}

#include <cstring>

namespace idem::pg {

static Oid cached_owner = InvalidOid;
static bool owner_callback_registered = false;

// Forgets the cached owner when pg_namespace changes.
static void owner_invalidate(Datum, int, uint32) {
    cached_owner = InvalidOid;
}

// context without every line that contains sql (SPI's 'SQL statement "<sql>"', in whatever
// language lc_messages gives it); NULL when no line is left.
static char *context_without(const char *context, const char *sql) {
    size_t sql_len = strlen(sql);
    StringInfoData out;
    initStringInfo(&out);
    const char *line = context;
    while (*line != '\0') {
        const char *hit = strstr(line, sql);
        if (hit == nullptr) {
            appendStringInfoString(&out, line);
            break;
        }
        // the lines the text spans: from the start of the line it begins on to the end of the
        // line it ends on (the statement texts have no newline, but a line is a line)
        const char *start = hit;
        while (start > line && start[-1] != '\n')
            start--;
        const char *end = strchr(hit + sql_len, '\n');
        appendBinaryStringInfo(&out, line, static_cast<int>(start - line));
        line = end == nullptr ? hit + strlen(hit) : end + 1;
    }
    while (out.len > 0 && out.data[out.len - 1] == '\n')
        out.data[--out.len] = '\0';
    if (out.len == 0) {
        pfree(out.data);
        return nullptr;
    }
    return out.data;
}

// Raises the error being handled (in a PG_CATCH block) again without the statement text sql in
// its context or internal query; cxt is the memory context of the code that caught it.
[[noreturn]] static void rethrow_without_statement(MemoryContext cxt, const char *sql) {
    MemoryContextSwitchTo(cxt);
    ErrorData *edata = CopyErrorData();
    FlushErrorState();
    if (sql != nullptr && sql[0] != '\0') {
        if (edata->internalquery != nullptr && strcmp(edata->internalquery, sql) == 0) {
            pfree(edata->internalquery);
            edata->internalquery = nullptr;
            edata->internalpos = 0;
        }
        if (edata->context != nullptr) {
            char *context = context_without(edata->context, sql);
            pfree(edata->context);
            edata->context = context;
        }
    }
    ReThrowError(edata);
}

// The text of a saved plan's (only) statement.
static const char *plan_text(SPIPlanPtr plan) {
    List *sources = SPI_plan_get_plan_sources(plan);
    if (sources == NIL)
        return nullptr;
    return static_cast<CachedPlanSource *>(linitial(sources))->query_string;
}

// Prepares and keeps a plan the first time it is needed.
SPIPlanPtr saved_plan(SPIPlanPtr *slot, const char *sql, int nargs, const Oid *argtypes,
                      int cursor_options) {
    if (*slot == nullptr) {
        MemoryContext cxt = CurrentMemoryContext;
        SPIPlanPtr volatile prepared = nullptr;
        PG_TRY();
        {
            // an error here (a table of the schema dropped) would quote sql
            prepared = SPI_prepare_cursor(sql, nargs, const_cast<Oid *>(argtypes), cursor_options);
        }
        PG_CATCH();
        {
            // the same error, without sql in its context or internal query
            rethrow_without_statement(cxt, sql);
        }
        PG_END_TRY();
        SPIPlanPtr plan = prepared;
        if (plan == nullptr)
            elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
        if (SPI_keepplan(plan) != 0)
            elog(ERROR, "SPI_keepplan failed");
        *slot = plan;
    }
    return *slot;
}

// Looks up schema "idempotency", raising 3F000 when the extension is not installed here.
Oid extension_schema() {
    Oid nsp = get_namespace_oid("idempotency", true);
    if (!OidIsValid(nsp))
        ereport(ERROR,
                (errcode(ERRCODE_UNDEFINED_SCHEMA), errmsg("schema \"idempotency\" does not exist"),
                 errhint("Run CREATE EXTENSION idempotency in this database.")));
    return nsp;
}

// Looks up the owner of schema "idempotency".
Oid extension_owner() {
    if (OidIsValid(cached_owner))
        return cached_owner;
    if (!owner_callback_registered) {
        CacheRegisterSyscacheCallback(NAMESPACEOID, owner_invalidate, (Datum)0);
        owner_callback_registered = true;
    }
    Oid nsp = extension_schema();
    HeapTuple tup = SearchSysCache1(NAMESPACEOID, ObjectIdGetDatum(nsp));
    if (!HeapTupleIsValid(tup))
        elog(ERROR, "cache lookup failed for namespace %u", nsp);
    cached_owner = ((Form_pg_namespace)GETSTRUCT(tup))->nspowner;
    ReleaseSysCache(tup);
    return cached_owner;
}

// SPI_connect and switch to the extension owner.
void enter(SavedUser *saved) {
    Oid owner = extension_owner();
    if (SPI_connect() != SPI_OK_CONNECT)
        elog(ERROR, "SPI_connect failed");
    GetUserIdAndSecContext(&saved->userid, &saved->sec_context);
    SetUserIdAndSecContext(owner, saved->sec_context | SECURITY_LOCAL_USERID_CHANGE |
                                      SECURITY_RESTRICTED_OPERATION);
    compat::pin_search_path(&saved->path);
}

// Back to the caller's user; SPI_finish.
void leave(const SavedUser *saved) {
    compat::unpin_search_path(&saved->path);
    SetUserIdAndSecContext(saved->userid, saved->sec_context);
    SPI_finish();
}

// SPI_execute_plan with an error check; an error inside the statement is raised without the
// statement's text.
// What this execution of a statement saved by saved_plan may plan: nothing (0), a custom plan
// (1: a statement left to the plan cache's choice, cursor_options 0, may be planned on any
// execution) or its generic plan (2: on first use and after an invalidation, ANALYZE or DDL).
// Pending invalidations are taken first, as the execution's own locking would.
static int planning(SPIPlanPtr plan) {
    AcceptInvalidationMessages();
    int p = 0;
    ListCell *lc;
    foreach (lc, SPI_plan_get_plan_sources(plan)) {
        auto *src = static_cast<CachedPlanSource *>(lfirst(lc));
        if (!(src->cursor_options & CURSOR_OPT_GENERIC_PLAN))
            p = std::max(p, 1);
        else if (!src->is_valid || src->gplan == nullptr || !src->gplan->is_valid)
            p = 2;
    }
    return p;
}

uint64 exec(SPIPlanPtr plan, Datum *values, const char *nulls, bool read_only, long tcount) {
    MemoryContext cxt = CurrentMemoryContext;
    // A generic plan is kept until the next invalidation, whatever the table grows to meanwhile:
    // it is made without sequential scans, which a small table would get and keep (a
    // queue's inbox churned from 200 to 10,000 rows under a sequential-scan plan). And every
    // plan is made without JIT: a generic plan's cost is estimated for an unknown LIMIT $n (a
    // tenth of the table), which passed jit_above_cost on a large outbox, and each execution
    // then compiled 27 functions, 15 of its 18 ms (the relay at 0.30 x the PL/pgSQL
    // queue). The settings are undone after the statement, or by the (sub)transaction abort.
    const int plans = planning(plan);
    const int nest = plans > 0 ? NewGUCNestLevel() : -1; // const: kept over setjmp
    if (plans > 0)
        (void)set_config_option("jit", "off", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0,
                                false);
    if (plans == 2) // not for a custom plan: the purge's batch walks the table in ctid order
        (void)set_config_option("enable_seqscan", "off", PGC_USERSET, PGC_S_SESSION,
                                GUC_ACTION_SAVE, true, 0, false);
    volatile int rc = 0;
    PG_TRY();
    {
        // SPI's error context callback names the statement in any error raised in here
        rc = SPI_execute_plan(plan, values, nulls, read_only, tcount);
    }
    PG_CATCH();
    {
        // the same error, without that line
        rethrow_without_statement(cxt, plan_text(plan));
    }
    PG_END_TRY();
    if (nest >= 0)
        AtEOXact_GUC(true, nest);
    if (rc < 0)
        elog(ERROR, "SPI_execute_plan failed: %s", SPI_result_code_string(rc));
    return SPI_processed;
}

// One column of the current SPI result.
Datum col(uint64 row, int attno, bool *isnull) {
    return SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, attno, isnull);
}

// Asks the function manager once per call site and keeps the blessed copy in fn_mcxt.
TupleDesc result_desc(FunctionCallInfo fcinfo) {
    if (fcinfo->flinfo->fn_extra == nullptr) {
        TupleDesc td;
        if (get_call_result_type(fcinfo, nullptr, &td) != TYPEFUNC_COMPOSITE)
            elog(ERROR, "return type must be a row type");
        MemoryContext old = MemoryContextSwitchTo(fcinfo->flinfo->fn_mcxt);
        fcinfo->flinfo->fn_extra = BlessTupleDesc(CreateTupleDescCopy(td));
        MemoryContextSwitchTo(old);
    }
    return static_cast<TupleDesc>(fcinfo->flinfo->fn_extra);
}

// (spi_util.hpp) The result row, by the type cache for a named composite result type.
Datum result_row(FunctionCallInfo fcinfo, Datum *values, bool *nulls) {
    Oid type = get_fn_expr_rettype(fcinfo->flinfo);
    if (!OidIsValid(type) || type == RECORDOID || fcinfo->flinfo->fn_extra != nullptr)
        return HeapTupleGetDatum(heap_form_tuple(result_desc(fcinfo), values, nulls));
    // The type cache's entry lives as long as the backend and an invalidation of the type only
    // resets its tupDesc, so the entry is kept and asked again only then; the descriptor needs
    // no pin (lookup_rowtype_tupdesc's reference count and resource owner entry), since nothing
    // up to heap_form_tuple can process an invalidation (400 instructions a replay).
    static TypeCacheEntry *entry = nullptr;
    if (entry == nullptr || entry->type_id != type || entry->tupDesc == nullptr) {
        entry = lookup_type_cache(type, TYPECACHE_TUPDESC);
        if (entry->tupDesc == nullptr)
            elog(ERROR, "type %u is not composite", type);
    }
    return HeapTupleGetDatum(heap_form_tuple(entry->tupDesc, values, nulls));
}

} // namespace idem::pg
