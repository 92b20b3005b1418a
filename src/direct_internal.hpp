// What src/direct_access.cpp (the insert) and src/direct_update.cpp (the update) share: opening
// an extension table for a direct write, the check that it is still the install script's, and
// the primary key's scan keys and IndexInfo. Not for other files: they use direct_access.hpp.
#pragma once

#include "direct_access.hpp"

extern "C" {
#include "access/skey.h"
#include "nodes/execnodes.h"
#include "utils/rel.h"
}

namespace idem::pg::direct::internal {

// Raises the error of a call that finds the extension's table gone (3F000 or 42P01, never XX000).
[[noreturn]] void table_missing(const char *relname);

// With rel open and locked: true when the table is the one relid names, has the shape's
// definition and is no Citus table; false: the caller takes the SQL path.
bool usable(Table *t, Relation rel, Oid relid);

// A direct write's start: read-only transaction, parallel mode and recovery refused (25006,
// naming caller), the command counter advanced, the table opened with RowExclusiveLock and
// checked by usable(); nullptr (the table closed again) when the caller must take the SQL path.
Relation open_for_write(Table *t, const char *caller);

// The IndexInfo of index i of t (0: the primary key), built once per resolution of the table.
IndexInfo *index_info(Table &t, int i, Relation ix);

// The scan keys of the primary key's equality on key (its values in index column order).
void key_scan_keys(Relation pk, const IndexInfo *info, const Datum *key, ScanKeyData *keys);

} // namespace idem::pg::direct::internal
