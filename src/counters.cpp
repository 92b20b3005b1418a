// Cumulative counters in shared memory and their SQL functions: idem_counters(),
// idem_counters_enabled(), idem_stats_reset().
#include "pg_cpp.hpp"
#include "counters.hpp"

extern "C" {
#include "funcapi.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/timestamp.h"
}

namespace {

// The shared state: one atomic per counter and the time of the last reset.
struct SharedCounters {
    pg_atomic_uint64 value[idem::operations::NumCounters];
    pg_atomic_uint64 reset_at; // TimestampTz of the creation or the last reset
};

// Names of the counters as shown by idem_counters(), in enum order.
const char *const counter_names[idem::operations::NumCounters] = {
    "claimed",       "replayed",       "in_progress",      "mismatch",
    "reclaimed",     "refused_fenced", "refused_finished", "inbox_duplicate",
    "inbox_retried", "inbox_dead",     "outbox_emitted",   "outbox_deduplicated",
    "outbox_done",   "outbox_retried", "outbox_dead"};

SharedCounters *shared = nullptr;
shmem_request_hook_type prev_shmem_request_hook = nullptr;
shmem_startup_hook_type prev_shmem_startup_hook = nullptr;

// Reserves the shared memory (postmaster, while shared_preload_libraries load).
void stats_shmem_request() {
    if (prev_shmem_request_hook)
        prev_shmem_request_hook();
    RequestAddinShmemSpace(MAXALIGN(sizeof(SharedCounters)));
}

// Creates (or, in an EXEC_BACKEND child, attaches to) the shared counters.
void stats_shmem_startup() {
    if (prev_shmem_startup_hook)
        prev_shmem_startup_hook();
    LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
    bool found;
    auto *s = static_cast<SharedCounters *>(
        ShmemInitStruct("idempotency counters", sizeof(SharedCounters), &found));
    if (!found) {
        for (auto &v : s->value)
            pg_atomic_init_u64(&v, 0);
        pg_atomic_init_u64(&s->reset_at, static_cast<uint64>(GetCurrentTimestamp()));
    }
    LWLockRelease(AddinShmemInitLock);
    shared = s;
}

} // namespace

namespace idem::operations {

// Installs the hooks only while shared_preload_libraries are being loaded.
void init() {
    if (!process_shared_preload_libraries_in_progress)
        return;
    prev_shmem_request_hook = shmem_request_hook;
    shmem_request_hook = stats_shmem_request;
    prev_shmem_startup_hook = shmem_startup_hook;
    shmem_startup_hook = stats_shmem_startup;
}

// Atomic increment; nothing to do without the shared memory.
void count(Counter c) {
    if (shared != nullptr && c >= 0 && c < NumCounters)
        pg_atomic_fetch_add_u64(&shared->value[c], 1);
}

void count(Counter c, unsigned long long n) {
    if (shared != nullptr && c >= 0 && c < NumCounters && n > 0)
        pg_atomic_fetch_add_u64(&shared->value[c], n);
}

// Maps the outcome name to its counter (the names are the counter names).
void count_claim(const char *outcome) {
    if (shared == nullptr || outcome == nullptr)
        return;
    for (int i = ClaimClaimed; i <= ClaimReclaimed; i++)
        if (strcmp(outcome, counter_names[i]) == 0)
            return count(static_cast<Counter>(i));
}

// Counts the duplicates among inbox receive outcomes.
void count_inbox(const char *outcome) {
    if (outcome != nullptr && strcmp(outcome, "duplicate") == 0)
        count(InboxDuplicate);
}

} // namespace idem::operations

// idem_counters(): one row (counter, value, stats_reset) per counter; value and stats_reset
// are NULL when the library is not preloaded.
IDEM_PG_FUNCTION(idem_counters) {
    InitMaterializedSRF(fcinfo, 0);
    ReturnSetInfo *rsinfo = reinterpret_cast<ReturnSetInfo *>(fcinfo->resultinfo);
    TimestampTz reset_at =
        shared ? static_cast<TimestampTz>(pg_atomic_read_u64(&shared->reset_at)) : 0;
    for (int i = 0; i < idem::operations::NumCounters; i++) {
        Datum values[3];
        bool nulls[3] = {false, shared == nullptr, shared == nullptr};
        values[0] = CStringGetTextDatum(counter_names[i]);
        values[1] = shared
                        ? Int64GetDatum(static_cast<int64>(pg_atomic_read_u64(&shared->value[i])))
                        : (Datum)0;
        values[2] = TimestampTzGetDatum(reset_at);
        tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
    }
    return (Datum)0;
}

// idem_counters_enabled(): true when the counters live in shared memory (library preloaded).
IDEM_PG_FUNCTION(idem_counters_enabled) {
    PG_RETURN_BOOL(shared != nullptr);
}

// idem_stats_reset(): sets every counter to zero and returns the reset time; error 55000
// when the counters are disabled.
IDEM_PG_FUNCTION(idem_stats_reset) {
    if (shared == nullptr)
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("idempotency counters are disabled"),
                        errhint("Add idempotency to shared_preload_libraries and restart the "
                                "server to keep counters.")));
    TimestampTz now = GetCurrentTimestamp();
    for (auto &v : shared->value)
        pg_atomic_write_u64(&v, 0);
    pg_atomic_write_u64(&shared->reset_at, static_cast<uint64>(now));
    PG_RETURN_TIMESTAMPTZ(now);
}
