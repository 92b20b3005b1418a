#!/usr/bin/env bash
# Cost of the inbox, pgbench on a throwaway cluster of its own (port 54394, or
# IDEM_BENCH_PGPORT; the cluster directory /tmp/idem-pg-$PORT is removed first and at the end).
#   bench/inbox.sh    env: ROUNDS=5 SECS=10 CLIENTS=8 WORKERS="1 2 4" BACKLOG=1000 FSYNC=on
#                          PARTS="receive queue" SC="off on" QUEUE_SC=off NOTES=0 KEEP_LOGS=0
#                          PGMQ_DIR=... OUT=/tmp/...
# Part receive: for each synchronous_commit setting and each round, runs every variant once in
# alternating order (pgbench -n -M prepared -c CLIENTS -j 2 -T SECS), each on truncated tables
# after a CHECKPOINT, new event ids only:
#   inbox_receive         SELECT idempotency.idem_inbox_receive('billing', $id)                  (inline)
#   inbox_receive_queued  SELECT idempotency.idem_inbox_receive('billing', $id, enqueue => true)
#   processed_event       INSERT INTO processed_event (event_id, consumer_group)
#                         VALUES ($id, 'billing') ON CONFLICT DO NOTHING  (the textbook table)
# goal: each receive >= 0.95 x processed_event, sc off and on.
# Part queue: one event per pgbench transaction, receive (enqueue) + next (batch 1) + done, each
# statement its own transaction, every client both producer and worker, on a queue holding
# BACKLOG events (refilled before every run), for WORKERS clients:
#   queue_idem            idempotency.idem_inbox_receive(..., enqueue => true), idem_inbox_next, idem_inbox_done
#   queue_plpgsql         the same through the PL/pgSQL queue of bench/plpgsql_queue.sql
#   queue_pgmq            pgmq.send, pgmq.read (batch 1, 30 s), pgmq.archive: the optional peer,
#                         pgmq's SQL from PGMQ_DIR (../shared/thirdparty/pgmq), skipped loudly
#                         when absent; pgmq has no dedup (send takes no event id)
# goal: queue_idem >= 1.0 x queue_plpgsql and >= 1.0 x queue_pgmq in events/s at each worker
# count, synchronous_commit
# off (QUEUE_SC="off on" adds on: three WAL flushes per event on both sides, which then
# measure the disk more than the code).
# NOTES=1 adds variants for information (no goal): inbox_insert_bare(_queued) (the rows
# idem_inbox_receive writes, inserted by hand into a copy of idempotency.inbox) and queue_sql
# (the PL/pgSQL queue's statements sent bare).
# p50/p99: the latency of every transaction from the pgbench -l log of each run; the tables give
# the median over the rounds. Prints markdown tables for bench/RESULTS.md; raw figures and the
# pgbench outputs are kept in $OUT. Needs root or the postgres user (test/pgcluster).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
ROUNDS=${ROUNDS:-5}
SECS=${SECS:-10}
CLIENTS=${CLIENTS:-8}
WORKERS=${WORKERS:-1 2 4}
BACKLOG=${BACKLOG:-1000}
FSYNC=${FSYNC:-on}
PARTS=${PARTS:-receive queue}
SC=${SC:-off on}
QUEUE_SC=${QUEUE_SC:-off}
NOTES=${NOTES:-0}
OUT=${OUT:-/tmp/idem-inbox-$$}
mkdir -p "$OUT"
B=bench/pgbench
SUMMARISE=bench/summarise.py

bench_cluster "${IDEM_BENCH_PGPORT:-54394}" "$FSYNC"
createdb bench
psql -Xq -v ON_ERROR_STOP=1 -d bench -f $B/inbox_setup.sql
q() { psql -XAtq -v ON_ERROR_STOP=1 -d bench -c "$1"; }
PGMQ=""
load_pgmq() { bench_load_pgmq billing "the queue_pgmq variant"; }
PAYLOAD="convert_to('{\"order\":\"o-1842\",\"amount\":4200,\"currency\":\"EUR\",\"customer\":\"c-77\"}', 'UTF8')"

echo "# $(date -u +%FT%TZ) $(nproc) cores, $(pg_config --version), fsync=$FSYNC, $ROUNDS rounds x $SECS s, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $(bench_build); bench scripts of $(git log -1 --format='%h %s' 2>/dev/null | cut -c1-60)"

if [[ " $PARTS " == *" receive "* ]]; then
    VARIANTS="inbox_receive inbox_receive_queued processed_event"
    RATIOS="inbox_receive/processed_event/0.95 inbox_receive_queued/processed_event/0.95"
    if [ "$NOTES" = 1 ]; then
        VARIANTS="$VARIANTS inbox_insert_bare inbox_insert_bare_queued"
        RATIOS="$RATIOS inbox_insert_bare/processed_event/0 inbox_insert_bare_queued/processed_event/0
                inbox_receive/inbox_insert_bare/0 inbox_receive_queued/inbox_insert_bare_queued/0"
    fi
    : >"$OUT/receive.txt"
    echo "## receive: $CLIENTS clients, new event ids (rows: sc variant round tps p50_ms p99_ms cpu_us_per_tx)"
    for sc in $SC; do
        for r in $(seq 1 "$ROUNDS"); do
            # shellcheck disable=SC2086 # VARIANTS is a list of words, split on purpose
            for v in $(bench_order "$r" $VARIANTS); do
                q "TRUNCATE idempotency.inbox, bench_bare.processed_event, bench_bare.inbox"
                q "CHECKPOINT"
                res=$(PGOPTIONS="-c synchronous_commit=$sc" bench_run "receive.$sc.$v.$r" "$CLIENTS" "$B/$v.sql")
                echo "$sc $v $r $res" | tee -a "$OUT/receive.txt"
            done
        done
    done
    echo
    echo "### receive: $CLIENTS clients, pgbench -M prepared, $ROUNDS rounds x $SECS s, load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
    echo
    python3 $SUMMARISE runs "$OUT/receive.txt" --groups synchronous_commit --unit TPS \
        --variants "$VARIANTS" --ratios "$RATIOS" | tee "$OUT/receive.md"
    echo
