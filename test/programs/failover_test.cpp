// The load and the checks of the failover stage (test/stages/failover.sh): a mixed load
// of every feature against a primary with a streaming standby, through a multi-host conninfo with
// target_session_attrs=read-write, so that the clients follow a failover (the stage SIGKILLs the
// primary and promotes the standby while this program runs). Every answer the server
// acknowledged is recorded; afterwards the acknowledged work is checked on the current primary:
//  - every acknowledged completion is there (completed, resource_id = the payment answered);
//  - a retry of every acknowledged key replays it (never claimed or reclaimed again);
//  - a two-phase claim once acknowledged is never claimed afresh (its record survived);
//  - the keys in flight at the failover (a transient error before their answer) were answered
//    afterwards by a replay, a reclaim after the lease, or a claim (the claim had not committed);
//  - effects exactly once: one payments row per completed record, the record's resource_id;
//  - idempotency.idem_fail (not retryable): every acknowledged failure is stored and replayed
//  (402);
//  - inbox: every acknowledged delivery (inline, queued, webhook) is present, each inline and
//    queued event has exactly one effect row (inbox_effects), the queue is drained;
//  - outbox: every acknowledged emit is present once and relayed exactly once (deliveries),
//    per key in emit order;
//  - purge: expired records were deleted (idem_purge and CALL idem_purge_loop) during the load.
// --expect sync asserts all of them (synchronous replication: nothing acknowledged may be lost);
// --expect async MEASURES the losses (printed as FIGURE lines) and asserts only what must hold
// inside the surviving database (effects exactly once, order, one row per event).
//   failover_test --conninfo CI --setup      the tables of the effects (once, on the primary)
//   failover_test --conninfo CI --seconds S --tag T --expect sync|async [--break]
// --break writes the effect of every 50th acknowledged key twice: the run must FAIL.
// Stderr: first errors; stdout: the invariant table and FIGURE lines (key=value).
#include "common.hpp"

#include <map>
#include <set>

using namespace idemtest;

namespace {

struct Args {
    std::string conninfo;
    std::string tag = "r";
    std::string expect = "sync";
    double seconds = 10;
    bool setup = false;
    bool broken = false;
};

Args parse(int argc, char **argv) {
    Args a;
    for (int i = 1; i < argc; i++) {
        std::string s = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "%s needs a value\n", s.c_str());
                std::exit(2);
            }
            return argv[++i];
        };
        if (s == "--conninfo")
            a.conninfo = next();
        else if (s == "--tag")
            a.tag = next();
        else if (s == "--expect")
            a.expect = next();
        else if (s == "--seconds")
            a.seconds = std::atof(next().c_str());
        else if (s == "--setup")
            a.setup = true;
        else if (s == "--break")
            a.broken = true;
        else {
            std::fprintf(stderr,
                         "usage: %s --conninfo CI (--setup | --seconds S --tag T --expect "
                         "sync|async [--break])\n",
                         argv[0]);
            std::exit(2);
        }
    }
    if (a.conninfo.empty() || (a.expect != "sync" && a.expect != "async")) {
        std::fprintf(stderr, "failover_test: --conninfo and --expect sync|async are required\n");
        std::exit(2);
    }
    return a;
}

const char *const SECRET = "whsec_ZmFpbG92ZXItdGVzdC1zZWNyZXQtMzJieXRlcyE=";

// What the server acknowledged, shared by the threads.
struct Acked {
    std::mutex m;
    std::map<std::string, std::pair<std::string, int>> payments; // key -> (payment id, amount)
    std::map<std::string, int> failures;                         // key -> amount
    std::set<std::pair<std::string, std::string>> inbox;         // (consumer, event id)
    std::map<std::string, std::pair<std::string, long>> outbox;  // event id -> (key, n)
    std::map<std::string, std::string> inflight; // key -> outcome that answered it after an error
    std::atomic<long> replay_checks{0}, replay_wrong{0}, claims_lost{0}, purged{0}, purge_calls{0},
        relayed{0}, inbox_done{0}, fodder{0}, doubled{0};
};

