// Outbox, the relay's pick: idem_outbox_next leases a batch of due events of a topic, per key in
// emit order. Finishing them (done, fail, requeue) is src/outbox_queue.cpp; the leased-queue
// rules shared with the inbox are src/leased_queue.cpp.
//
// An event is handed out only when no earlier event of its key is unfinished, and none is skipped
// for good: every call reads the queue of unfinished events from its start, not from a high-water
// mark, so an event that committed late is still there (the key lock of src/outbox.cpp numbers a
// key's events in commit order). A call examines a bounded stretch of the queue (lease_in_rounds
// below), so that a queue whose events wait behind their keys costs each call the same.
#include "arguments.hpp"
#include "inbox.hpp"
#include "leased_queue.hpp"
#include "counters.hpp"
#include "outbox.hpp"
#include "settings.hpp"
#include "spi_util.hpp"
#include "tenants.hpp"

#include <algorithm>

extern "C" {
#include "catalog/pg_type_d.h"
#include "common/hashfn.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
}

namespace {

using namespace idem::pg;
using namespace idem::pg::outbox;
using idem::pg::inbox::checked_varlena;

// The earlier event p not done: pending, leased or dead (the predicate of the index outbox_key).
#define P_UNFINISHED                                                                               \
    "AND (p.expires_at IS NULL OR p.expires_at OPERATOR(pg_catalog.=) " OUTBOX_DEAD_EXPIRES ") "
// An expired lease that used up the attempt budget ($5 > 0) makes the event dead instead.
#define LEASE_USED_UP                                                                              \
    "(o.status OPERATOR(pg_catalog.=) 'leased' AND $5 OPERATOR(pg_catalog.>) 0 AND o.attempt "     \
    "OPERATOR(pg_catalog.-) o.attempt_base OPERATOR(pg_catalog.>=) $5)"
// An event due: pending from available_at, or leased with its lease expired; not done or dead
// (expires_at NULL: the queue index's predicate). Checked when the candidates are read and again
// when they are locked.
#define OUTBOX_DUE                                                                                 \
    "s.topic OPERATOR(pg_catalog.=) $1 AND s.expires_at IS NULL "                                  \
    "AND s.status OPERATOR(pg_catalog.=) ANY ('{pending,leased}'::pg_catalog.text[]) "             \
    "AND ((s.status OPERATOR(pg_catalog.=) 'pending' AND s.available_at OPERATOR(pg_catalog.<=) "  \
    "$2) "                                                                                         \
    "OR (s.status OPERATOR(pg_catalog.=) 'leased' AND s.lease_expires_at OPERATOR(pg_catalog.<=) " \
    "$2)) "
// An event free to go: without a key, or with no earlier unfinished event of its key ($6: a dead
// one counts as unfinished). The per-key probe, one index scan of outbox_key.
#define OUTBOX_KEY_FREE                                                                            \
    "(s.key IS NULL OR NOT EXISTS (SELECT FROM idempotency.outbox p "                              \
    "WHERE p.topic OPERATOR(pg_catalog.=) $1 AND p.key OPERATOR(pg_catalog.=) s.key "              \
    "AND p.seq OPERATOR(pg_catalog.<) s.seq " P_UNFINISHED                                         \
    "AND p.status OPERATOR(pg_catalog.<>) 'done' "                                                 \
    "AND ($6 OR p.status OPERATOR(pg_catalog.<>) 'dead'))) "
// Not held: the version seen has no xmax of another transaction unfinished in the statement's
// snapshot (running then, or begun since: another relay's lease or done), which the lock would
// skip anyway; left out before the probe, which at four relays was most of the pick's work
// (bench/RESULTS.md). A version left with the xmax of a relay that rolled back, or of a lock
// since released, is a candidate (outbox_parallel_relays.spec), and so is one with this
// transaction's own (its lock carried onto the version its update made). Not seen as held, so
// probed, and the lock decides: the xmax of another transaction's subtransaction or a MultiXact.
// Left out until another transaction ends: one of this transaction's own subtransactions begun
// after the snapshot's horizon. age() orders xids across wraparound (INT_MAX for an xmax of 0).
#define SNAPSHOT "pg_catalog.pg_current_snapshot()"
#define OUTBOX_NOT_HELD                                                                            \
    "AND NOT (s.xmax OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT pg_catalog.xid(x) "                  \
    "FROM pg_catalog.pg_snapshot_xip(" SNAPSHOT ") x)) "                                           \
    "OR (pg_catalog.age(s.xmax) OPERATOR(pg_catalog.<=) (SELECT pg_catalog.age(pg_catalog.xid("    \
    "pg_catalog.pg_snapshot_xmax(" SNAPSHOT ")))) AND s.xmax OPERATOR(pg_catalog.<>) "             \
    "COALESCE((SELECT pg_catalog.xid(pg_catalog.pg_current_xact_id_if_assigned())), "              \
    "'0'::pg_catalog.xid))) "
#define OUTBOX_TAKE_SET                                                                            \
    "UPDATE idempotency.outbox AS o SET "                                                          \
    "status = CASE WHEN " LEASE_USED_UP " THEN 'dead' ELSE 'leased' END, "                         \
    "attempt = CASE WHEN " LEASE_USED_UP                                                           \
    " THEN o.attempt ELSE o.attempt OPERATOR(pg_catalog.+) 1 END, "                                \
    "lease_expires_at = CASE WHEN " LEASE_USED_UP " THEN NULL ELSE $4 END, "                       \
    "last_error = CASE WHEN " LEASE_USED_UP                                                        \
    " THEN 'the lease of the last attempt expired: no attempt left' ELSE o.last_error END, "       \
    "expires_at = CASE WHEN " LEASE_USED_UP " THEN " OUTBOX_DEAD_EXPIRES                           \
    " ELSE o.expires_at END, "                                                                     \
    "updated_at = $2 "
#define OUTBOX_RETURNING                                                                           \
    " RETURNING o.event_id, o.key, o.payload, o.headers, o.attempt, o.emitted_at, "                \
    "o.lease_expires_at, o.payload_bytes, o.dedup_key, o.status, o.seq) "                          \
    "SELECT * FROM taken ORDER BY seq"
// The batch is taken in rounds of two statements, each on a snapshot of its own, so that no
// statement walks the queue for long. The candidates: the next $8 due events not held after seq
// $7 in emit order, read without locks, each with whether it is free (probed); then the free ones
// still due, locked (others' locks are skipped) and leased by row address. One statement that
// both walked and locked, on the snapshot of its start, saw every event the other relays took
// since as pending and re-checked each on its newest version: under four relays on two cores it
// fell behind them for seconds and held back every backend's xmin (bench/RESULTS.md).
const char *const SQL_CANDIDATES = "SELECT s.ctid, s.seq, " OUTBOX_KEY_FREE
                                   "FROM idempotency.outbox s WHERE " OUTBOX_DUE OUTBOX_NOT_HELD
                                   "AND s.seq OPERATOR(pg_catalog.>) $7 ORDER BY s.seq LIMIT $8";
const Oid CANDIDATES_TYPES[] = {TEXTOID, TIMESTAMPTZOID, INT8OID, TIMESTAMPTZOID,
                                INT4OID, BOOLOID,        INT8OID, INT8OID};
const char *const SQL_NEXT =
    "WITH taken AS (" OUTBOX_TAKE_SET "WHERE o.topic OPERATOR(pg_catalog.=) $1 AND o.ctid "
    "OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT s.ctid FROM idempotency.outbox s "
    "WHERE s.ctid OPERATOR(pg_catalog.=) ANY ($7) AND " OUTBOX_DUE
    "ORDER BY s.seq LIMIT $3 FOR UPDATE SKIP LOCKED))" OUTBOX_RETURNING;
const Oid NEXT_TYPES[] = {TEXTOID, TIMESTAMPTZOID, INT8OID,    TIMESTAMPTZOID,
                          INT4OID, BOOLOID,        TIDARRAYOID};
// On Citus (no row addresses, 0A000): one statement, the batch joined back by key, planned per
// call.
const char *const SQL_NEXT_CITUS =
    "WITH picked AS (SELECT s.event_id FROM idempotency.outbox s WHERE " OUTBOX_DUE
    "AND " OUTBOX_KEY_FREE "ORDER BY s.seq LIMIT $3 FOR UPDATE SKIP LOCKED), "
    "taken AS (" OUTBOX_TAKE_SET "FROM picked WHERE o.topic OPERATOR(pg_catalog.=) $1 "
    "AND o.event_id OPERATOR(pg_catalog.=) picked.event_id" OUTBOX_RETURNING;
const Oid CITUS_NEXT_TYPES[] = {TEXTOID, TIMESTAMPTZOID, INT8OID, TIMESTAMPTZOID, INT4OID, BOOLOID};
constexpr int NEXT_NCOLS = 9; // the result columns; RETURNING adds status and seq

SPIPlanPtr plan_candidates, plan_next, plan_next_citus;

// Where this backend's last call stopped walking a topic's queue past the stretch from its start
// (lease_in_rounds); a hint only, kept for one topic.
struct Resume {
    bool valid;
    uint32 topic_hash;
    int64 seq;
};
Resume resume = {false, 0, 0};

uint32 topic_hash(Datum topic) {
    text *t = DatumGetTextPP(topic);
    return DatumGetUInt32(
        hash_any(reinterpret_cast<unsigned char *>(VARDATA_ANY(t)), VARSIZE_ANY_EXHDR(t)));
}

// The free candidates of a round in the SPI result (column 3 true): their row addresses into
// tids; returns how many. *last: the seq of the last candidate, free or not (column 2).
int free_candidates(uint64 n, Datum *tids, int64 *last) {
    int nfree = 0;
    bool isnull;
    for (uint64 r = 0; r < n; r++)
        if (DatumGetBool(col(r, 3, &isnull)))
            tids[nfree++] = col(r, 1, &isnull); // construct_array copies them
    *last = DatumGetInt64(col(n - 1, 2, &isnull));
    return nfree;
}

// Leases up to batch events into the result in rounds (SQL_CANDIDATES above), each after the
// last round's candidates. A call ends when the batch is full, at the queue's end, after a round
// with no free candidate once it has events, or after two stretches of examined due events (the
// larger of 1,024 and twice the batch): the first from the queue's start, the second from where
// this backend's last call that walked two stopped (when that is further on), where it leaves
// its own stop in turn. Events queued behind a long run of waiting ones (a key's backlog) are so
// reached in a few calls, and no call walks the whole queue. v: the first six parameters of
// SQL_NEXT.
void lease_in_rounds(Datum *v, int64 batch, ReturnSetInfo *rsinfo) {
    constexpr int64 extra = 32; // candidates beyond the events wanted (taken by other relays)
    const int64 stretch = std::max<int64>(1024, 2 * batch);
    const uint32 topic = topic_hash(v[0]);
    int64 last = PG_INT64_MIN, examined = 0;
    bool resumed = false, end = false;
    for (;;) {
        int64 left = batch - static_cast<int64>(tuplestore_tuple_count(rsinfo->setResult));
        if (left <= 0)
            break;
        int64 want = left + extra;
        Datum c[8] = {v[0], v[1], v[2], v[3], v[4], v[5], Int64GetDatum(last), Int64GetDatum(want)};
        uint64 n = exec(saved_plan(&plan_candidates, SQL_CANDIDATES, 8, CANDIDATES_TYPES), c,
                        nullptr, false, 0);
        end = n < static_cast<uint64>(want); // the queue has nothing after these
        if (n == 0)
            break;
        Datum *tids = static_cast<Datum *>(palloc(sizeof(Datum) * n));
        int nfree = free_candidates(n, tids, &last);
        examined += static_cast<int64>(n);
        if (nfree > 0) {
            ArrayType *a = construct_array(tids, nfree, TIDOID, sizeof(ItemPointerData), false,
                                           TYPALIGN_SHORT);
            Datum t[7] = {v[0], v[1], v[2], v[3], v[4], v[5], PointerGetDatum(a)};
            queue::lease_batch(saved_plan(&plan_next, SQL_NEXT, 7, NEXT_TYPES), t, 2, left,
                               NEXT_NCOLS, 'l', idem::operations::OutboxDead, rsinfo);
        }
        if (end)
            break;
        if (nfree == 0 && left < batch)
            break; // past the events free to go
        if (examined < stretch)
            continue;
        if (resumed)
            break;
        if (resume.valid && resume.topic_hash == topic && resume.seq > last)
            last = resume.seq; // the second stretch from where the last call stopped
        examined = 0;
        resumed = true;
    }
    if (end)
        resume.valid = false; // the next walk past the first stretch starts over
    else if (resumed)
        resume = Resume{true, topic, last};
}

} // namespace

