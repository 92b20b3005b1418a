// Whether a table is a Citus table (direct_access.hpp's citus_table): the direct writes never
// touch one, since its rows live in shards.
#include "direct_access.hpp"

extern "C" {
#include "access/genam.h"
#include "access/table.h"
#include "access/skey.h"
#include "catalog/pg_namespace.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
}

namespace idem::pg::direct {
namespace {

// The OID of pg_catalog.pg_dist_partition (InvalidOid: no Citus here), looked up again after any
// change to pg_class: the name lookup, a catalog cache miss without Citus, was 400
// instructions of every claim and delivery. The invalidation that CREATE EXTENSION
// citus sends is taken with the lock on the table, before citus_table is asked under it.
Oid dist_oid = InvalidOid;
bool dist_known = false;

void pg_class_changed(Datum, int, uint32) {
    dist_known = false;
}

Oid dist_partition() {
    static bool callback_registered = false;
    if (!callback_registered) {
        CacheRegisterSyscacheCallback(RELNAMENSP, pg_class_changed, (Datum)0);
        callback_registered = true;
    }
    if (!dist_known) {
        dist_oid = get_relname_relid("pg_dist_partition", PG_CATALOG_NAMESPACE);
        dist_known = true;
    }
    return dist_oid;
}

} // namespace

// (direct_access.hpp) True when relid is a Citus table: listed in pg_dist_partition, the catalog
// of distributed, reference and Citus-local tables (on a worker it lists the shell tables too).
// Its rows live in shards, and a write to the relation itself would land in the coordinator's
// local copy or in a worker's shell table, where no query on the distributed table sees it.
// Read by a plain catalog scan without Citus's headers or functions; no such catalog, no Citus.
bool citus_table(Oid relid) {
    Oid dist = dist_partition();
    if (!OidIsValid(dist))
        return false;
    AttrNumber att = get_attnum(dist, "logicalrelid");
    if (att == InvalidAttrNumber)
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("pg_catalog.pg_dist_partition has no column logicalrelid"),
                        errdetail("The extension cannot tell whether its tables are Citus "
                                  "tables, so it does not write them directly.")));
    Relation d = table_open(dist, AccessShareLock);
    ScanKeyData key;
    ScanKeyInit(&key, att, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(relid));
    SysScanDesc scan = systable_beginscan(d, InvalidOid, false, nullptr, 1, &key);
    bool found = HeapTupleIsValid(systable_getnext(scan));
    systable_endscan(scan);
    table_close(d, AccessShareLock);
    return found;
}

} // namespace idem::pg::direct
