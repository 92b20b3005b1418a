// Purging: idem_purge_batch, the bounded step that idem_purge and idem_purge_loop
// (src/sql/idempotency.sql, section "Lifecycle") repeat.
//
// A batch walks a table in physical order with a TID range scan that starts after the previous
// batch's last row, so a full pass reads the table once and needs no index on expires_at (such an
// index would cost every claim an index insert and turn every idem_complete into a non-HOT update,
// see README "Lifecycle"). Rows are locked FOR UPDATE SKIP LOCKED: a batch never waits for a row
// another session holds, and several purges at once delete disjoint rows.
#include "pg_cpp.hpp"
#include "direct_access.hpp"
#include "spi_util.hpp"

extern "C" {
#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "nodes/makefuncs.h"
#include "storage/itemptr.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"
}

namespace {

using namespace idem::pg;

// The conditions below are idem_purge_shards' too (the install script, for Citus shards);
// test/drift holds the two equal.

// Deletes at most $3 expired, finished records after ctid $1. $2 is now; with $4 (include_stuck)
// also processing records past their TTL whose lease ended before $5. A processing record with a
// live lease is never expired (expires_at >= lease_expires_at), and the lease test repeats it.
const char *const SQL_PURGE_RECORDS =
    "WITH d AS (DELETE FROM idempotency.records AS r WHERE r.ctid OPERATOR(pg_catalog.=) ANY "
    "(ARRAY(SELECT s.ctid FROM idempotency.records AS s "
    "WHERE s.ctid OPERATOR(pg_catalog.>) $1 AND s.expires_at OPERATOR(pg_catalog.<) $2 "
    "AND (s.status OPERATOR(pg_catalog.<>) 'processing' OR ($4 AND s.lease_expires_at "
    "OPERATOR(pg_catalog.<) $5 AND s.lease_expires_at OPERATOR(pg_catalog.<) $2)) "
    "LIMIT $3 FOR UPDATE SKIP LOCKED)) RETURNING r.ctid) "
    "SELECT pg_catalog.count(*)::integer, pg_catalog.max(d.ctid) FROM d";

// Inbox entries past their retention that are settled: done, failed (dead-lettered) or stale
// ($4 and $5 are unused: every target takes the same parameters).
// Queued (received) and processing events are never deleted, whatever their age: an event that
// was never handled is a problem to report (idem_inbox_* statistics), not to drop silently.
const char *const SQL_PURGE_INBOX =
    "WITH d AS (DELETE FROM idempotency.inbox AS r WHERE r.ctid OPERATOR(pg_catalog.=) ANY "
    "(ARRAY(SELECT s.ctid FROM idempotency.inbox AS s "
    "WHERE s.ctid OPERATOR(pg_catalog.>) $1 AND s.expires_at OPERATOR(pg_catalog.<) $2 "
    "AND s.status OPERATOR(pg_catalog.=) ANY ('{done,failed,stale}'::pg_catalog.text[]) "
    "LIMIT $3 FOR UPDATE SKIP LOCKED)) RETURNING r.ctid) "
    "SELECT pg_catalog.count(*)::integer, pg_catalog.max(d.ctid) FROM d";

// Done outbox events past their retention (idempotency.outbox_ttl after done). Pending, leased
// and dead events are never deleted: a dead event waits for idem_outbox_requeue or a DELETE.
const char *const SQL_PURGE_OUTBOX =
    "WITH d AS (DELETE FROM idempotency.outbox AS r WHERE r.ctid OPERATOR(pg_catalog.=) ANY "
    "(ARRAY(SELECT s.ctid FROM idempotency.outbox AS s "
    "WHERE s.ctid OPERATOR(pg_catalog.>) $1 AND s.expires_at OPERATOR(pg_catalog.<) $2 "
    "AND s.status OPERATOR(pg_catalog.=) 'done' "
    "LIMIT $3 FOR UPDATE SKIP LOCKED)) RETURNING r.ctid) "
    "SELECT pg_catalog.count(*)::integer, pg_catalog.max(d.ctid) FROM d";

const Oid PURGE_TYPES[] = {TIDOID, TIMESTAMPTZOID, INT4OID, BOOLOID, TIMESTAMPTZOID};

// The purgeable tables. Adding one is one more entry (and its plan text).
struct Target {
    const char *name;  // the target argument of idem_purge_batch
    const char *table; // relation name in schema idempotency
    const char *sql;
    SPIPlanPtr plan;
};
Target targets[] = {
    {"records", "records", SQL_PURGE_RECORDS, nullptr},
    {"inbox", "inbox", SQL_PURGE_INBOX, nullptr},
    {"outbox", "outbox", SQL_PURGE_OUTBOX, nullptr},
};

// True for an interval shorter than zero (as PostgreSQL compares intervals).
bool interval_negative(Interval *iv) {
    Interval zero{};
    return DatumGetBool(
        DirectFunctionCall2(interval_lt, PointerGetDatum(iv), PointerGetDatum(&zero)));
}

// The target named by the text argument, or a 22023 error.
Target *find_target(text *name) {
    char *s = text_to_cstring(name);
    for (Target &t : targets)
        if (strcmp(t.name, s) == 0)
            return &t;
    ereport(ERROR,
            (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("unknown purge target \"%s\"", s),
             errhint("The targets are \"records\", \"inbox\" and \"outbox\".")));
    pg_unreachable();
}

} // namespace