// idem_outbox_next(topic, batch_size, lease): leases a batch of due events of a topic.
IDEM_PG_FUNCTION(idem_outbox_next) {
    require_arg(fcinfo, 0, "topic");
    Datum topic = checked_varlena(PG_GETARG_DATUM(0), "topic", MAX_TOPIC, false);
    idem::pg::tenants::check(idem::pg::tenants::TOPIC, topic);
    int32 batch = queue::batch_arg(fcinfo, 1, 100);
    int64 lease_us = inbox::positive_interval_arg(fcinfo, 2, idem::settings::outbox_lease_s,
                                                  "lease", "idempotency.outbox_lease");
    int32 max_attempts = queue::max_attempts_arg(fcinfo, -1);
    bool dead_blocks = idem::settings::outbox_dead_blocks_key();
    TimestampTz now = GetCurrentTimestamp();
    TimestampTz lease_expires = inbox::add_usec(now, lease_us);
    InitMaterializedSRF(fcinfo, 0);
    ReturnSetInfo *rsinfo = reinterpret_cast<ReturnSetInfo *>(fcinfo->resultinfo);

    SavedUser su;
    enter(&su);
    Datum v[6] = {topic,
                  TimestampTzGetDatum(now),
                  Int64GetDatum(batch),
                  TimestampTzGetDatum(lease_expires),
                  Int32GetDatum(max_attempts),
                  BoolGetDatum(dead_blocks)};
    if (citus_outbox())
        queue::lease_batch(saved_plan(&plan_next_citus, SQL_NEXT_CITUS, 6, CITUS_NEXT_TYPES, 0), v,
                           2, batch, NEXT_NCOLS, 'l', idem::operations::OutboxDead, rsinfo);
    else
        lease_in_rounds(v, batch, rsinfo);
    leave(&su);
    return (Datum)0;
}
