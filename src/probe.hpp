// Direct primary-key probe of idempotency.records: no SPI and no executor. idem_claim uses it to
// answer a replay of a finished record before it tries an insert.
#pragma once

#include "pg_cpp.hpp"

extern "C" {
#include "datatype/timestamp.h"
}

namespace idem::pg {

// A record as read by probe_record; varlena values are copies in the caller's memory context.
struct ProbedRecord {
    char status; // 'p' processing, 'c' completed, 'f' failed
    bool retryable;
    int32 attempt;
    bool fingerprint_null, resource_id_null, response_null, response_status_null, lease_null;
    Datum fingerprint, resource_id, response;
    int32 response_status;
    TimestampTz lease_expires_at, expires_at;
};

// Reads the row of (scope, key) that the active snapshot sees, through the primary-key index.
// Returns false when there is none. Takes AccessShareLock on the table and index, like a SELECT.
bool probe_record(Datum scope, Datum key, ProbedRecord *out);

} // namespace idem::pg
