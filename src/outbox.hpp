// What the outbox's files share (src/outbox.cpp: emitting; src/outbox_next.cpp: the relay's
// pick; src/outbox_queue.cpp and src/outbox_batch.cpp: finishing).
#pragma once

#include "leased_queue.hpp"

namespace idem::pg::outbox {

// Limits on caller-supplied values (bytes); topic + dedup_key must fit a btree index entry.
constexpr size_t MAX_TOPIC = 255;
constexpr size_t MAX_KEY = 1024;

// The table's life stage, which its partial indexes read (src/sql/idempotency.sql): expires_at
// is NULL while an event is pending or leased, its retention when done, infinity when dead. A
// lease (pending <-> leased) changes no indexed column, so its new row version is a HOT one.
#define OUTBOX_DEAD_EXPIRES "'infinity'::pg_catalog.timestamptz"

// How the outbox names things in the leased queues' messages.
extern const queue::Names NAMES;

// True when idempotency.outbox is a Citus table (distributed by idem_distribute()).
bool citus_outbox();

// idem_outbox_done of one event without refusals, as the extension owner (between enter and
// leave): true when the event was leased under attempt and is now done, false otherwise (also
// when no shard has it). The batch form on Citus (src/outbox_batch.cpp) runs it per event.
bool done_one(Datum id, int32 attempt, bool has_topic, Datum topic, TimestampTz now,
              TimestampTz expires);

// A failed delivery, as idem_outbox_fail records it.
struct Failure {
    bool retryable;
    bool error_null;
    Datum error; // text, when not error_null
    int32 max_attempts;
    TimestampTz now;
};
// idem_outbox_fail of one event, as the extension owner: the row read and locked, the retry
// decided (backoff from the event's attempts since its last requeue), the row updated; returns
// "pending" or "dead". When attempt does not own the event (or there is no such event): raises
// IK001 / IK002 / IK003 when raise, else returns nullptr and changes nothing.
const char *fail_one(const Failure &f, Datum id, int32 attempt, bool has_topic, Datum topic,
                     bool raise);

} // namespace idem::pg::outbox