bool transient_or_log(const std::exception &e, ErrorLog &errors) {
    if (is_transient(e))
        return true;
    errors.record(e);
    return false;
}

// A payment request of key sent until answered (charge_once of common.hpp); records the
// outcome that answered it if a transient error came first, and a lost two-phase claim.
void pay(Client &cl, Mode mode, const std::string &key, int amount, Acked &ack, ErrorLog &errors,
         bool broken) {
    Stats st;
    bool claim_acked = false, had_error = false;
    Hook hook = [&](const char *p) {
        if (std::strcmp(p, "claimed") == 0) {
            if (mode == Mode::TwoPhase)
                claim_acked = true; // the claim committed and was answered
            sleep_ms(rand_int(0, 3));
        }
    };
    auto start = std::chrono::steady_clock::now();
    for (int attempt = 0; seconds_since(start) < 90; attempt++) {
        long claimed0 = st.claimed, reclaimed0 = st.reclaimed, replayed0 = st.replayed;
        bool was_acked = claim_acked;
        try {
            std::string pid = charge_once(cl.get(), mode, "pay", key, amount, "1 second", st, hook);
            if (was_acked && st.claimed > claimed0)
                ack.claims_lost++; // an acknowledged claim's record is gone
            if (pid.empty()) {
                backoff(std::min(attempt, 4), 5, 100);
                continue;
            }
            std::lock_guard<std::mutex> g(ack.m);
            ack.payments[key] = {pid, amount};
            if (had_error)
                ack.inflight[key] = st.replayed > replayed0     ? "replayed"
                                    : st.reclaimed > reclaimed0 ? "reclaimed"
                                                                : "claimed";
            if (broken && ack.payments.size() % 50 == 0) { // --break: the effect twice
                pqxx::work w(cl.get());
                idem::db::exec_params(w, PAY_SQL, "pay", key, amount);
                w.commit();
                ack.doubled++;
            }
            return;
        } catch (const std::exception &e) {
            if (!transient_or_log(e, errors))
                return;
            had_error = true;
            cl.reset();
            backoff(std::min(attempt, 6), 10, 300);
        }
    }
    errors.record(std::runtime_error("key " + key + " not answered within 90 s"));
}

// A retry of an acknowledged key right away: must replay the same payment.
void replay_check(Client &cl, const std::string &key, int amount, const std::string &pid,
                  Acked &ack) {
    try {
        pqxx::nontransaction n(cl.get());
        auto r = idem::db::exec_params1(n, CLAIM_SQL, "pay", key, amount, "1 second");
        ack.replay_checks++;
        if (r[0].as<std::string>() != "replayed" || r[2].is_null() || r[2].as<std::string>() != pid)
            ack.replay_wrong++;
    } catch (const std::exception &e) {
        cl.reset(); // lost in the failover: nothing to check
    }
}

// idem_fail, not retryable, in the claim's transaction: the failure is the key's answer.
void fail_key(Client &cl, const std::string &key, int amount, Acked &ack, ErrorLog &errors) {
    for (int attempt = 0; attempt < 300; attempt++) {
        try {
            pqxx::work w(cl.get());
            auto r = idem::db::exec_params1(w, CLAIM_SQL, "fail", key, amount, "1 second");
            std::string outcome = r[0].as<std::string>();
            if (outcome == "claimed" || outcome == "reclaimed")
                idem::db::exec_params(w,
                                      "SELECT idempotency.idem_fail('fail', $1, $2, false, "
                                      "'{\"error\": \"declined\"}', 402)",
                                      key, r[1].as<int>());
            else if (outcome != "replayed") {
                w.abort();
                backoff(std::min(attempt, 4), 5, 100);
                continue;
            }
            w.commit();
            std::lock_guard<std::mutex> g(ack.m);
            ack.failures[key] = amount;
            return;
        } catch (const std::exception &e) {
            if (!transient_or_log(e, errors))
                return;
            cl.reset();
            backoff(std::min(attempt, 6), 10, 300);
        }
    }
}

