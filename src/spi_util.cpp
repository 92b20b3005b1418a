// SPI helpers: saved plans, the extension owner, entering/leaving SPI as that owner, and the
// result row type of a function.
#include "spi_util.hpp"

extern "C" {
#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_namespace.h"
#include "funcapi.h"
#include "utils/memutils.h"
#include "utils/inval.h"
#include "utils/syscache.h"
#include "utils/typcache.h"
}

namespace idem::pg {

static Oid cached_owner = InvalidOid;
static bool owner_callback_registered = false;

// Forgets the cached owner when pg_namespace changes.
static void owner_invalidate(Datum, int, uint32) {
    cached_owner = InvalidOid;
}

// Prepares and keeps a plan the first time it is needed.
SPIPlanPtr saved_plan(SPIPlanPtr *slot, const char *sql, int nargs, const Oid *argtypes,
                      int cursor_options) {
    if (*slot == nullptr) {
        SPIPlanPtr plan =
            SPI_prepare_cursor(sql, nargs, const_cast<Oid *>(argtypes), cursor_options);
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
}

// Back to the caller's user; SPI_finish.
void leave(const SavedUser *saved) {
    SetUserIdAndSecContext(saved->userid, saved->sec_context);
    SPI_finish();
}

// SPI_execute_plan with an error check.
uint64 exec(SPIPlanPtr plan, Datum *values, const char *nulls, bool read_only, long tcount) {
    int rc = SPI_execute_plan(plan, values, nulls, read_only, tcount);
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
    TupleDesc desc = lookup_rowtype_tupdesc(type, -1);
    HeapTuple tuple = heap_form_tuple(desc, values, nulls);
    ReleaseTupleDesc(desc);
    return HeapTupleGetDatum(tuple);
}

} // namespace idem::pg
