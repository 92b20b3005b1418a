// Scenario 3 of the fault suite: server backends are killed at random points between claim and
// complete, with pg_terminate_backend and with SIGKILL (which makes the postmaster reinitialize:
// every connection is lost and the server runs crash recovery). Pairs of clients send each key,
// reconnect and retry with the same key until answered; a lease of 1 second lets a retry
// reclaim a record whose owner was killed after a two-phase claim committed.
//   --ci    16 clients (8 pairs) x 40 (single-tx) / 12 (two-phase) keys per pair; <= 3 SIGKILLs
//           per mode (one kill in 12 is a SIGKILL)
//   --soak  16 clients x 300 / 100 keys per pair; a SIGKILL every ~40 kills
//   --break naive check-then-insert handler without idempotency: must FAIL
#include "common.hpp"

#include <signal.h>
#include <sys/types.h>

#include <map>

using namespace idemtest;

namespace {

enum Phase { Idle, Claimed, Work, BeforeCommit, NPhases };

struct Worker {
    std::atomic<int> pid{0};
    std::atomic<int> phase{Idle};
};

} // namespace

int main(int argc, char **argv) {
    Options opt = parse_options(argc, argv);
    const int pairs = 8;
    // single-tx keys are quick (no lease to wait out), so that mode gets more of them
    const int keys_single = opt.soak ? 300 : 40, keys_two_phase = opt.soak ? 100 : 12;
    const int max_sigkills = opt.soak ? 1000000 : 3;
    const int sigkill_every = opt.soak ? 40 : 12; // one kill in N is a SIGKILL
    const std::string db = "kill_test";
    auto t0 = std::chrono::steady_clock::now();
    std::printf("kill_test: %d clients (%d pairs) x %d (single-tx) / %d (two-phase) keys per pair, "
                "killing backends between claim and complete%s\n",
                pairs * 2, pairs, keys_single, keys_two_phase,
                opt.broken ? " (--break: naive handler)" : "");
    if (!setup_test_db(db))
        return 2;

    std::vector<Invariant> inv;
    std::vector<Mode> modes = modes_to_run(opt, Mode::Naive);
    for (Mode mode : modes) {
        std::string scope = std::string("kill-") + mode_name(mode);
        const int nworkers = pairs * 2;
        const int keys_per_pair = mode == Mode::TwoPhase ? keys_two_phase : keys_single;
        const int keys = pairs * keys_per_pair;
        Stats st;
        std::vector<Worker> workers(nworkers);
        std::vector<std::vector<std::string>> answers(keys, std::vector<std::string>(2));
        std::atomic<int> running{nworkers};
        ErrorLog errors;
        auto tm = std::chrono::steady_clock::now();

        std::vector<std::thread> threads;
        for (int w = 0; w < nworkers; w++) {
            threads.emplace_back([&, w] {
                Client cl(conninfo(db));
                cl.on_connect = [&, w](pqxx::connection &c) { workers[w].pid = c.backendpid(); };
                Hook hook = [&, w](const char *p) {
                    Phase ph = std::strcmp(p, "claimed") == 0 ? Claimed
                               : std::strcmp(p, "work") == 0  ? Work
                                                              : BeforeCommit;
                    workers[w].phase = ph;
                    sleep_ms(rand_int(0, 15)); // a window for the killer
                };
                int pair = w / 2;
                for (int i = 0; i < keys_per_pair; i++) {
                    int k = pair * keys_per_pair + i;
                    try {
                        answers[k][w % 2] =
                            charge_until_answered(cl, mode, scope, "key-" + std::to_string(k),
                                                  700 + k, "1 second", st, 90, hook);
                    } catch (const std::exception &e) {
                        errors.record(e);
                    }
                    workers[w].phase = Idle;
                }
                running--;
            });
        }

        // The killer: every 10-60 ms, a backend whose client is between claim and complete.
        long kills[2][NPhases] = {};
        int sigkills = 0, nkills = 0;
        {
            Client admin(conninfo(db));
            while (running > 0) {
                sleep_ms(rand_int(10, 60));
                std::vector<int> cand;
                for (int w = 0; w < nworkers; w++)
                    if (workers[w].phase != Idle && workers[w].pid != 0)
                        cand.push_back(w);
                if (cand.empty())
                    continue;
                int w = cand[rand_int(0, static_cast<int>(cand.size()) - 1)];
                int pid = workers[w].pid, ph = workers[w].phase;
                bool sig = sigkills < max_sigkills && (nkills % sigkill_every) == sigkill_every - 1;
                try {
                    if (sig) {
                        if (::kill(pid, SIGKILL) != 0)
                            continue;
                        sigkills++;
                        sleep_ms(300); // the postmaster restarts; everyone reconnects
                    } else {
                        pqxx::nontransaction n(admin.get());
                        idem::db::exec_params(n, "SELECT pg_terminate_backend($1)", pid);
                    }
                    kills[sig][ph]++;
                    nkills++;
                    workers[w].pid = 0; // killed; the next connection publishes its pid
                } catch (const std::exception &e) {
                    admin.reset(); // lost with the crash restart
                }
            }
        }
        for (auto &th : threads)
            th.join();
        double secs = seconds_since(tm);
        std::printf("[%s] %.1f s; kills: pg_terminate_backend %ld/%ld/%ld, SIGKILL %ld/%ld/%ld "
                    "(after claim/after effect/before commit); %s\n",
                    mode_name(mode), secs, kills[0][Claimed], kills[0][Work],
                    kills[0][BeforeCommit], kills[1][Claimed], kills[1][Work],
                    kills[1][BeforeCommit], st.summary().c_str());
        errors.print(mode_name(mode));

        Client vc(conninfo(db));
        pqxx::connection &c = *retry([&] { return &vc.get(); }, 60);
        std::string label = std::string("S3 ") + mode_name(mode);
        effect_invariants(c, label, scope, keys, inv);
        std::map<std::string, std::string> paid = payment_ids(c, scope);
        long processing = 0;
        {
            pqxx::nontransaction n(c);
            processing = idem::db::exec_params(n,
                                               "SELECT count(*) FROM idempotency.records "
                                               "WHERE scope = $1 AND status <> 'completed'",
                                               scope)[0][0]
                             .as<long>();
        }
        long same = agreement(answers, paid).keys;
        inv.push_back({label + ": both clients got the payment id", keys, keys, same, same == keys,
                       "errors: " + std::to_string(errors.count())});
        if (mode != Mode::Naive)
            inv.push_back(
                {label + ": records left unfinished", keys, 0, processing, processing == 0, ""});
        long term = 0, sk = 0;
        for (int p = 0; p < NPhases; p++)
            term += kills[0][p], sk += kills[1][p];
        inv.push_back({label + ": backends terminated (>=1)", keys, 1, term, term >= 1, ""});
        inv.push_back({label + ": backends SIGKILLed (>=1)", keys, 1, sk, sk >= 1,
                       "each one restarts all backends"});
    }
    drop_test_db(db);
    return print_invariants("kill_test", inv, seconds_since(t0));
}