// Sends f (one delivery: an autocommit statement or a transaction) until it is answered.
template <class F> bool until_answered(Client &cl, ErrorLog &errors, F &&f) {
    for (int attempt = 0; attempt < 300; attempt++) {
        try {
            f(cl.get());
            return true;
        } catch (const std::exception &e) {
            if (!transient_or_log(e, errors))
                return false;
            cl.reset();
            backoff(std::min(attempt, 6), 10, 300);
        }
    }
    return false;
}

// Inbox and webhooks: inline receive with its effect, queued receive, a verified webhook.
void inbox_work(Client &cl, const std::string &id, int kind, Acked &ack, ErrorLog &errors) {
    std::string consumer = kind == 0 ? "inline" : kind == 1 ? "queued" : "hooks";
    bool ok = until_answered(cl, errors, [&](pqxx::connection &c) {
        std::string payload = "{\"event\": \"" + id + "\"}";
        if (kind == 0) {
            pqxx::work w(c);
            auto o = idem::db::exec_params1(w,
                                            "SELECT idempotency.idem_inbox_receive('inline', $1, "
                                            "sha256(convert_to($2, 'UTF8')))",
                                            id, payload)[0]
                         .as<std::string>();
            if (o == "new")
                idem::db::exec_params(w, "INSERT INTO inbox_effects VALUES ('inline', $1)", id);
            else if (o != "duplicate")
                throw std::runtime_error("inline receive of " + id + ": " + o);
            w.commit();
        } else if (kind == 1) {
            pqxx::nontransaction n(c);
            auto o = idem::db::exec_params1(n,
                                            "SELECT idempotency.idem_inbox_receive('queued', $1, "
                                            "sha256(convert_to($2, 'UTF8')), true, 'evt', "
                                            "convert_to($2, 'UTF8'))",
                                            id, payload)[0]
                         .as<std::string>();
            if (o != "new" && o != "duplicate")
                throw std::runtime_error("queued receive of " + id + ": " + o);
        } else {
            pqxx::nontransaction n(c);
            auto o = idem::db::exec_params1(
                         n,
                         "SELECT idempotency.idem_webhook_receive('hooks', 'standard', ARRAY[$1], "
                         "$2, $3, "
                         "idempotency.idem_webhook_sign_standard($1, $2, ts, $3), ts) "
                         "FROM (SELECT extract(epoch FROM now())::bigint::text AS ts) t",
                         SECRET, id, payload)[0]
                         .as<std::string>();
            if (o != "new" && o != "duplicate")
                throw std::runtime_error("webhook " + id + ": " + o);
        }
    });
    if (ok) {
        std::lock_guard<std::mutex> g(ack.m);
        ack.inbox.insert({consumer, id});
    }
}

// One outbox emit of aggregate key (or none), with a dedup_key every 5th; n orders a key's emits.
void emit(Client &cl, const std::string &key, long n, bool dedup, const std::string &tag,
          Acked &ack, ErrorLog &errors) {
    std::string id;
    bool ok = until_answered(cl, errors, [&](pqxx::connection &c) {
        pqxx::work w(c);
        std::string dk = dedup ? tag + "-d" + std::to_string(n) : "";
        id = idem::db::exec_params1(w,
                                    "SELECT idempotency.idem_outbox_emit('orders', "
                                    "jsonb_build_object('n', $1::bigint, 'key', "
                                    "$2::text), NULLIF($2, ''), NULLIF($3, ''))",
                                    n, key, dk)[0]
                 .as<std::string>();
        w.commit();
    });
    if (ok) {
        std::lock_guard<std::mutex> g(ack.m);
        ack.outbox[id] = {key, n};
    }
}