// idem_purge_batch(target, batch_size, after, include_stuck, stuck_older_than): one bounded,
// non-waiting delete of expired rows of one table; returns (deleted, last) where last is the ctid
// to continue after, NULL when the scan reached the end of the table.
IDEM_PG_FUNCTION(idem_purge_batch) {
    static const char *const names[] = {"target", "batch_size", "after", "include_stuck",
                                        "stuck_older_than"};
    for (int i = 0; i < 5; i++)
        if (PG_ARGISNULL(i))
            ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
                            errmsg("%s must not be null", names[i])));
    Target *t = find_target(PG_GETARG_TEXT_PP(0));
    int32 batch_size = PG_GETARG_INT32(1);
    if (batch_size < 1)
        ereport(ERROR,
                (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("batch_size must be positive")));
    ItemPointer after = reinterpret_cast<ItemPointer>(PG_GETARG_POINTER(2));
    bool include_stuck = PG_GETARG_BOOL(3);
    Interval *older = PG_GETARG_INTERVAL_P(4);
    if (interval_negative(older))
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("stuck_older_than must not be negative")));
    TimestampTz now = GetCurrentTimestamp();
    TimestampTz stuck_before = DatumGetTimestampTz(DirectFunctionCall2(
        timestamptz_mi_interval, TimestampTzGetDatum(now), PointerGetDatum(older)));

    TupleDesc desc = idem::pg::result_desc(fcinfo);
    Datum out[2] = {Int32GetDatum(0), (Datum)0};
    bool out_null[2] = {false, true};

    // A table that does not exist in this version of the schema has nothing to purge.
    Oid relid = get_relname_relid(t->table, get_namespace_oid("idempotency", false));
    // Citus cannot run the batch's FOR UPDATE SKIP LOCKED on a distributed table: say what to do.
    if (OidIsValid(relid) && idem::pg::direct::citus_table(relid))
        ereport(
            ERROR,
            (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
             errmsg("idem_purge_batch cannot purge idempotency.%s: Citus distributes it", t->table),
             errdetail("Citus does not run a distributed DELETE with FOR UPDATE SKIP "
                       "LOCKED."),
             errhint("On the Citus coordinator, CALL idempotency.idem_purge_loop() purges the "
                     "shards of every worker.")));
    if (OidIsValid(relid)) {
        MemoryContext outer = CurrentMemoryContext;
        idem::pg::SavedUser su;
        idem::pg::enter(&su);
        saved_plan(&t->plan, t->sql, 5, PURGE_TYPES, 0); // the batch size decides the plan
        Datum v[5] = {PointerGetDatum(after), TimestampTzGetDatum(now), Int32GetDatum(batch_size),
                      BoolGetDatum(include_stuck), TimestampTzGetDatum(stuck_before)};
        exec(t->plan, v, nullptr, false, 1);
        bool isnull;
        int32 deleted = DatumGetInt32(col(0, 1, &isnull));
        out[0] = Int32GetDatum(deleted);
        Datum last = col(0, 2, &isnull);
        // Fewer rows than asked for: the scan reached the end of the table.
        if (!isnull && deleted >= batch_size) {
            ItemPointer copy = static_cast<ItemPointer>(MemoryContextAlloc(outer, sizeof(*copy)));
            ItemPointerCopy(reinterpret_cast<ItemPointer>(DatumGetPointer(last)), copy);
            out[1] = PointerGetDatum(copy);
            out_null[1] = false;
        }
        idem::pg::leave(&su);
    }
    HeapTuple tuple = heap_form_tuple(desc, out, out_null);
    PG_RETURN_DATUM(HeapTupleGetDatum(tuple));
}
