// Scenario 4 of the fault suite: the server crashes (pg_ctl stop -m immediate) under load,
// restarts, and the clients carry on with the same keys. Afterwards, read from the database:
//  - no duplicate effect (one payment per key),
//  - no acknowledged completion lost (synchronous_commit = on): every answer a client got is
//    the key's payment and its completed record,
//  - every record orphaned by the crash (a committed two-phase claim whose owner died; seen
//    after the restart still processing, or already reclaimed: attempt 2 and later) was
//    reclaimed by a new attempt once its lease expired and then completed.
// The cluster is the one of the libpq environment: its directory is $IDEM_PGDIR, else $PGHOST
// (test/pgcluster puts the socket in the cluster directory); data in <dir>/data. When run as
// root the server is restarted as the postgres user (runuser). The cluster is running again
// when the program exits. Run it last: it restarts the server under everyone's feet.
//   --ci    16 clients for ~8 s, one crash
//   --soak  16 clients for ~60 s, a crash every ~10 s
//   --break blind handler without idempotency (a retry charges again): must FAIL
#include "common.hpp"

#include <unistd.h>

#include <map>
#include <set>

using namespace idemtest;

int main(int argc, char **argv) {
    Options opt = parse_options(argc, argv);
    const int pairs = 8;
    const double duration_s = opt.soak ? 60 : 8;
    const int crashes = opt.soak ? 5 : 1;
    const std::string db = "crash_test";
    const std::string scope = "crash";
    auto t0 = std::chrono::steady_clock::now();
    if (cluster_dir().empty() || ::access((cluster_dir() + "/data/PG_VERSION").c_str(), F_OK)) {
        std::fprintf(stderr, "crash_test: no cluster directory (set IDEM_PGDIR or PGHOST to the "
                             "test/pgcluster directory)\n");
        return 2;
    }
    std::printf("crash_test: %d clients (%d pairs; even pairs single-tx, odd pairs two-phase) "
                "for %.0f s, %d immediate shutdown(s) of %s%s\n",
                pairs * 2, pairs, duration_s, crashes, cluster_dir().c_str(),
                opt.broken ? " (--break: blind handler)" : "");
    if (!setup_test_db(db))
        return 2;

    Stats st;
    std::atomic<bool> stop{false};
    std::mutex ans_m;
    std::vector<std::pair<std::string, std::string>> answers; // (key, payment id) per client answer
    ErrorLog errors;
    std::vector<std::thread> threads;
    for (int w = 0; w < pairs * 2; w++) {
        threads.emplace_back([&, w] {
            int pair = w / 2;
            Mode mode = opt.broken ? Mode::Blind : pair % 2 ? Mode::TwoPhase : Mode::Single;
            Client cl(conninfo(db));
            cl.on_connect = [](pqxx::connection &c) {
                pqxx::nontransaction n(c);
                n.exec("SET synchronous_commit = on");
            };
            Hook hook = [](const char *p) { // widen the window between claim and complete
                if (std::strcmp(p, "claimed") == 0)
                    sleep_ms(rand_int(2, 20));
            };
            for (int i = 0; !stop; i++) {
                std::string key = "p" + std::to_string(pair) + "-" + std::to_string(i);
                try {
                    std::string pid = charge_until_answered(cl, mode, scope, key, 900 + i,
                                                            "1 second", st, 180, hook);
                    std::lock_guard<std::mutex> g(ans_m);
                    answers.emplace_back(key, pid);
                } catch (const std::exception &e) {
                    errors.record(e);
                }
            }
        });
    }

    // The crasher: immediate shutdowns spread over the run, then restart and snapshot the
    // records orphaned by the crash.
    std::map<std::string, int> orphans; // key -> attempt of the orphaned claim
    long acked_before_crash = 0;
    std::set<std::pair<std::string, std::string>> acked_snapshot;
    for (int k = 0; k < crashes; k++) {
        sleep_ms(static_cast<int>(duration_s * 1000 / (crashes + 1)));
        {
            std::lock_guard<std::mutex> g(ans_m);
            acked_before_crash = static_cast<long>(answers.size());
            acked_snapshot.insert(answers.begin(), answers.end());
        }
        crash_server();
        std::printf("crash %d: immediate shutdown after %ld answers\n", k + 1, acked_before_crash);
        sleep_ms(500);
        if (start_server() != 0) {
            std::fprintf(stderr, "crash_test: restart failed, see %s/server.log\n",
                         cluster_dir().c_str());
            stop = true;
            for (auto &th : threads)
                th.join();
            return 2;
        }
        try {
            Client c(conninfo(db));
            retry([&] {
                pqxx::nontransaction n(c.get());
                // Still processing since before the restart, or reclaimed already: a client
                // whose lease (1 s) ran out while a loaded machine restarted retries first,
                // and its new attempt stands where the dead one was (attempt - 1 died).
                for (auto row : idem::db::exec_params(
                         n,
                         "SELECT key, CASE WHEN status = 'processing' AND updated_at < "
                         "pg_postmaster_start_time() THEN attempt ELSE attempt - 1 END "
                         "FROM idempotency.records WHERE scope = $1 AND (attempt >= 2 OR "
                         "(status = 'processing' AND updated_at < pg_postmaster_start_time()))",
                         scope))
                    orphans[row[0].as<std::string>()] = row[1].as<int>();
                return 0;
            });
        } catch (const std::exception &e) {
            std::fprintf(stderr, "orphan snapshot failed: %s\n", e.what());
        }
        std::printf("crash %d: restarted; %zu orphaned processing records so far\n", k + 1,
                    orphans.size());
    }
    sleep_ms(static_cast<int>(duration_s * 1000 / (crashes + 1)));
    stop = true;
    for (auto &th : threads)
        th.join();
    std::printf("%zu answers; %s\n", answers.size(), st.summary().c_str());
    errors.print();

    std::vector<Invariant> inv;
    int rc;
    try {
        Client vc(conninfo(db));
        pqxx::connection &c = *retry([&] { return &vc.get(); }, 60);
        pqxx::nontransaction n(c);
        long keys = idem::db::exec_params(
                        n, "SELECT count(*) FROM idempotency.records WHERE scope = $1", scope)[0][0]
                        .as<long>();
        if (opt.broken) // no records: count the keys clients asked for
            keys = idem::db::exec_params(
                       n, "SELECT count(DISTINCT key) FROM payments WHERE scope = $1", scope)[0][0]
                       .as<long>();
        n.commit();
        effect_invariants(c, "S4 crash", scope, keys, inv);
        // Every answer (acknowledged to a client) is the key's one payment.
        std::map<std::string, std::string> paid = payment_ids(c, scope);
        std::map<std::string, int> attempt_now;
        std::map<std::string, std::string> status_now;
        pqxx::nontransaction n2(c);
        for (auto row :
             idem::db::exec_params(n2,
                                   "SELECT key, attempt, status FROM idempotency.records "
                                   "WHERE scope = $1",
                                   scope)) {
            attempt_now[row[0].as<std::string>()] = row[1].as<int>();
            status_now[row[0].as<std::string>()] = row[2].as<std::string>();
        }
        long kept = 0;
        for (auto &a : answers)
            kept += paid[a.first] == a.second;
        inv.push_back({"S4 crash: answers = the key's payment", keys, (long)answers.size(), kept,
                       kept == (long)answers.size(), "errors: " + std::to_string(errors.count())});
        long kept_before = 0;
        for (auto &a : acked_snapshot)
            kept_before += paid[a.first] == a.second;
        inv.push_back({"S4 crash: acknowledged before crash, kept", keys,
                       (long)acked_snapshot.size(), kept_before,
                       kept_before == (long)acked_snapshot.size(), "synchronous_commit = on"});
        if (!opt.broken) {
            long unfinished = 0;
            for (auto &s : status_now)
                unfinished += s.second != "completed";
            inv.push_back(
                {"S4 crash: records left unfinished", keys, 0, unfinished, unfinished == 0, ""});
            long reclaimed = 0;
            for (auto &o : orphans)
                reclaimed += status_now[o.first] == "completed" && attempt_now[o.first] > o.second;
            inv.push_back({"S4 crash: orphans reclaimed after lease expiry", keys,
                           (long)orphans.size(), reclaimed,
                           reclaimed == (long)orphans.size() && !orphans.empty(),
                           "orphans: processing at restart or reclaimed by then (>=1 required)"});
        }
    } catch (const std::exception &e) {
        std::fprintf(stderr, "verification failed: %s\n", e.what());
        inv.push_back({"S4 crash: verification", 0, 1, 0, false, e.what()});
    }
    ensure_running();
    drop_test_db(db);
    rc = print_invariants("crash_test", inv, seconds_since(t0));
    return rc;
}
