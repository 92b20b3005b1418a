#!/usr/bin/env bash
# Cost of the outbox, pgbench on a throwaway cluster of its own (port 54398, or
# IDEM_BENCH_PGPORT; the cluster directory /tmp/idem-pg-$PORT is removed first and at the end).
#   bench/outbox.sh   env: ROUNDS=5 SECS=10 CLIENTS=8 RELAYS="1 2 4" KEYS=1000 BACKLOG=...
#                          FSYNC=on PARTS="emit relay" SC="off on" RELAY_SC=off NOTES=0
#                          EMIT_VARIANTS=... RELAY_VARIANTS=... PGMQ_DIR=...
#                          KEEP_LOGS=0 OUT=/tmp/...
# Part emit: for each synchronous_commit setting and each round, runs every variant once in
# alternating order (pgbench -n -M prepared -c CLIENTS -j 2 -T SECS), each on truncated tables
# after a CHECKPOINT, one emit per transaction, a key of 100,000 and (dedup) a new dedup key:
#   outbox_emit               SELECT idempotency.idem_outbox_emit('orders', $json, key => $k)
#   outbox_emit_dedup         ... dedup_key => $d
#   outbox_insert_bare        the same row by hand into a copy of idempotency.outbox (same
#                             columns, CHECK and indexes), now(), seq DEFAULT nextval, no lock
#   outbox_insert_bare_dedup  ... with dedup_key, ON CONFLICT (topic, dedup_key) DO NOTHING
#   outbox_insert_bare_lock   outbox_insert_bare after pg_advisory_xact_lock on (topic, key),
#                             in the same statement (what the key lock costs)
# goal: outbox_emit >= 0.9 x outbox_insert_bare and outbox_emit_dedup >= 0.9 x
# outbox_insert_bare_dedup, sc off and on. After each run the table holds exactly one row per
# pgbench transaction.
# Part relay: for each relay count R in RELAYS, the queue is filled with BACKLOG events over
# KEYS keys (round robin, through the side's own emit; none for _nokey and pgmq), VACUUM
# ANALYZE, CHECKPOINT; then R pgbench clients each loop one transaction, one statement: a batch
# of 100 taken and finished:
#   relay_idem                idempotency.idem_outbox_next('orders', 100) + idem_outbox_done per event
#   relay_idem_batch          idem_outbox_next + one idem_outbox_done_batch over the batch's arrays
#   relay_idem_batch_nokey    the same on events without a key (no per-key order to keep)
#   relay_plpgsql             bench_o.next + bench_o.done of bench/plpgsql_outbox.sql
#   relay_pgmq_archive        pgmq.read('orders', 30, 100) + pgmq.archive(msg_ids): the optional
#   relay_pgmq_delete         peer, pgmq's SQL from PGMQ_DIR (../shared/thirdparty/pgmq), and
#                             pgmq.delete instead (nothing kept); skipped loudly when absent
# goals: relay_idem >= 1.0 x relay_plpgsql; relay_idem_batch >= 0.9 x and relay_idem_batch_nokey
# >= 1.0 x relay_pgmq_archive, in events/s (events done / run time) at each relay count,
# synchronous_commit off (RELAY_SC="off on" adds on: one WAL flush per batch). RELAY_VARIANTS
# replaces the list. After each run: nothing leased (pgmq: nothing read and left), every done
# event done at attempt 1 (pgmq: archived after one read), done + pending = BACKLOG, per key the
# done events are the first ones (no pending event before a done one), and the backlog not
# drained (else raise BACKLOG).
# NOTES=1 adds outbox_emit_plpgsql (bench_o.emit, for information) to part emit; EMIT_VARIANTS
# replaces part emit's list (e.g. "outbox_emit_dedup outbox_insert_bare_dedup").
# p50/p99: the latency of every transaction (relay: of every batch) from the pgbench -l log; the
# tables give the median over the rounds; backend CPU per transaction (relay: per event). Prints
# markdown tables for bench/RESULTS.md; raw figures and the pgbench outputs are kept in $OUT.
# Needs root or the postgres user (test/pgcluster).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
ROUNDS=${ROUNDS:-5}
SECS=${SECS:-10}
CLIENTS=${CLIENTS:-8}
RELAYS=${RELAYS:-1 2 4}
KEYS=${KEYS:-1000}
# Enough for the fastest side not to drain the queue in SECS (pgmq: up to about 80k events/s
# on this VM), checked after every run.
BACKLOG=${BACKLOG:-$((SECS * 90000 + 20000))}
FSYNC=${FSYNC:-on}
PARTS=${PARTS:-emit relay}
SC=${SC:-off on}
RELAY_SC=${RELAY_SC:-off}
NOTES=${NOTES:-0}
OUT=${OUT:-/tmp/idem-outbox-$$}
mkdir -p "$OUT"
B=bench/pgbench
SUMMARISE=bench/summarise.py

