// Cumulative counters in shared memory (the pg_stat_statements pattern).
//
// The counters exist only when the library is in shared_preload_libraries: _PG_init calls
// idem::operations::init(), which then requests the shared memory and installs the startup hook.
// Without preload, count() is a no-op and idem_counters() reports the counters as disabled.
// count() never raises an error and may be called anywhere, also while running as the
// extension owner inside SPI.
#pragma once

namespace idem::operations {

// One counter per event; the order is the order of the rows of idem_counters().
enum Counter {
    ClaimClaimed,       // idem_claim returned claimed
    ClaimReplayed,      // idem_claim returned replayed
    ClaimInProgress,    // idem_claim returned in_progress
    ClaimMismatch,      // idem_claim returned mismatch
    ClaimReclaimed,     // idem_claim returned reclaimed (a takeover of an expired lease)
    RefusedFenced,      // complete/fail/heartbeat refused with IK002 (another attempt owns the key)
    RefusedFinished,    // complete/fail/heartbeat refused with IK003 (already finished)
    InboxDuplicate,     // an inbox event was received again by the same consumer
    InboxRetried,       // idem_inbox_fail queued a leased event again (after a backoff)
    InboxDead,          // an inbox event became failed (dead): a terminal failure, no attempt left
    OutboxEmitted,      // idem_outbox_emit wrote an event
    OutboxDeduplicated, // idem_outbox_emit found the kept event of its dedup_key
    OutboxDone,         // idem_outbox_done
    OutboxRetried,      // idem_outbox_fail queued the event again (after a backoff)
    OutboxDead,         // an outbox event became dead: a terminal failure, no attempt left
    NumCounters
};

// Installs the shared-memory hooks when called from _PG_init during
// shared_preload_libraries processing; does nothing otherwise.
void init();

// Adds one to counter c (atomically); a no-op when the counters are disabled.
void count(Counter c);
// Adds n to counter c (a batch).
void count(Counter c, unsigned long long n);

// Counts an idem_claim outcome by its name ("claimed", "replayed", ...).
void count_claim(const char *outcome);

// Counts an inbox receive outcome (only "duplicate" has a counter).
void count_inbox(const char *outcome);

} // namespace idem::operations