// The relay and the inbox worker: one batch of each, delivered into deliveries / inbox_effects
// in the transaction that marks them done. Returns how many events it handled.
long relay_once(Client &cl, Acked &ack, ErrorLog &errors) {
    long handled = 0;
    try {
        pqxx::work w(cl.get());
        auto r = w.exec("SELECT event_id, attempt, key, payload->>'n' "
                        "FROM idempotency.idem_outbox_next('orders', 50, '2 seconds')");
        for (pqxx::result::size_type i = 0; i < r.size(); i++) {
            pqxx::row row = idem::db::row_at(r, i);
            std::string id = row[0].as<std::string>();
            idem::db::exec_params(w,
                                  "INSERT INTO deliveries (event_id, key, n) "
                                  "VALUES ($1::uuid, $2, $3::bigint)",
                                  id, row[2].is_null() ? std::string() : row[2].as<std::string>(),
                                  row[3].as<std::string>());
            idem::db::exec_params(w, "SELECT idempotency.idem_outbox_done($1::uuid, $2)", id,
                                  row[1].as<int>());
        }
        w.commit();
        handled += static_cast<long>(r.size());
        ack.relayed += static_cast<long>(r.size());
    } catch (const pqxx::sql_error &e) {
        std::string s = idem::db::sqlstate(e);
        if (s != "IK002" && s != "IK003" && !transient_or_log(e, errors))
            return -1;
        cl.reset();
    } catch (const std::exception &e) {
        if (!transient_or_log(e, errors))
            return -1;
        cl.reset();
    }
    try {
        pqxx::work w(cl.get());
        auto r = w.exec(
            "SELECT event_id, attempt FROM idempotency.idem_inbox_next('queued', 50, '2 seconds')");
        for (pqxx::result::size_type i = 0; i < r.size(); i++) {
            pqxx::row row = idem::db::row_at(r, i);
            std::string id = row[0].as<std::string>();
            idem::db::exec_params(w, "INSERT INTO inbox_effects VALUES ('queued', $1)", id);
            std::string o =
                idem::db::exec_params1(w, "SELECT idempotency.idem_inbox_done('queued', $1, $2)",
                                       id, row[1].as<int>())[0]
                    .as<std::string>();
            if (o != "done")
                throw std::runtime_error("idem_inbox_done of " + id + ": " + o);
        }
        w.commit();
        handled += static_cast<long>(r.size());
        ack.inbox_done += static_cast<long>(r.size());
    } catch (const pqxx::sql_error &e) {
        std::string s = idem::db::sqlstate(e);
        if (s != "IK002" && s != "IK003" && !transient_or_log(e, errors))
            return -1;
        cl.reset();
    } catch (const std::exception &e) {
        if (!transient_or_log(e, errors))
            return -1;
        cl.reset();
    }
    return handled;
}

// Purge fodder: keys with a 1 s TTL, then idempotency.idem_purge() or CALL
// idempotency.idem_purge_loop() in turn.
void purge_once(Client &cl, const std::string &tag, long i, Acked &ack) {
    try {
        pqxx::nontransaction n(cl.get());
        std::string key = tag + "-f" + std::to_string(i);
        auto r =
            idem::db::exec_params1(n,
                                   "SELECT outcome, attempt FROM idempotency.idem_claim('fodder', "
                                   "$1, NULL, '1 second', '1 second')",
                                   key);
        if (r[0].as<std::string>() == "claimed") {
            idem::db::exec_params(n, "SELECT idempotency.idem_complete('fodder', $1, $2, 'r')", key,
                                  r[1].as<int>());
            ack.fodder++;
        }
        if (i % 10 == 0) {
            long d =
                i % 20 == 0
                    ? n.exec("SELECT idempotency.idem_purge()")[0][0].as<long>()
                    : n.exec("CALL idempotency.idem_purge_loop(max_duration => '2 seconds')")[0][0]
                          .as<long>();
            ack.purged += d;
            ack.purge_calls++;
        }
    } catch (const std::exception &e) {
        cl.reset(); // the fodder is not checked key by key
    }
}

long one_long(pqxx::transaction_base &n, const std::string &sql) {
    return idem::db::exec1(n, sql)[0].as<long>();
}

std::string text_array(const std::vector<std::string> &v) {
    std::string s = "{";
    for (size_t i = 0; i < v.size(); i++)
        s += (i ? "," : "") + std::string("\"") + v[i] + "\"";
    return s + "}";
}

