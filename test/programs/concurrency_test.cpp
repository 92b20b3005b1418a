// Scenario 1 of the fault suite: N connections send the same Idempotency-Key at once, round
// after round, in both usage modes (single transaction and two-phase). Every key must end with
// exactly one payment, and every connection must be answered with that payment's id.
//   --ci    100 connections x 200 rounds per mode (the full run, ~35 s on 2 cores)
//   --soak  100 connections x 1000 rounds per mode
//   --break naive check-then-insert handler without idempotency: must FAIL
#include "common.hpp"

using namespace idemtest;

int main(int argc, char **argv) {
    Options opt = parse_options(argc, argv);
    const int conns = 100;
    const int rounds = opt.soak ? 1000 : 200;
    const std::string db = "concurrency_test";
    auto t0 = std::chrono::steady_clock::now();
    std::printf("concurrency_test: %d connections x %d rounds per mode%s\n", conns, rounds,
                opt.broken ? " (--break: naive handler)" : "");
    if (!setup_test_db(db))
        return 2;

    std::vector<Invariant> inv;
    int rc = 0;
    std::vector<Mode> modes = modes_to_run(opt, Mode::Naive);
    for (Mode mode : modes) {
        std::string scope = std::string("concurrency-") + mode_name(mode);
        Stats st;
        // answers[round][conn]
        std::vector<std::vector<std::string>> answers(rounds, std::vector<std::string>(conns));
        Barrier barrier(conns);
        ErrorLog errors;
        auto tm = std::chrono::steady_clock::now();
        std::vector<std::thread> threads;
        for (int t = 0; t < conns; t++) {
            threads.emplace_back([&, t] {
                Client cl(conninfo(db));
                try {
                    cl.get();
                } catch (const std::exception &e) {
                    errors.tally();
                }
                for (int r = 0; r < rounds; r++) {
                    barrier.wait(); // all connections send round r's key at once
                    try {
                        answers[r][t] =
                            charge_until_answered(cl, mode, scope, "key-" + std::to_string(r),
                                                  100 + r, "30 seconds", st, 60);
                    } catch (const std::exception &e) {
                        errors.record(e);
                    }
                }
            });
        }
        for (auto &th : threads)
            th.join();
        double secs = seconds_since(tm);
        std::printf("[%s] %.1f s, %.0f requests/s; %s\n", mode_name(mode), secs,
                    conns * rounds / secs, st.summary().c_str());
        errors.print(mode_name(mode));

        pqxx::connection c(conninfo(db));
        std::string label = std::string("S1 ") + mode_name(mode);
        effect_invariants(c, label, scope, rounds, inv);
        // Every connection got the key's one payment id back.
        long same = agreement(answers, payment_ids(c, scope)).answers;
        inv.push_back({label + ": answers = the key's payment id", rounds, (long)rounds * conns,
                       same, same == (long)rounds * conns, ""});
        inv.push_back({label + ": claims won (client-side count)", rounds, rounds,
                       st.claimed + st.reclaimed, st.claimed + st.reclaimed == rounds,
                       "errors: " + std::to_string(errors.count())});
    }
    drop_test_db(db);
    rc = print_invariants("concurrency_test", inv, seconds_since(t0));
    return rc;
}
