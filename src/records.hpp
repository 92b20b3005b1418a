// What the Idempotency-Key record functions share: the record columns as the SQL statements
// read them, the arguments every function takes, and the core's checks and arithmetic run
// through the boundary (src/records.cpp; the claim is src/records_claim.cpp).
#pragma once

#include "pg_cpp.hpp"
#include "lease.hpp"
#include "spi_util.hpp"

extern "C" {
#include "catalog/pg_type.h"
#include "datatype/timestamp.h"
}

// idem_claim's entry point (src/records_claim.cpp): the custom scan calls claim_row in its place.
extern "C" Datum idem_claim(PG_FUNCTION_ARGS);
// idem_complete's and idem_fail's (src/records.cpp), which idem_http_end and idem_http_release
// call with arguments of their own (src/http_contract_end.cpp).
extern "C" Datum idem_complete(PG_FUNCTION_ARGS);
extern "C" Datum idem_fail(PG_FUNCTION_ARGS);

namespace idem::pg::records {

// Columns read back from a record, in the order of RECORD_COLUMNS. Each is cast to the type
// the C code reads it as (a no-op for the extension's own table definition), so that a table
// altered by hand gives an error or a converted value, never a misread Datum.
#define RECORD_COLUMNS                                                                             \
    "r.status::pg_catalog.text, r.retryable::pg_catalog.bool, r.fingerprint::pg_catalog.bytea, "   \
    "r.attempt::pg_catalog.int4, r.resource_id::pg_catalog.text, r.response::pg_catalog.jsonb, "   \
    "r.response_status::pg_catalog.int4, r.lease_expires_at::pg_catalog.timestamptz, "             \
    "r.expires_at::pg_catalog.timestamptz, r.created_at::pg_catalog.timestamptz, "                 \
    "r.updated_at::pg_catalog.timestamptz, r.response_body::pg_catalog.bytea, "                    \
    "r.response_headers::pg_catalog.jsonb"
enum RecordCol {
    C_STATUS = 1,
    C_RETRYABLE,
    C_FINGERPRINT,
    C_ATTEMPT,
    C_RESOURCE_ID,
    C_RESPONSE,
    C_RESPONSE_STATUS,
    C_LEASE_EXPIRES,
    C_EXPIRES,
    C_CREATED,
    C_UPDATED,
    C_RESPONSE_BODY,
    C_RESPONSE_HEADERS,
    C_NCOLS = C_RESPONSE_HEADERS
};
#define WHERE_KEY " WHERE r.scope OPERATOR(pg_catalog.=) $1 AND r.key OPERATOR(pg_catalog.=) $2"

// Parameter types of a statement on (scope, key).
inline const Oid KEY_TYPES[] = {TEXTOID, TEXTOID};

// The saved SELECT of a record's RECORD_COLUMNS by ($1 scope, $2 key), without a lock (lookers
// never block the owner's complete or heartbeat). Call while connected to SPI.
SPIPlanPtr plan_get();

// Validated scope and key arguments (arguments 0 and 1 of every function here).
void scope_key_args(FunctionCallInfo fcinfo, Datum *scope, Datum *key);

// A positive attempt argument (the fencing token handed back by the caller).
int32 attempt_arg(FunctionCallInfo fcinfo, int argno);

// Lease and expiry of a claim (or heartbeat) at now; 22023 for a bad lease or ttl.
idem::ClaimTimes claim_times(TimestampTz now, int64 lease_us, int64 ttl_us);

// Row `row` of the SPI result (RECORD_COLUMNS), as the core sees it.
idem::RecordState read_state(uint64 row = 0);

// Copies column attno of SPI result row `row` into memory context cxt.
Datum copy_col(MemoryContext cxt, int attno, int16 typlen, bool byval, bool *isnull,
               uint64 row = 0);

// NULL-aware equality of two bytea values.
bool bytea_equal(bool a_null, Datum a, bool b_null, Datum b);

// The columns of idem_claim_result.
constexpr int CLAIM_COLUMNS = 9;

// One claim of idem_claim's arguments in fcinfo: the result row's columns into values and nulls,
// allocated in the current memory context (src/records_claim.cpp). Runs inside a guard.
void claim_row(FunctionCallInfo fcinfo, Datum *values, bool *nulls);

// Installs idem_claim's custom scan in the planner (src/records_claim_scan.cpp); from _PG_init
// (src/module.cpp).
void claim_scan_init();

} // namespace idem::pg::records
