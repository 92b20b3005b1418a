// The leased queues' shared rules (src/leased_queue.hpp): fencing token, attempt budget, retry
// with backoff, and the refusal of a stale or finished attempt.
#include "leased_queue.hpp"
#include "arguments.hpp"
#include "sqlstates.hpp"
#include "counters.hpp"
#include "settings.hpp"
#include "spi_util.hpp"

#include "lease.hpp"

extern "C" {
#include "common/pg_prng.h"
#include "catalog/pg_type_d.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/lsyscache.h"
#include "utils/tuplestore.h"
}

namespace idem::pg::queue {

// A positive attempt argument (the fencing token the queue's next function returned).
int32 attempt_arg(FunctionCallInfo fcinfo, int argno, const Names &q) {
    require_arg(fcinfo, argno, "attempt");
    int32 attempt = PG_GETARG_INT32(argno);
    if (attempt <= 0)
        ereport(ERROR,
                (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("attempt must be positive"),
                 errdetail("attempt is the fencing token %s returned (1, 2, ...).", q.next)));
    return attempt;
}

// A batch is at most 10,000 events: one statement's row-address array and result.
int32 batch_arg(FunctionCallInfo fcinfo, int argno, int32 default_size) {
    constexpr int32 max_batch = 10000;
    int32 batch = PG_ARGISNULL(argno) ? default_size : PG_GETARG_INT32(argno);
    if (batch < 1 || batch > max_batch)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("batch_size must be between 1 and %d", max_batch)));
    return batch;
}

// The argument, or the setting when it is NULL (or there is no argument).
int32 max_attempts_arg(FunctionCallInfo fcinfo, int argno) {
    if (argno < 0 || PG_ARGISNULL(argno))
        return idem::settings::max_attempts();
    int32 n = PG_GETARG_INT32(argno);
    if (n < 1)
        ereport(ERROR,
                (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("max_attempts must be positive"),
                 errhint("Pass NULL for idempotency.max_attempts (0 there: no limit).")));
    return n;
}

// Retry or dead; a retry waits base * 2^(attempts - 1) (capped, jittered) from now.
Retry decide_retry(bool retryable, int32 attempts, int32 max_attempts, TimestampTz now) {
    Retry r{IDEM_NOTHROW(idem::retry_allowed(retryable, attempts, max_attempts)), now};
    if (!r.retry)
        return r;
    int64 base = static_cast<int64>(idem::settings::retry_backoff_base_s()) * USECS_PER_SEC;
    int64 cap = static_cast<int64>(idem::settings::retry_backoff_max_s()) * USECS_PER_SEC;
    uint64 random = pg_prng_uint64(&pg_global_prng_state);
    int64 delay = IDEM_NOTHROW(idem::retry_delay_usec(attempts, base, cap, random));
    r.available = call_cpp([&] { return idem::add_usec(now, delay); });
    return r;
}

// IK002 or IK003, worded for the queue.
void refuse(const Names &q, Found found, const char *status, int32 current, int32 attempt,
            const char *action) {
    if (found == Found::Leased && current == attempt)
        elog(ERROR, "%s of the owning attempt changed concurrently", q.event);
    if (found == Found::Finished)
        ereport(ERROR, (errcode(IK_FINISHED), errmsg("the event is already %s", status),
                        errdetail("Attempt %d finished it.", current)));
    ereport(ERROR,
            (errcode(IK_FENCED), errmsg("attempt %d no longer owns this event", attempt),
             found == Found::Leased && attempt > current
                 ? errdetail("Attempt %d was never handed out: the current attempt is %d.", attempt,
                             current)
             : found == Found::Leased
                 ? errdetail("The current attempt is %d: the lease expired and another worker "
                             "took the event.",
                             current)
             : current == 0
                 ? errdetail("The event is queued and was never taken by %s.", q.next)
                 : errdetail("The event is queued again after attempt %d failed.", current),
             errhint("Do not %s it; roll back this attempt's effects.", action)));
    pg_unreachable();
}

// Again for the places of the rows that turned dead; a new pass sees the rows leased before.
void lease_batch(SPIPlanPtr plan, Datum *values, int batch_param, int64 batch, int ncols,
                 char leased, int dead_counter, ReturnSetInfo *rsinfo) {
    int64 left = batch;
    for (;;) {
        values[batch_param] = Int64GetDatum(left);
        uint64 n = exec(plan, values, nullptr, false, 0);
        uint64 dead = 0;
        for (uint64 r = 0; r < n; r++) {
            bool isnull;
            if (*VARDATA_ANY(DatumGetTextPP(col(r, ncols + 1, &isnull))) != leased) {
                idem::operations::count(static_cast<idem::operations::Counter>(dead_counter));
                dead++;
                continue;
            }
            Datum row[32];
            bool nulls[32];
            Assert(ncols <= 32);
            for (int c = 0; c < ncols; c++)
                row[c] = col(r, c + 1, &nulls[c]);
            // tuplestore_putvalues copies the row into the tuplestore's own memory
            tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, row, nulls);
            left--;
        }
        if (dead == 0 || left == 0)
            return;
    }
}

// The elements of one array argument of a batch (22004 for a null element, 22023 for more than
// one dimension).
int array_arg(FunctionCallInfo fcinfo, int argno, const char *name, Oid type, Datum **elems) {
    require_arg(fcinfo, argno, name);
    ArrayType *arr = PG_GETARG_ARRAYTYPE_P(argno);
    if (ARR_NDIM(arr) > 1)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("%s must be a one-dimensional array", name)));
    int16 len;
    bool byval;
    char align;
    get_typlenbyvalalign(type, &len, &byval, &align);
    bool *nulls;
    int n;
    deconstruct_array(arr, type, len, byval, align, elems, &nulls, &n);
    for (int i = 0; i < n; i++)
        if (nulls[i])
            ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
                            errmsg("%s must not contain null", name),
                            errdetail("Element %d is null.", i + 1)));
    return n;
}

// Events and their attempts, checked alike for every batch function.
int batch_arrays(FunctionCallInfo fcinfo, int ids_argno, Oid id_type, Datum **ids,
                 int32 **attempts) {
    constexpr int max_batch = 10000;
    Datum *a;
    int n = array_arg(fcinfo, ids_argno, "event_ids", id_type, ids);
    int m = array_arg(fcinfo, ids_argno + 1, "attempts", INT4OID, &a);
    if (n != m)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("event_ids and attempts must have the same length"),
                        errdetail("event_ids has %d elements, attempts %d.", n, m)));
    if (n > max_batch)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("a batch holds at most %d events", max_batch)));
    *attempts = static_cast<int32 *>(palloc(sizeof(int32) * (n > 0 ? n : 1)));
    for (int i = 0; i < n; i++) {
        (*attempts)[i] = DatumGetInt32(a[i]);
        if ((*attempts)[i] <= 0)
            ereport(ERROR,
                    (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("attempt must be positive"),
                     errdetail("Element %d of attempts is %d.", i + 1, (*attempts)[i])));
    }
    return n;
}

// IK001.
void not_found(const Names &q, const char *detail) {
    ereport(ERROR,
            (errcode(IK_NOT_FOUND), errmsg("%s not found", q.event), errdetail("%s", detail)));
    pg_unreachable();
}

} // namespace idem::pg::queue