bench_cluster "${IDEM_BENCH_PGPORT:-54398}" "$FSYNC"
createdb bench
psql -Xq -v ON_ERROR_STOP=1 -d bench -f $B/outbox_setup.sql
q() { psql -XAtq -v ON_ERROR_STOP=1 -d bench -c "$1"; }
PAYLOAD="'{\"order\":\"o-1842\",\"amount\":4200,\"currency\":\"EUR\",\"customer\":\"c-77\"}'::jsonb"
PGMQ=""
load_pgmq() { bench_load_pgmq orders "the relay_pgmq_* variants"; }
# pgbench's count of finished transactions of run NAME.
txs() { sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$OUT/$1.out"; }

echo "# $(date -u +%FT%TZ) $(nproc) cores, $(pg_config --version), fsync=$FSYNC, $ROUNDS rounds x $SECS s, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $(bench_build); bench scripts of $(git log -1 --format='%h %s' 2>/dev/null | cut -c1-60)"

if [[ " $PARTS " == *" emit "* ]]; then
    VARIANTS=${EMIT_VARIANTS:-outbox_emit outbox_insert_bare outbox_insert_bare_lock outbox_emit_dedup outbox_insert_bare_dedup}
    RATIOS="outbox_emit/outbox_insert_bare/0.9 outbox_emit_dedup/outbox_insert_bare_dedup/0.9
            outbox_insert_bare_lock/outbox_insert_bare/0 outbox_emit/outbox_insert_bare_lock/0"
    if [ "$NOTES" = 1 ]; then
        VARIANTS="$VARIANTS outbox_emit_plpgsql"
        RATIOS="$RATIOS outbox_emit_plpgsql/outbox_insert_bare_lock/0 outbox_emit/outbox_emit_plpgsql/0"
    fi
    : >"$OUT/emit.txt"
    echo "## emit: $CLIENTS clients, one event per transaction (rows: sc variant round tps p50_ms p99_ms cpu_us_per_tx)"
    for sc in $SC; do
        for r in $(seq 1 "$ROUNDS"); do
            # shellcheck disable=SC2086 # VARIANTS is a list of words, split on purpose
            for v in $(bench_order "$r" $VARIANTS); do
                q "TRUNCATE idempotency.outbox, bench_bare.outbox, bench_o.outbox"
                q "CHECKPOINT"
                name="emit.$sc.$v.$r"
                res=$(PGOPTIONS="-c synchronous_commit=$sc" bench_run "$name" "$CLIENTS" "$B/$v.sql")
                t=idempotency.outbox
                case $v in
                outbox_insert_bare*) t=bench_bare.outbox ;;
                outbox_emit_plpgsql) t=bench_o.outbox ;;
                esac
                rows=$(q "SELECT count(*) FROM $t")
                if [ "$rows" != "$(txs "$name")" ]; then
                    echo "emit check failed after $v: $rows rows, $(txs "$name") transactions" >&2
                    exit 1
                fi
                echo "$sc $v $r $res" | tee -a "$OUT/emit.txt"
            done
        done
    done
    echo
    echo "### emit: $CLIENTS clients, pgbench -M prepared, $ROUNDS rounds x $SECS s, load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
    echo
    python3 $SUMMARISE runs "$OUT/emit.txt" --groups synchronous_commit --unit TPS \
        --variants "$VARIANTS" --ratios "$RATIOS" | tee "$OUT/emit.md"
    echo
fi

