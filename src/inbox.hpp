// What the inbox functions share (src/inbox.cpp: receiving; src/inbox_queue.cpp: the leased
// queue): the limits on caller-supplied values, the row reads and the ordering guard.
#pragma once

#include "pg_cpp.hpp"
#include "spi_util.hpp"

extern "C" {
#include "catalog/pg_type.h"
#include "datatype/timestamp.h"
}

namespace idem::pg::inbox {

// Limits on caller-supplied values (bytes); consumer + event id must fit a btree index entry.
constexpr size_t MAX_CONSUMER = 255;
constexpr size_t MAX_EVENT_ID = 1024;

#define WHERE_EVENT                                                                                \
    " WHERE i.consumer OPERATOR(pg_catalog.=) $1 AND i.event_id OPERATOR(pg_catalog.=) $2"

// The columns of an event row as SQL_LOCK (src/inbox.cpp) and SQL_GET (src/inbox_queue.cpp)
// read them back.
#define EVENT_COLUMNS "i.status, i.payload_hash, i.expires_at, i.attempt"
enum EventCol { L_STATUS = 1, L_HASH, L_EXPIRES, L_ATTEMPT };

// Parameter types of a statement on (consumer, event_id).
inline const Oid KEY_TYPES[] = {TEXTOID, TEXTOID};

// A detoasted text/bytea datum whose length is checked: empty (unless allowed) → 22023, longer
// than max → 22001.
Datum checked_varlena(Datum d, const char *name, size_t max, bool allow_empty);

// now + usec, or 22008.
TimestampTz add_usec(TimestampTz now, int64 usec);

// A positive interval argument in microseconds, or the setting (seconds) when NULL; setting
// names it in the hint.
int64 positive_interval_arg(FunctionCallInfo fcinfo, int argno, int default_s, const char *name,
                            const char *setting);
// The same with the setting read (idem::settings::inbox_ttl_s, ...) only when the argument is NULL.
inline int64 positive_interval_arg(FunctionCallInfo fcinfo, int argno, int (*default_s)(),
                                   const char *name, const char *setting) {
    return positive_interval_arg(fcinfo, argno, PG_ARGISNULL(argno) ? default_s() : 0, name,
                                 setting);
}

// The first character of a status text column of the current SPI row (received, processing,
// done, failed, stale: the first letters differ).
char status_char(int attno);

// Advances the ordering guard of (consumer, entity_key) to seq; false when the event is stale.
bool entity_apply(Datum consumer, Datum entity_key, int64 seq, Datum event_id, TimestampTz now);

// True when idempotency.inbox is a Citus table (src/direct_access.hpp, citus_table).
bool inbox_on_citus();

// Marks the event stale (a newer event of its entity was applied).
void mark_stale(Datum consumer, Datum event_id, TimestampTz now);

} // namespace idem::pg::inbox
