// Scenario 2 of the fault suite (the incident): clients talk to the server through a
// fault-injecting TCP proxy on loopback (test/programs/proxy.hpp) that adds latency and cuts 50%
// of the connections, some of them after the server committed but before its reply reached the
// client. Several clients send each key at once, each on a new connection per request, and retry
// with the same key until answered. Every key must end with exactly one charge, and every client
// must end with that charge's payment id.
//   --ci    120 keys x 3 clients per mode
//   --soak  1200 keys x 3 clients per mode
//   --break blind handler without idempotency (retries charge again): must FAIL
#include "common.hpp"
#include "proxy.hpp"

using namespace idemtest;

int main(int argc, char **argv) {
    Options opt = parse_options(argc, argv);
    const int keys = opt.soak ? 1200 : 120;
    // --break uses one client per key, so every duplicate comes from a retry after a cut.
    const int clients_per_key = opt.broken ? 1 : 3;
    const int batch = 20; // keys in flight at once (batch x clients_per_key threads)
    const std::string db = "faults_test";
    auto t0 = std::chrono::steady_clock::now();

    ProxyConfig pc;
    pc.upstream_port = pg_port();
    pc.latency_min_ms = 0;
    pc.latency_max_ms = 4;
    pc.cut_probability = 0.5;
    Proxy proxy(pc);
    proxy.start();
    std::printf("faults_test: proxy 127.0.0.1:%d -> 127.0.0.1:%d, latency 0-%d ms per chunk, "
                "cuts %.0f%% of connections; %d keys x %d clients per mode%s\n",
                proxy.port(), pc.upstream_port, pc.latency_max_ms, pc.cut_probability * 100, keys,
                clients_per_key, opt.broken ? " (--break: blind handler)" : "");
    if (!setup_test_db(db))
        return 2;

    std::vector<Invariant> inv;
    std::vector<Mode> modes = modes_to_run(opt, Mode::Blind);
    for (Mode mode : modes) {
        std::string scope = std::string("faults-") + mode_name(mode);
        Stats st;
        long cuts_before = proxy.total_cuts(), commit_cuts_before = proxy.cuts[Proxy::AfterCommit];
        long stmt_cuts_before = proxy.cuts[Proxy::AfterStatement];
        std::vector<std::vector<std::string>> answers(keys,
                                                      std::vector<std::string>(clients_per_key));
        ErrorLog errors;
        auto tm = std::chrono::steady_clock::now();
        for (int b0 = 0; b0 < keys; b0 += batch) {
            std::vector<std::thread> threads;
            for (int k = b0; k < std::min(keys, b0 + batch); k++)
                for (int c = 0; c < clients_per_key; c++)
                    threads.emplace_back([&, k, c] {
                        Client cl(tcp_conninfo(db, proxy.port()));
                        cl.reconnect_each = true;
                        try {
                            answers[k][c] =
                                charge_until_answered(cl, mode, scope, "key-" + std::to_string(k),
                                                      500 + k, "1 second", st, 90);
                        } catch (const std::exception &e) {
                            errors.record(e);
                        }
                    });
            for (auto &th : threads)
                th.join();
        }
        double secs = seconds_since(tm);
        long cuts = proxy.total_cuts() - cuts_before;
        long commit_cuts = proxy.cuts[Proxy::AfterCommit] - commit_cuts_before;
        long stmt_cuts = proxy.cuts[Proxy::AfterStatement] - stmt_cuts_before;
        std::printf("[%s] %.1f s; proxy: %ld connections so far, %ld cuts in this mode (%ld after "
                    "COMMIT reached the proxy, %ld after a statement's CommandComplete); %s\n",
                    mode_name(mode), secs, proxy.accepted.load(), cuts, commit_cuts, stmt_cuts,
                    st.summary().c_str());
        errors.print(mode_name(mode));

        pqxx::connection c(conninfo(db)); // verification bypasses the proxy
        std::string label = std::string("S2 ") + mode_name(mode);
        effect_invariants(c, label, scope, keys, inv);
        long same = agreement(answers, payment_ids(c, scope)).keys;
        inv.push_back({label + ": all clients got the same payment id", keys, keys, same,
                       same == keys, "errors: " + std::to_string(errors.count())});
        // The run must actually have exercised the incident: commits cut after the server
        // committed (the client's commit was in doubt and it retried).
        inv.push_back({label + ": commits cut after server commit (>=1)", keys, 1, commit_cuts,
                       commit_cuts >= 1,
                       "client commits in doubt: " + std::to_string(st.in_doubt.load())});
    }
    proxy.stop();
    drop_test_db(db);
    return print_invariants("faults_test", inv, seconds_since(t0));
}