if [[ " $PARTS " == *" relay "* ]]; then
    VARIANTS=${RELAY_VARIANTS:-relay_idem relay_idem_batch relay_idem_batch_nokey relay_plpgsql relay_pgmq_archive relay_pgmq_delete}
    RATIOS="relay_idem/relay_plpgsql/1.0 relay_idem_batch/relay_idem/0
            relay_idem_batch/relay_pgmq_archive/0.9 relay_idem_batch_nokey/relay_pgmq_archive/1.0
            relay_idem_batch/relay_pgmq_delete/0 relay_idem_batch_nokey/relay_pgmq_delete/0"
    if [[ " $VARIANTS " == *" relay_pgmq_"* ]] && ! load_pgmq; then
        VARIANTS=$(echo "$VARIANTS" | tr ' ' '\n' | grep -v '^relay_pgmq_' | tr '\n' ' ')
    fi
    table_of() {
        case $1 in
        relay_idem*) echo idempotency.outbox ;;
        relay_pgmq_*) echo pgmq.q_orders ;;
        *) echo bench_o.outbox ;;
        esac
    }
    # Each run starts on the same queue: the tables emptied, BACKLOG events emitted through the
    # variant's own emit (in emit order: event i has key i mod KEYS; none for _nokey and pgmq),
    # statistics fresh, a checkpoint.
    fill() {
        q "TRUNCATE idempotency.outbox, bench_o.outbox"
        [ -z "$PGMQ" ] || q "TRUNCATE pgmq.q_orders, pgmq.a_orders"
        case $1 in
        relay_idem_batch_nokey)
            q "SELECT count(idempotency.idem_outbox_emit('orders', $PAYLOAD))
               FROM generate_series(1, $BACKLOG) i" >/dev/null ;;
        relay_idem*)
            q "SELECT count(idempotency.idem_outbox_emit('orders', $PAYLOAD, key => 'k' || (i % $KEYS)))
               FROM generate_series(1, $BACKLOG) i" >/dev/null ;;
        relay_pgmq_*)
            q "SELECT count(*) FROM pgmq.send_batch('orders',
                   ARRAY(SELECT $PAYLOAD FROM generate_series(1, $BACKLOG) i))" >/dev/null ;;
        *)
            q "SELECT count(bench_o.emit('orders', $PAYLOAD, 'k' || (i % $KEYS)))
               FROM generate_series(1, $BACKLOG) i" >/dev/null ;;
        esac
        q "VACUUM ANALYZE $(table_of "$1")"
        q "CHECKPOINT"
    }
    # After a run: nothing leased, each done event done once (attempt 1), none lost, per key
    # the done events precede the pending ones, the backlog not drained. Prints the done count.
    # pgmq: nothing read and left in the queue, archived + queued = BACKLOG (archive: every
    # archived message read once).
    check() {
        local t c
        t=$(table_of "$1")
        case $1 in
        relay_pgmq_*)
            c=$(q "SELECT count(*) FILTER (WHERE read_ct = 0) || ' ' || count(*) FILTER (WHERE read_ct > 0) || ' ' ||
                          (SELECT count(*) FILTER (WHERE read_ct = 1) FROM pgmq.a_orders) || ' ' ||
                          (count(*) + (SELECT count(*) FROM pgmq.a_orders)) || ' 0'
                     FROM pgmq.q_orders") ;;
        *)
            c=$(q "SELECT count(*) FILTER (WHERE status = 'pending' AND attempt = 0) || ' ' ||
                          count(*) FILTER (WHERE status = 'leased') || ' ' ||
                          count(*) FILTER (WHERE status = 'done' AND attempt = 1) || ' ' || count(*) || ' ' ||
                          (SELECT count(*) FROM (SELECT max(seq) FILTER (WHERE status = 'done') AS d,
                                                        min(seq) FILTER (WHERE status <> 'done') AS p
                                                   FROM $t GROUP BY key) k WHERE k.d > k.p)
                     FROM $t") ;;
        esac
        read -r pending leased finished all disorder <<<"$c"
        # pgmq.delete keeps nothing: the done events are the ones gone from the queue
        [ "$1" = relay_pgmq_delete ] && finished=$((BACKLOG - pending)) && all=$BACKLOG
        if [ "$leased" != 0 ] || [ $((pending + finished)) != "$all" ] || [ "$all" != "$BACKLOG" ] ||
            [ "$disorder" != 0 ] || [ "$pending" = 0 ]; then
            echo "relay check failed after $1: pending=$pending leased=$leased done=$finished rows=$all keys out of order=$disorder (pending 0: BACKLOG too small)" >&2
            exit 1
        fi
        echo "$finished"
    }
    : >"$OUT/relay.txt"
    echo "## relay: next(batch 100) + done, one transaction per batch, backlog $BACKLOG over $KEYS keys (rows: sc:relays variant round events/s p50_ms p99_ms cpu_us_per_event)"
    for sc in $RELAY_SC; do
        for r in $(seq 1 "$ROUNDS"); do
            for w in $RELAYS; do
                # shellcheck disable=SC2086 # VARIANTS is a list of words, split on purpose
                for v in $(bench_order "$r" $VARIANTS); do
                    fill "$v"
                    name="relay.$sc.$w.$v.$r"
                    read -r tps p50 p99 cpu < <(PGOPTIONS="-c synchronous_commit=$sc" bench_run "$name" "$w" "$B/outbox_${v%_nokey}.sql")
                    finished=$(check "$v")
                    n=$(txs "$name")
                    # events/s = tps x events per transaction; CPU per event likewise.
                    eps=$(python3 -c "print('%.1f' % ($tps * $finished / $n))")
                    cpe=$cpu
                    [ "$cpu" = - ] || cpe=$(python3 -c "print('%.1f' % ($cpu * $n / $finished))")
                    echo "$sc:$w $v $r $eps $p50 $p99 $cpe" | tee -a "$OUT/relay.txt"
                done
            done
        done
    done
    echo
    echo "### relay: next(batch 100) + done, relays = pgbench clients, backlog $BACKLOG over $KEYS keys, $ROUNDS rounds x $SECS s, load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
    echo
    python3 $SUMMARISE runs "$OUT/relay.txt" --groups synchronous_commit,relays --unit events/s \
        --variants "$VARIANTS" --ratios "$RATIOS" --per event | tee "$OUT/relay.md"
    echo
fi
echo "results in $OUT"
