// idem_stuck (C from 0.8; 0.7's is PL/pgSQL, SECURITY DEFINER): the processing records whose
// lease ended at least older_than ago, only those of scopes the caller may use when scope
// bindings exist (docs/tenants.md). A SECURITY DEFINER function runs as its owner and cannot
// tell who called it; this one checks as the caller and reads as the owner (idem::pg::enter).
#include "pg_cpp.hpp"
#include "spi_util.hpp"
#include "tenants.hpp"

extern "C" {
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/fmgrprotos.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
}

namespace {

// The stuck records, oldest lease first, as 0.7's PL/pgSQL lists them. Planned per call (the
// plan cache chooses, cursor_options 0): a generic plan is made without sequential scans, and
// the whole table is read here.
const char *const SQL_STUCK =
    "SELECT r.scope::pg_catalog.text, r.key::pg_catalog.text, r.attempt::pg_catalog.int4, "
    "r.fingerprint::pg_catalog.bytea, r.created_at::pg_catalog.timestamptz, "
    "r.updated_at::pg_catalog.timestamptz, r.lease_expires_at::pg_catalog.timestamptz, "
    "r.expires_at::pg_catalog.timestamptz FROM idempotency.records AS r "
    "WHERE r.status OPERATOR(pg_catalog.=) 'processing' AND r.lease_expires_at "
    "OPERATOR(pg_catalog.<=) (pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) $1) "
    "ORDER BY r.lease_expires_at, r.scope, r.key";
const Oid STUCK_TYPES[] = {INTERVALOID};
constexpr int STUCK_NCOLS = 8;
SPIPlanPtr plan_stuck;

} // namespace

// idem_stuck(older_than): the stuck records the caller may see.
IDEM_PG_FUNCTION(idem_stuck) {
    if (PG_ARGISNULL(0))
        ereport(ERROR,
                (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("older_than must not be null")));
    Datum older_than = PG_GETARG_DATUM(0);
    Interval zero{};
    if (DatumGetBool(DirectFunctionCall2(interval_lt, older_than, PointerGetDatum(&zero))))
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("older_than must not be negative")));
    Oid user = GetUserId();
    bool filter = idem::pg::tenants::stuck_filter_on();
    InitMaterializedSRF(fcinfo, 0);
    ReturnSetInfo *rsinfo = reinterpret_cast<ReturnSetInfo *>(fcinfo->resultinfo);
    MemoryContext outer = CurrentMemoryContext;

    idem::pg::SavedUser su;
    idem::pg::enter(&su);
    idem::pg::saved_plan(&plan_stuck, SQL_STUCK, 1, STUCK_TYPES, 0);
    uint64 n = idem::pg::exec(plan_stuck, &older_than, nullptr, true, 0);
    for (uint64 r = 0; r < n; r++) {
        Datum values[STUCK_NCOLS];
        bool nulls[STUCK_NCOLS];
        for (int i = 0; i < STUCK_NCOLS; i++)
            values[i] = idem::pg::col(r, i + 1, &nulls[i]);
        if (filter && !idem::pg::tenants::scope_permitted(values[0], user))
            continue;
        MemoryContext old = MemoryContextSwitchTo(outer);
        tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
        MemoryContextSwitchTo(old);
    }
    idem::pg::leave(&su);
    return (Datum)0;
}
