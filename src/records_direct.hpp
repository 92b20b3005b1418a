// Direct access (src/direct_access.hpp) to idempotency.records: the claim's insert of a new key
// (INSERT ... ON CONFLICT DO NOTHING) and the read of an existing record. idem_claim uses it
// under idempotency.direct_access (on by default), and so do idem_complete and idem_fail for
// their update; every other path that changes an existing record goes through saved SPI plans.
#pragma once

#include "direct_access.hpp"

extern "C" {
#include "datatype/timestamp.h"
#include "storage/itemptr.h"
#include "utils/snapshot.h"
}

namespace idem::pg {

// A record as the claim decides on it; varlena values are copies in a given memory context.
struct StoredRecord {
    char status; // 'p' processing, 'c' completed, 'f' failed
    bool retryable;
    int32 attempt;
    bool fingerprint_null, resource_id_null, response_null, response_status_null, lease_null;
    bool body_null, headers_null;
    Datum fingerprint, resource_id, response, body, headers;
    int32 response_status;
    TimestampTz lease_expires_at, expires_at;
};

// The row a new claim inserts: status processing, attempt 1, no result.
struct NewRecord {
    Datum scope, key;
    bool fingerprint_null;
    Datum fingerprint;
    TimestampTz now, lease_expires_at, expires_at;
};

// The result a complete/fail stores, compared with the stored one when it repeats.
struct RecordOutcome {
    const char *status; // "completed" or "failed"
    bool retryable;
    bool rid_null;
    Datum rid;
    bool resp_null;
    Datum resp;
    bool st_null;
    Datum st;
    bool body_null;
    Datum body;
    bool headers_null;
    Datum headers;
};

using direct::InsertResult;

// INSERT ... ON CONFLICT (scope, key) DO NOTHING of rec. Like the statement, it waits for a
// transaction that is inserting or changing the key's record and then decides on the committed
// outcome. When the key exists and read is true (READ COMMITTED), reads the record's latest
// committed version into *out, varlena values copied into cxt: Read; with read false, Exists.
// nowait (idem_claim's wait => false): Busy, without waiting and without reading, while another
// transaction is inserting or changing the key's record. Raises 25006 in a read-only
// transaction or during recovery.
InsertResult insert_new(const NewRecord &rec, bool read, bool nowait, MemoryContext cxt,
                        StoredRecord *out);

// True when another transaction is inserting or changing the record of (scope, key) now, found
// without waiting (idem_claim's wait => false on the SQL path); false when it cannot tell (see
// held_elsewhere).
bool record_held(Datum scope, Datum key);

// UPDATE of idem_complete / idem_fail: (scope, key)'s record, when it is processing under
// attempt, gets o, updated_at now, no lease, and expires_at pushed to now plus its TTL window
// (expires_at - created_at) if that is later. Skipped when the visible record is not processing
// under attempt; Unusable when the SQL statement must decide (see direct::update, and an expiry
// the statement would raise on).
direct::UpdateResult finish_direct(Datum scope, Datum key, int32 attempt, const RecordOutcome &o,
                                   TimestampTz now);

} // namespace idem::pg
