// What the two leased queues share (the inbox's queued mode, src/inbox_queue.cpp, and the
// outbox, src/outbox.cpp): the fencing token argument, the refusal of a stale or finished
// attempt (IK001 / IK002 / IK003), the retry decision with its backoff, and the attempt budget.
// Both queues hand an event out with attempt + 1 as its fencing token and a lease; done and fail
// match the leased row by that token only.
#pragma once

#include "pg_cpp.hpp"

extern "C" {
#include "datatype/timestamp.h"
#include "executor/spi.h"
#include "nodes/execnodes.h"
}

namespace idem::pg::queue {

// How one queue names things in its messages.
struct Names {
    const char *event;  // "inbox event", "outbox event"
    const char *next;   // the function that hands events out: "idem_inbox_next"
    const char *queued; // the status of a queued event: "received", "pending"
};

// A positive fencing token (argument argno, named "attempt"), or 22004 / 22023.
int32 attempt_arg(FunctionCallInfo fcinfo, int argno, const Names &q);

// The batch_size argument argno: default when NULL, else 1 .. 10000 (22023).
int32 batch_arg(FunctionCallInfo fcinfo, int argno, int32 default_size);

// The attempt budget: argument argno when given (positive, else 22023), otherwise
// idempotency.max_attempts (0: no limit). argno < 0: the setting only.
int32 max_attempts_arg(FunctionCallInfo fcinfo, int argno);

// What a failed attempt leads to.
struct Retry {
    bool retry;            // queued again (else dead)
    TimestampTz available; // not handed out before (now + backoff), when retry
};
// attempts: handed out since the event was queued or requeued (the one that failed included).
Retry decide_retry(bool retryable, int32 attempts, int32 max_attempts, TimestampTz now);

// The state an event was found in when done or fail matched no leased row with the attempt.
enum class Found { Queued, Leased, Finished };
// Raises IK002 (the attempt no longer owns the event: leased under another attempt, or queued
// again) or IK003 (finished: status names the state, by is the attempt that finished it). An
// event leased under the same attempt cannot be refused: elog ERROR (a concurrent change).
// action ("complete", "fail") goes into the hint.
[[noreturn]] void refuse(const Names &q, Found found, const char *status, int32 current,
                         int32 attempt, const char *action);

// Runs a queue's leasing statement (a saved plan whose parameter batch_param, 0-based, is the
// LIMIT) and puts the leased rows' first ncols columns into the function's result. The statement
// also turns dead the events whose last attempt's lease expired, returning them with a status
// (column ncols + 1) other than leased; those are left out, counted as dead_counter, and the
// statement runs again for the places they took, so that a batch never comes back short while a
// due event waits behind a dead one.
void lease_batch(SPIPlanPtr plan, Datum *values, int batch_param, int64 batch, int ncols,
                 char leased, int dead_counter, ReturnSetInfo *rsinfo);

// The two arrays of a batch done or fail (arguments ids_argno and ids_argno + 1: the events and
// the attempt each was handed out with): not null, one dimension (or empty), the same length, at
// most 10,000 elements, no null element (22004), every attempt positive (22023). Returns the
// count; *ids and *attempts point at palloc'd copies of the elements.
int batch_arrays(FunctionCallInfo fcinfo, int ids_argno, Oid id_type, Datum **ids,
                 int32 **attempts);

// IK001: no such event (detail says which).
[[noreturn]] void not_found(const Names &q, const char *detail);

} // namespace idem::pg::queue
