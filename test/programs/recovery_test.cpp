// Recovery of stuck operations (docs/lifecycle.md "Reconciling a stuck operation"): a worker
// claims in two-phase mode (the claim commits) and dies before completing,
//   1. its backend killed with SIGKILL (the postmaster then restarts every backend and runs
//      crash recovery), and
//   2. the whole server stopped with pg_ctl stop -m immediate and started again.
// In both cases the committed claim survives as a processing record, idem_stuck lists it once its
// lease has expired (not before), a new claim takes it over with attempt 2, the dead worker's
// attempt 1 is fenced (IK002), and after the new owner completes nothing is stuck. A claim made
// in single-transaction mode that had not committed leaves nothing behind.
//
// The cluster is the one of the libpq environment; its directory is $IDEM_PGDIR, else $PGHOST
// (test/pgcluster keeps the socket in the cluster directory). As root, pg_ctl runs as postgres
// (runuser). This program restarts the shared test cluster: run it after the other client tests.
// It leaves the cluster running, also when a check fails.
//   --ci    both scenarios once (~15 s)
#include "common.hpp"

#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

using namespace idemtest;

namespace {

const std::string DB = "recovery_test";
int failures = 0;

void check(bool ok, const std::string &what) {
    std::printf("  %s %s\n", ok ? "ok  " : "FAIL", what.c_str());
    if (!ok)
        failures++;
}

// A new connection to the test database, retried while the server restarts or recovers.
std::unique_ptr<pqxx::connection> reconnect(double deadline_s = 120) {
    auto t0 = std::chrono::steady_clock::now();
    for (;;) {
        try {
            auto c = std::make_unique<pqxx::connection>(conninfo(DB));
            pqxx::nontransaction(*c).exec("SELECT 1");
            return c;
        } catch (const std::exception &e) {
            if (seconds_since(t0) > deadline_s)
                throw;
            sleep_ms(200);
        }
    }
}

std::string one(pqxx::connection &c, const std::string &sql) {
    pqxx::nontransaction n(c);
    pqxx::result r = n.exec(sql);
    if (r.empty() || r[0][0].is_null())
        return "<none>";
    return r[0][0].c_str();
}

// The worker: a committed two-phase claim of key (lease 3 s), then a single-transaction claim
// of key + "-tx" left uncommitted. Returns the worker's backend pid.
int start_worker(pqxx::connection &w, const std::string &key) {
    pqxx::nontransaction n(w);
    int pid = n.exec("SELECT pg_backend_pid()")[0][0].as<int>();
    pqxx::result r = n.exec("SELECT outcome, attempt FROM idempotency.idem_claim('recovery', " +
                            w.quote(key) + ", NULL, '3 seconds')");
    check(std::string(r[0][0].c_str()) == "claimed" && r[0][1].as<int>() == 1,
          "worker claimed " + key + " (two-phase, committed): attempt 1");
    n.exec("BEGIN");
    r = n.exec("SELECT outcome FROM idempotency.idem_claim('recovery', " + w.quote(key + "-tx") +
               ")");
    check(std::string(r[0][0].c_str()) == "claimed",
          "worker claimed " + key + "-tx inside an open transaction");
    return pid;
}

// After the crash: the record survived as processing, stuck only once the lease has expired,
// reclaimed with attempt 2, the old attempt fenced, and nothing stuck after completion.
void verify_recovery(const std::string &key) {
    auto c = reconnect();
    check(one(*c, "SELECT status || ' ' || attempt FROM idempotency.idem_lookup('recovery', " +
                      c->quote(key) + ")") == "processing 1",
          key + " survived the crash as processing, attempt 1");
    check(one(*c, "SELECT count(*) FROM idempotency.idem_lookup('recovery', " +
                      c->quote(key + "-tx") + ")") == "0",
          "the uncommitted single-transaction claim " + key + "-tx left nothing");
    bool live = one(*c, "SELECT lease_expires_at > clock_timestamp() FROM idempotency.records "
                        "WHERE scope = 'recovery' AND key = " +
                            c->quote(key)) == "t";
    if (live)
        check(one(*c, "SELECT count(*) FROM idempotency.idem_stuck() WHERE key = " +
                          c->quote(key)) == "0",
              "idem_stuck does not list " + key + " while its lease runs");
    // wait until the lease has expired
    one(*c, "SELECT pg_sleep(GREATEST(0, extract(epoch FROM lease_expires_at - clock_timestamp()) "
            "+ 0.1)) FROM idempotency.records WHERE scope = 'recovery' AND key = " +
                c->quote(key));
    check(one(*c, "SELECT string_agg(key || ' attempt ' || attempt, ',') FROM "
                  "idempotency.idem_stuck()") == key + " attempt 1",
          "idem_stuck lists exactly " + key + " attempt 1 once the lease expired");
    pqxx::result r = pqxx::nontransaction(*c).exec(
        "SELECT outcome, attempt FROM idempotency.idem_claim('recovery', " + c->quote(key) + ")");
    check(std::string(r[0][0].c_str()) == "reclaimed" && r[0][1].as<int>() == 2,
          "a new claim takes " + key + " over: reclaimed, attempt 2");
    std::string state;
    try {
        pqxx::nontransaction(*c).exec("SELECT idempotency.idem_complete('recovery', " +
                                      c->quote(key) + ", 1, 'late')");
        state = "accepted";
    } catch (const pqxx::sql_error &e) {
        state = e.sqlstate();
    }
    check(state == "IK002", "the dead worker's attempt 1 is fenced: " + state);
    check(one(*c, "SELECT idempotency.idem_complete('recovery', " + c->quote(key) + ", 2, 'r2')") ==
              "t",
          "attempt 2 completes");
    check(one(*c, "SELECT count(*) FROM idempotency.idem_stuck()") == "0",
          "nothing is stuck afterwards");
}

void scenario_sigkill() {
    std::printf("recovery_test: worker backend killed with SIGKILL\n");
    pqxx::connection w(conninfo(DB));
    int pid = start_worker(w, "sigkill");
    check(::kill(pid, SIGKILL) == 0, "SIGKILL sent to backend " + std::to_string(pid));
    sleep_ms(500); // the postmaster notices and restarts every backend
    verify_recovery("sigkill");
}

void scenario_restart() {
    std::printf("recovery_test: server stopped with pg_ctl stop -m immediate and started\n");
    pqxx::connection w(conninfo(DB));
    start_worker(w, "restart");
    check(crash_server() == 0, "pg_ctl stop -m immediate");
    check(start_server() == 0, "pg_ctl start (crash recovery)");
    verify_recovery("restart");
}

} // namespace

int main(int argc, char **argv) {
    parse_options(argc, argv);
    auto t0 = std::chrono::steady_clock::now();
    if (::geteuid() != 0 && std::getenv("IDEM_PGDIR") == nullptr)
        std::fprintf(stderr, "recovery_test: note: not root; pg_ctl runs as this user\n");
    try {
        create_test_db(DB);
        scenario_sigkill();
        scenario_restart();
    } catch (const std::exception &e) {
        std::fprintf(stderr, "recovery_test: error: %s\n", e.what());
        failures++;
    }
    ensure_running();
    try {
        reconnect();
        drop_test_db(DB);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "recovery_test: cleanup: %s\n", e.what());
    }
    std::printf("recovery_test: %s (%.1f s)\n", failures == 0 ? "PASS" : "FAIL", seconds_since(t0));
    return failures == 0 ? 0 : 1;
}
