// SPI helpers shared by the SQL functions: saved plans, running as the extension owner, and the
// result row type.
#pragma once

#include "pg_compat.hpp"
#include "pg_cpp.hpp"

extern "C" {
#include "executor/spi.h"
}

namespace idem::pg {

// Prepares sql once per backend and keeps the plan (SPI_prepare + SPI_keepplan). Must be
// called while connected to SPI. The text must be a constant with every name schema-qualified.
// An error while preparing is raised without the statement text (as for exec).
// cursor_options: CURSOR_OPT_GENERIC_PLAN by default, one plan for every execution: the plan
// cache would otherwise keep choosing custom plans for statements whose parameters fold into
// cheaper-looking estimates (a LIMIT $n; timestamp arithmetic on $n), and plan them anew on
// every call (idem_inbox_done and idem_inbox_next did). 0 lets the plan cache choose,
// for a statement whose best plan depends on its parameters.
SPIPlanPtr saved_plan(SPIPlanPtr *slot, const char *sql, int nargs, const Oid *argtypes,
                      int cursor_options = CURSOR_OPT_GENERIC_PLAN);

// Schema "idempotency"; raises 3F000 (with a hint) when the extension is not installed here.
Oid extension_schema();

// The role that owns schema "idempotency" (the extension's owner), cached per backend.
Oid extension_owner();

// The caller's user and security context, saved while a function runs as the owner.
// The search path is pinned meanwhile (compat::pin_search_path): pg_catalog, not the caller's.
struct SavedUser {
    Oid userid;
    int sec_context;
    compat::PinnedSearchPath path;
};

// Connects to SPI and switches to the extension owner so that callers need no rights on the
// internal tables, with the search path pinned to pg_catalog: no name in a statement, a plan
// revalidated or an operator's function is resolved in the caller's schemas or pg_temp. An error
// raised before leave() is cleaned up by (sub)transaction abort, which restores the user and the
// SPI stack.
void enter(SavedUser *saved);

// Switches back to the caller and disconnects from SPI.
void leave(const SavedUser *saved);

// Executes a saved plan; values/nulls as for SPI_execute_plan. Returns SPI_processed. An error
// raised inside the statement (a constraint, a trigger, a timeout, a cancel, a deadlock) is
// raised again without the statement's text in its CONTEXT or internal query: that text is the
// extension's, the caller never wrote it. The other context lines stay.
uint64 exec(SPIPlanPtr plan, Datum *values, const char *nulls, bool read_only, long tcount);

// Column accessors for SPI_tuptable->vals[row]; attno is 1-based.
Datum col(uint64 row, int attno, bool *isnull);

// The blessed row type the calling function returns (a composite), cached for the call site.
TupleDesc result_desc(FunctionCallInfo fcinfo);

// The function's result row of values/nulls: by the type cache when the call declares a named
// composite type (cheaper than result_desc for a new call site, as a FROM item gets on every
// execution), else by result_desc.
Datum result_row(FunctionCallInfo fcinfo, Datum *values, bool *nulls);

} // namespace idem::pg
