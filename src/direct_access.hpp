// Direct access (idempotency.direct_access): a new row written into one of the extension's own
// tables through the table and index access methods, without SPI or a plan, by the same
// speculative-insertion protocol as the executor's INSERT ... ON CONFLICT (primary key) DO
// NOTHING. idem_claim (src/records_direct.cpp) and idem_inbox_receive (src/inbox.cpp) use it for
// a first write; idem_complete and idem_fail (src/records_direct.cpp) update a record by
// update() (src/direct_update.cpp); every other path that changes a row uses saved SPI plans.
#pragma once

#include "pg_cpp.hpp"

extern "C" {
#include "access/tupdesc.h"
#include "executor/tuptable.h"
#include "nodes/execnodes.h"
#include "storage/itemptr.h"
#include "utils/rel.h"
}

namespace idem::pg::direct {

constexpr int MAX_COLUMNS = 16;
constexpr int MAX_OWN_INDEXES = 2;

// The definition the extension's install script gives a table, as far as a direct write relies
// on it. Columns are listed in the order of the caller's values.
struct TableShape {
    const char *relname;
    int ncolumns;
    const char *const *columns;
    const Oid *types;
    const char *const *own_checks; // CHECK constraints every direct row satisfies by construction
    int n_checks;
    const char *const *own_indexes;    // non-unique indexes besides the primary key, by name
    const char *const *own_index_defs; // and as pg_get_indexdef shows them when installed
    int n_indexes;
    uint32 nullable;  // bit c: a direct row may leave column c NULL, so it must not be NOT NULL
    uint32 defaulted; // bit c: column c may have a default (every direct row sets it)
    // False when own index i has no entry for the row (a partial index whose predicate the row
    // fails, as its definition above says); nullptr: every row has an entry in every index.
    bool (*has_entry)(int i, const Datum *values, const bool *nulls) = nullptr;
    // True: insert first and look the key up only when the insert met it (most rows are new; a
    // row that exists then costs a killed row version and one more index entry per index). False:
    // look up first, as ON CONFLICT does, so that finding a row writes nothing (a replay).
    bool insert_first = false;
};

// One table as resolved in this backend: its OID and column numbers, forgotten when the relcache
// says the table changed (ALTER TABLE, DROP/CREATE EXTENSION, Citus distributing it).
struct Table {
    const TableShape *shape;
    Oid relid = InvalidOid;
    bool all_columns; // every column of the shape exists
    bool citus;       // listed in Citus's pg_dist_partition (see citus_table)
    AttrNumber att[MAX_COLUMNS];
    int plain = -1; // -1 not checked yet, 0 no, 1 yes: the table is what the shape describes
    MemoryContext cxt = nullptr;                // holds infos until the table is resolved again
    IndexInfo *infos[1 + MAX_OWN_INDEXES] = {}; // built once per resolution (read-only after)
    Oid indexes[1 + MAX_OWN_INDEXES] = {}; // the primary key, then the own indexes in shape order
};

enum class InsertResult {
    Inserted, // the row is written
    Read,     // the key has a row, and the reader read it
    Exists,   // the key has a row, not read (no reader, or the reader returned false)
    Busy,     // nowait: another transaction is inserting, changing or deleting the key's row
    Unusable  // the table has triggers, rules, row security or another shape: use SQL instead
};

// Reads the row found for the key: found holds its latest committed version (or this
// transaction's own); false when the reader does not take it.
using ConflictReader = bool (*)(Relation rel, TupleTableSlot *found, void *arg);

// The table resolved (once per backend, again after an invalidation); raises when it is missing.
const Table &resolve(Table *t);

// True when relid is listed in Citus's pg_dist_partition (a distributed, reference or Citus-local
// table, or on a worker the shell of one): its rows live in shards, never in the relation
// itself. False without Citus (no such catalog).
bool citus_table(Oid relid);

// INSERT ... ON CONFLICT (primary key) DO NOTHING of one row (values and nulls in the shape's
// column order). Like the statement, it waits for a transaction that is inserting or changing
// the key's row and then decides on the committed outcome; when the key has a row it calls read
// (when given) with that row's latest committed version. nowait: instead of waiting for such a
// transaction, Busy while it is still in progress (read is not called); only another insert of
// the same key that is between its heap tuple and its index entries is waited for, as briefly
// as that takes. caller names the SQL function in errors (25006 in a read-only transaction or
// during recovery).
InsertResult insert(Table *t, const char *caller, const Datum *values, const bool *nulls,
                    ConflictReader read, void *read_arg, bool nowait = false);

// True when another transaction is inserting, changing or deleting the row of key (the primary
// key's values in index column order) right now, found without waiting for it; false when the
// key has no such row or the table is not read directly (not plain, a Citus table).
bool held_elsewhere(Table *t, const Datum *key);

// What a RowChanger decides on the version of a row the UPDATE's snapshot sees.
enum class Change {
    Skip,  // the row does not meet the statement's condition: nothing is written
    Write, // the new version is in values / nulls
    UseSql // only the SQL statement can decide (it would raise on a value, say)
};

// Decides on found (deformed) and, for Write, fills the new version: every column, in the
// shape's order.
using RowChanger = Change (*)(const TupleTableSlot *found, Datum *values, bool *nulls, void *arg);

enum class UpdateResult {
    Updated, // the new version is written
    Skipped, // no row for the key is visible, or change said Skip
    Unusable // take the SQL path: the table is not plain, change said UseSql, or another
             // transaction changed or deleted the row meanwhile (the SQL statement decides
             // as UPDATE does: on the newer version, or a serialization failure)
};

// UPDATE ... WHERE <primary key> = key AND <change's condition> of one row (key: the primary
// key's values in index column order), in the transaction's snapshot. Only for a shape without
// indexes besides the primary key, whose columns an update never changes. caller names the SQL
// function in errors (25006 in a read-only transaction or during recovery).
UpdateResult update(Table *t, const char *caller, const Datum *key, RowChanger change, void *arg);

} // namespace idem::pg::direct