fi

if [[ " $PARTS " == *" queue "* ]]; then
    VARIANTS="queue_idem queue_plpgsql queue_pgmq"
    RATIOS="queue_idem/queue_plpgsql/1.0 queue_idem/queue_pgmq/1.0"
    if ! load_pgmq; then
        VARIANTS="queue_idem queue_plpgsql"
        RATIOS="queue_idem/queue_plpgsql/1.0"
    fi
    if [ "$NOTES" = 1 ]; then
        VARIANTS="$VARIANTS queue_sql"
        RATIOS="$RATIOS queue_idem/queue_sql/0 queue_plpgsql/queue_sql/0"
    fi
    # Each run starts on the same queue: both tables emptied, BACKLOG events queued through the
    # variant's own receive, statistics fresh, a checkpoint.
    fill() {
        q "TRUNCATE idempotency.inbox, bench_q.inbox"
        [ -z "$PGMQ" ] || q "TRUNCATE pgmq.q_billing, pgmq.a_billing"
        case $1 in
        queue_idem)
            q "SELECT count(idempotency.idem_inbox_receive('billing', 'b' || i, enqueue => true,
                   event_type => 'order.paid', payload => $PAYLOAD)) FROM generate_series(1, $BACKLOG) i" >/dev/null
            q "VACUUM ANALYZE idempotency.inbox" ;;
        queue_pgmq)
            q "SELECT count(*) FROM pgmq.send_batch('billing', ARRAY(SELECT convert_from($PAYLOAD, 'UTF8')::jsonb
                   FROM generate_series(1, $BACKLOG) i))" >/dev/null
            q "VACUUM ANALYZE pgmq.q_billing" ;;
        *)
            q "SELECT count(bench_q.receive('billing', 'b' || i, 'order.paid', $PAYLOAD))
               FROM generate_series(1, $BACKLOG) i" >/dev/null
            q "VACUUM ANALYZE bench_q.inbox" ;;
        esac
        q "CHECKPOINT"
    }
    # After a run: the backlog is still BACKLOG events, none leased, every other event done once.
    # pgmq: the queue holds BACKLOG unread messages, every archived one was read once.
    check() {
        local t=bench_q.inbox
        [ "$1" = queue_idem ] && t=idempotency.inbox
        local c
        if [ "$1" = queue_pgmq ]; then
            c=$(q "SELECT count(*) FILTER (WHERE read_ct = 0) || ' ' || count(*) FILTER (WHERE read_ct > 0) || ' ' ||
                          (SELECT count(*) FILTER (WHERE read_ct = 1) FROM pgmq.a_billing) || ' ' ||
                          (count(*) + (SELECT count(*) FROM pgmq.a_billing)) FROM pgmq.q_billing")
        else
            c=$(q "SELECT count(*) FILTER (WHERE status = 'received') || ' ' || count(*) FILTER (WHERE status = 'processing')
                   || ' ' || count(*) FILTER (WHERE status = 'done' AND attempt = 1) || ' ' || count(*) FROM $t")
        fi
        read -r received processing finished all <<<"$c"
        if [ "$received" != "$BACKLOG" ] || [ "$processing" != 0 ] || [ $((received + finished)) != "$all" ]; then
            echo "queue check failed after $1: received=$received processing=$processing done=$finished rows=$all" >&2
            exit 1
        fi
    }
    : >"$OUT/queue.txt"
    echo "## queue: receive + next + done per event, backlog $BACKLOG (rows: sc:workers variant round events/s p50_ms p99_ms cpu_us_per_event)"
    for sc in $QUEUE_SC; do
        for r in $(seq 1 "$ROUNDS"); do
            for w in $WORKERS; do
                # shellcheck disable=SC2086 # VARIANTS is a list of words, split on purpose
                for v in $(bench_order "$r" $VARIANTS); do
                    fill "$v"
                    res=$(PGOPTIONS="-c synchronous_commit=$sc" bench_run "queue.$sc.$w.$v.$r" "$w" "$B/$v.sql")
                    check "$v"
                    echo "$sc:$w $v $r $res" | tee -a "$OUT/queue.txt"
                done
            done
        done
    done
    echo
    echo "### queue: receive + next(batch 1) + done per event, workers = pgbench clients, backlog $BACKLOG, $ROUNDS rounds x $SECS s, load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
    echo
    python3 $SUMMARISE runs "$OUT/queue.txt" --groups synchronous_commit,workers --unit events/s \
        --variants "$VARIANTS" --ratios "$RATIOS" | tee "$OUT/queue.md"
    echo
fi
echo "results in $OUT"