int setup(const Args &a) {
    try {
        pqxx::connection c(a.conninfo);
        pqxx::nontransaction n(c);
        n.exec("CREATE TABLE payments (id bigserial PRIMARY KEY, scope text NOT NULL, key text NOT "
               "NULL, payment_id text NOT NULL, amount integer NOT NULL, created_at timestamptz "
               "NOT NULL DEFAULT clock_timestamp())");
        n.exec("CREATE INDEX ON payments (scope, key)");
        n.exec("CREATE TABLE inbox_effects (consumer text NOT NULL, event_id text NOT NULL, "
               "id bigserial PRIMARY KEY)");
        n.exec("CREATE TABLE deliveries (id bigserial PRIMARY KEY, event_id uuid NOT NULL, "
               "key text NOT NULL, n bigint NOT NULL)");
        n.exec("CREATE INDEX ON deliveries (event_id)");
    } catch (const std::exception &e) {
        std::fprintf(stderr, "failover_test: setup failed: %s\n", e.what());
        return 2;
    }
    return 0;
}

} // namespace

int main(int argc, char **argv) {
    Args a = parse(argc, argv);
    if (a.setup)
        return setup(a);
    const bool sync = a.expect == "sync";
    const int payers = 4;
    auto t0 = std::chrono::steady_clock::now();
    std::printf(
        "failover_test %s: %d payment clients (single-tx and two-phase, 1 in 10 idem_fail), "
        "inbox + webhooks, outbox emitter, relay + inbox worker, purge; %.0f s; expect %s%s\n",
        a.tag.c_str(), payers, a.seconds, a.expect.c_str(),
        a.broken ? " (--break: every 50th effect written twice)" : "");
    std::fflush(stdout);
    Acked ack;
    ErrorLog errors;
    std::atomic<bool> stop{false}, producers_done{false};
    std::vector<std::thread> th;
    for (int t = 0; t < payers; t++)
        th.emplace_back([&, t] {
            Client cl(a.conninfo);
            Mode mode = t % 2 ? Mode::TwoPhase : Mode::Single;
            for (long i = 0; !stop; i++) {
                std::string key = a.tag + "-" + std::to_string(t) + "-" + std::to_string(i);
                int amount = 100 + static_cast<int>(i % 900);
                if (i % 10 == 9) {
                    fail_key(cl, key, amount, ack, errors);
                    continue;
                }
                pay(cl, mode, key, amount, ack, errors, a.broken);
                if (i % 4 == 0) {
                    std::string pid;
                    {
                        std::lock_guard<std::mutex> g(ack.m);
                        auto it = ack.payments.find(key);
                        if (it != ack.payments.end())
                            pid = it->second.first;
                    }
                    if (!pid.empty())
                        replay_check(cl, key, amount, pid, ack);
                }
            }
        });
    th.emplace_back([&] { // inbox and webhooks
        Client cl(a.conninfo);
        for (long i = 0; !stop; i++)
            inbox_work(cl, a.tag + "-e" + std::to_string(i), static_cast<int>(i % 3), ack, errors);
    });
    th.emplace_back([&] { // outbox: 8 aggregate keys, every 4th emit without a key
        Client cl(a.conninfo);
        std::vector<long> n(8, 0);
        for (long i = 0; !stop; i++) {
            int k = static_cast<int>(i % 9);
            std::string key = k == 8 ? "" : a.tag + "-agg" + std::to_string(k);
            emit(cl, key, k == 8 ? i : ++n[k], i % 5 == 0, a.tag + std::to_string(i), ack, errors);
        }
    });
    th.emplace_back([&] { // relay + inbox worker, until the producers stopped and all is drained
        Client cl(a.conninfo);
        std::chrono::steady_clock::time_point drain_start;
        for (;;) {
            long h = relay_once(cl, ack, errors);
            if (h < 0)
                return;
            if (h > 0 || !producers_done) {
                sleep_ms(h > 0 ? 0 : 20);
                continue;
            }
            // Drained when nothing is left undone: events leased on the old primary come
            // back when their lease (2 s) runs out.
            if (drain_start == std::chrono::steady_clock::time_point())
                drain_start = std::chrono::steady_clock::now();
            try {
                pqxx::nontransaction n(cl.get());
                if (one_long(n, "SELECT (SELECT count(*) FROM idempotency.outbox WHERE status <> "
                                "'done') + (SELECT count(*) FROM idempotency.inbox WHERE consumer "
                                "= 'queued' AND status <> 'done')") == 0)
                    return;
            } catch (const std::exception &e) {
                cl.reset();
            }
            if (seconds_since(drain_start) > 60)
                return; // the checks say what is left
            sleep_ms(200);
        }
    });
    th.emplace_back([&] { // purge
        Client cl(a.conninfo);
        for (long i = 0; !stop; i++) {
            purge_once(cl, a.tag, i, ack);
            sleep_ms(50);
        }
    });
    while (seconds_since(t0) < a.seconds)
        sleep_ms(100);
    stop = true;
    for (size_t i = 0; i < th.size(); i++)
        if (i != th.size() - 2)
            th[i].join();
    producers_done = true;
    th[th.size() - 2].join();
    std::printf(
        "load: %zu payments, %zu failures, %zu inbox deliveries, %zu outbox emits acknowledged; "
        "%ld relayed, %ld queued inbox events done, %ld replay checks, %ld purge calls "
        "deleted %ld; %.1f s\n",
        ack.payments.size(), ack.failures.size(), ack.inbox.size(), ack.outbox.size(),
        ack.relayed.load(), ack.inbox_done.load(), ack.replay_checks.load(), ack.purge_calls.load(),
        ack.purged.load(), seconds_since(t0));
    errors.print("load");

    std::vector<Invariant> inv;
    auto row = [&](const std::string &what, long expected, long observed, bool assert_it,
                   const std::string &note = "") {
        bool pass = !assert_it || expected == observed;
        inv.push_back({what, static_cast<long>(expected), expected, observed, pass,
                       assert_it ? note : "MEASURED (async) " + note});
    };
    try {
        Client vc(a.conninfo);
        pqxx::connection &c = *retry([&] { return &vc.get(); }, 60);
        pqxx::nontransaction n(c);
        // Payments: acknowledged completions kept, effects exactly once.
        std::map<std::string, std::pair<std::string, std::string>> rec; // key -> (status, rid)
        {
            auto r = n.exec("SELECT key, status, coalesce(resource_id, '') FROM "
                            "idempotency.records WHERE scope = 'pay'");
            for (auto x : r)
                rec[x[0].as<std::string>()] = {x[1].as<std::string>(), x[2].as<std::string>()};
        }
        long kept = 0;
        std::vector<std::string> keys, amounts;
        for (auto &p : ack.payments) {
            auto it = rec.find(p.first);
            kept += it != rec.end() && it->second.first == "completed" &&
                    it->second.second == p.second.first;
            keys.push_back(p.first);
            amounts.push_back(std::to_string(p.second.second));
        }
        long acked = static_cast<long>(ack.payments.size());
        row("acknowledged completions kept", acked, kept, sync, "resource_id = the answer");
        long completed = one_long(n, "SELECT count(*) FROM idempotency.records WHERE scope = 'pay' "
                                     "AND status = 'completed'");
        long effects = one_long(n, "SELECT count(*) FROM payments WHERE scope = 'pay'");
        long twice = one_long(n, "SELECT count(*) FROM (SELECT key FROM payments WHERE scope = "
                                 "'pay' GROUP BY key HAVING count(*) > 1) d");
        long matched = one_long(
            n, "SELECT count(*) FROM idempotency.records r JOIN payments p ON p.scope = r.scope "
               "AND p.key = r.key AND p.payment_id = r.resource_id WHERE r.scope = 'pay' AND "
               "r.status = 'completed'");
        row("effects (payments rows) = completed records", completed, effects, true,
            "keys with 2+ effects: " + std::to_string(twice));
        row("keys with 2+ effects", 0, twice, true);
        row("completed records whose payment is the resource_id", completed, matched, true);
        // A retry of every acknowledged key, now, on the current primary.
        long replayed = 0, claimed = 0, reclaimed = 0, other = 0;
        {
            auto r = idem::db::exec_params(
                n,
                "SELECT c.outcome, c.resource_id IS NOT DISTINCT FROM pid FROM unnest($1::text[], "
                "$2::int[], $3::text[]) AS u(k, amount, pid), LATERAL "
                "idempotency.idem_claim('pay', k, "
                "sha256(convert_to(k || ':' || amount::text, 'UTF8')), '1 second') c",
                text_array(keys),
                "{" +
                    [&] {
                        std::string s;
                        for (size_t i = 0; i < amounts.size(); i++)
                            s += (i ? "," : "") + amounts[i];
                        return s;
                    }() +
                    "}",
                text_array([&] {
                    std::vector<std::string> v;
                    for (auto &p : ack.payments)
                        v.push_back(p.second.first);
                    return v;
                }()));
            for (auto x : r) {
                std::string o = x[0].as<std::string>();
                if (o == "replayed" && x[1].as<bool>())
                    replayed++;
                else if (o == "claimed")
                    claimed++;
                else if (o == "reclaimed")
                    reclaimed++;
                else
                    other++;
            }
        }
        row("retries of acknowledged keys that replay it", acked, replayed, sync,
            "claimed again: " + std::to_string(claimed) +
                ", reclaimed: " + std::to_string(reclaimed) + ", other: " + std::to_string(other));
        row("retries right after the answer that replayed it", ack.replay_checks,
            ack.replay_checks - ack.replay_wrong, true);
        row("acknowledged two-phase claims claimed afresh", 0, ack.claims_lost, sync,
            "the claim's record was lost");
        long inflight_claimed = 0, inflight_reclaimed = 0, inflight_replayed = 0;
        for (auto &f : ack.inflight)
            (f.second == "claimed"     ? inflight_claimed
             : f.second == "reclaimed" ? inflight_reclaimed
                                       : inflight_replayed)++;
        row("in-flight keys answered after the failover", static_cast<long>(ack.inflight.size()),
            inflight_claimed + inflight_reclaimed + inflight_replayed, true,
            "claimed " + std::to_string(inflight_claimed) + ", reclaimed " +
                std::to_string(inflight_reclaimed) + ", replayed " +
                std::to_string(inflight_replayed));
        // idem_fail.
        long failed_kept = 0;
        {
            auto r = n.exec("SELECT key FROM idempotency.records WHERE scope = 'fail' AND status "
                            "= 'failed' AND NOT retryable AND response_status = 402");
            std::set<std::string> f;
            for (auto x : r)
                f.insert(x[0].as<std::string>());
            for (auto &k : ack.failures)
                failed_kept += f.count(k.first);
        }
        row("acknowledged failures (idem_fail) kept", static_cast<long>(ack.failures.size()),
            failed_kept, sync, "status failed, 402, not retryable");
        // Inbox.
        std::set<std::pair<std::string, std::string>> present;
        std::map<std::pair<std::string, std::string>, long> effect_n;
        {
            auto r = n.exec("SELECT consumer, event_id, status FROM idempotency.inbox");
            for (auto x : r)
                present.insert({x[0].as<std::string>(), x[1].as<std::string>()});
            auto e = n.exec("SELECT consumer, event_id, count(*) FROM inbox_effects GROUP BY 1, 2");
            for (auto x : e)
                effect_n[{x[0].as<std::string>(), x[1].as<std::string>()}] = x[2].as<long>();
        }
        long in_kept = 0;
        for (auto &d : ack.inbox)
            in_kept += present.count(d);
        row("acknowledged inbox deliveries present", static_cast<long>(ack.inbox.size()), in_kept,
            sync, "inline, queued, webhooks");
        long eff_twice = 0;
        for (auto &e : effect_n)
            eff_twice += e.second > 1;
        row("inbox events with 2+ effects", 0, eff_twice, true);
        long with_effect = one_long(n, "SELECT count(*) FROM idempotency.inbox WHERE consumer IN "
                                       "('inline', 'queued')");
        row("inbox events (inline, queued) with one effect row", with_effect,
            static_cast<long>(effect_n.size()), true);
        row("queued inbox events not done after the drain", 0,
            one_long(n, "SELECT count(*) FROM idempotency.inbox WHERE consumer = 'queued' AND "
                        "status <> 'done'"),
            true);
        // Outbox.
        std::map<std::string, long> delivered;
        long order_breaks = 0, out_present = 0, out_delivered_once = 0, resent = 0;
        {
            auto r = n.exec("SELECT event_id::text, count(*) FROM idempotency.outbox GROUP BY 1");
            std::set<std::string> ids;
            for (auto x : r)
                if (x[1].as<long>() == 1)
                    ids.insert(x[0].as<std::string>());
            auto d = n.exec("SELECT event_id::text, count(*) FROM deliveries GROUP BY 1");
            for (auto x : d)
                delivered[x[0].as<std::string>()] = x[1].as<long>();
            for (auto &o : ack.outbox) {
                out_present += ids.count(o.first);
                auto it = delivered.find(o.first);
                out_delivered_once += it != delivered.end() && it->second == 1;
            }
            // n < prev: an emit sent again after a commit in doubt (no dedup_key) may be there
            // twice with the same n, relayed one after the other; that is not out of order.
            order_breaks = one_long(
                n, "SELECT count(*) FROM (SELECT n, lag(n) OVER (PARTITION BY key ORDER BY id) AS "
                   "prev FROM deliveries WHERE key <> '') s WHERE n < prev");
            resent = one_long(n, "SELECT count(*) FROM (SELECT 1 FROM deliveries WHERE key <> '' "
                                 "GROUP BY key, n HAVING count(*) > 1) s");
        }
        long dup_deliveries = 0;
        for (auto &d : delivered)
            dup_deliveries += d.second > 1;
        row("acknowledged outbox emits present once", static_cast<long>(ack.outbox.size()),
            out_present, sync);
        row("acknowledged outbox emits relayed exactly once", static_cast<long>(ack.outbox.size()),
            out_delivered_once, sync);
        row("outbox events relayed twice", 0, dup_deliveries, true);
        row("outbox events not done after the drain", 0,
            one_long(n, "SELECT count(*) FROM idempotency.outbox WHERE status <> 'done'"), true);
        row("per-key order breaks in the relayed events", 0, order_breaks, true,
            "emits sent again after a commit in doubt: " + std::to_string(resent));
        row("purge calls that deleted expired records", 1, ack.purged > 0 ? 1 : 0, true,
            std::to_string(ack.purged.load()) + " rows deleted in " +
                std::to_string(ack.purge_calls.load()) + " calls");
        row("client errors (not a lost connection)", 0, errors.count(), true);
        std::printf("FIGURE tag=%s expect=%s acked_completions=%ld lost_completions=%ld "
                    "lost_then_claimed_again=%ld lost_then_reclaimed=%ld claims_lost=%ld "
                    "acked_failures=%zu lost_failures=%ld acked_inbox=%zu lost_inbox=%ld "
                    "acked_outbox=%zu lost_outbox=%ld inflight=%zu\n",
                    a.tag.c_str(), a.expect.c_str(), acked, acked - kept, claimed, reclaimed,
                    ack.claims_lost.load(), ack.failures.size(),
                    static_cast<long>(ack.failures.size()) - failed_kept, ack.inbox.size(),
                    static_cast<long>(ack.inbox.size()) - in_kept, ack.outbox.size(),
                    static_cast<long>(ack.outbox.size()) - out_present, ack.inflight.size());
    } catch (const std::exception &e) {
        std::fprintf(stderr, "failover_test: verification failed: %s\n", e.what());
        inv.push_back({"verification", 0, 1, 0, false, e.what()});
    }
    return print_invariants(("failover_test " + a.tag).c_str(), inv, seconds_since(t0));
}
