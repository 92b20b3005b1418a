// The payment demo: a POST /v1/payments handler built on idem_claim / idem_complete, played
// through the double-charge incident with real concurrent connections (one thread and one
// pqxx::connection per client, a barrier so they start together, a forked worker process that is
// SIGKILLed). Prints scenario | expected | observed | result and exits 1 on any FAIL.
//
//   payment_demo            use the database of the libpq environment (PGHOST, PGPORT, PGUSER,
//                           PGDATABASE): CREATE EXTENSION IF NOT EXISTS, (re)create table payments
//   payment_demo --ci       use a fresh database payment_demo (dropped after a pass)
//   payment_demo --break    the naive handler (no idem_claim): must print FAIL rows and exit 1;
//                           also IDEM_DEMO_BREAK=1
#include "common.hpp" // idem::db: the libpqxx calls that differ between versions; Barrier
#include "results_table.hpp"

#include <pqxx/pqxx>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

const char *const SCOPE = "POST /v1/payments";
bool g_break = false;        // --break: the naive handler, no idem_claim
bool g_have_idem_fp = false; // idempotency.idem_fingerprint(text) exists in the installed extension
std::string g_fp_sql;        // SQL expression: the fingerprint of request body $1
std::string g_conninfo;      // "" = libpq environment; --ci: "dbname=payment_demo"
std::atomic<long> g_db_calls{0}; // statements sent by handle_payment

// ---------------------------------------------------------------------------------------------
// The service: what a real HTTP handler does with the extension.

struct Answer {
    int http = 0;           // HTTP status sent to the client
    std::string outcome;    // idem_claim outcome (or "naive", "bad_request", "error")
    int attempt = 0;        // fencing token of this request's claim
    std::string payment_id; // payments.id the answer refers to
    std::string body;       // response body (JSON)
    int retry_after = 0;    // Retry-After header of a 409, seconds
};

enum class Mode {
    Single,  // BEGIN; claim; INSERT payment; complete; COMMIT
    TwoPhase // claim (committed); call the provider; INSERT payment + complete (committed)
};

struct HandlerOptions {
    Mode mode = Mode::Single;
    std::string lease = "30 seconds";
    // The payment provider call, made after the claim and before the payment is recorded;
    // gets the claim's attempt. The demo uses it to kill a worker or to hold one.
    std::function<void(int)> provider;
};

template <typename... Args>
pqxx::result q(pqxx::transaction_base &t, const std::string &sql, Args &&...args) {
    ++g_db_calls;
    return idem::db::exec_params(t, sql, std::forward<Args>(args)...);
}

std::string get(const pqxx::row &r, int i) {
    return r[i].is_null() ? "" : r[i].c_str();
}

// INSERT INTO payments ... RETURNING id and the response body; then idem_complete with it.
void record_payment(pqxx::transaction_base &t, const std::string &key, const std::string &body,
                    int attempt, bool complete, Answer *a) {
    pqxx::row p = idem::db::row_at(
        q(t,
          "INSERT INTO payments (idempotency_key, customer, amount_cents, currency) "
          "SELECT $1, b->>'customer', (b->>'amount_cents')::bigint, b->>'currency' "
          "FROM (SELECT $2::jsonb AS b) s "
          "RETURNING id::text, jsonb_build_object('id', id, 'object', 'payment', "
          "'status', 'succeeded', 'amount_cents', amount_cents, 'currency', "
          "currency, 'customer', customer)::text",
          key, body),
        0);
    a->payment_id = get(p, 0);
    a->body = get(p, 1);
    if (complete)
        q(t, "SELECT idempotency.idem_complete($1, $2, $3::integer, $4, $5::jsonb, 201)", SCOPE,
          key, std::to_string(attempt), a->payment_id, a->body);
    a->http = 201;
}

// The naive handler of --break: no Idempotency-Key handling at all.
Answer handle_naive(pqxx::connection &c, const std::string &key, const std::string &body,
                    const HandlerOptions &o) {
    Answer a;
    a.outcome = "naive";
    if (o.provider)
        o.provider(0);
    pqxx::work t(c);
    record_payment(t, key, body, 0, false, &a);
    t.commit();
    return a;
}

// POST /v1/payments with header Idempotency-Key: key and request body body_text.
Answer handle_payment(pqxx::connection &c, const std::string &key, const std::string &body_text,
                      const HandlerOptions &o = {}) {
    Answer a;
    if (key.empty()) { // 400 without touching the database
        a.http = 400;
        a.outcome = "bad_request";
        a.body = R"({"error":"the Idempotency-Key header is required"})";
        return a;
    }
    try {
        if (g_break)
            return handle_naive(c, key, body_text, o);
        auto t = std::make_unique<pqxx::work>(c);
        std::string fp =
            q(*t, "SELECT encode(" + g_fp_sql + ", 'hex')", body_text).at(0)[0].c_str();
        pqxx::row r = idem::db::row_at(
            q(*t,
              "SELECT c.outcome, coalesce(c.attempt, 0), c.resource_id, c.response::text, "
              "coalesce(c.response_status, 0), CASE WHEN c.lease_expires_at IS NULL THEN 1 ELSE "
              "greatest(1, ceil(extract(epoch FROM c.lease_expires_at - clock_timestamp())))::int "
              "END FROM idempotency.idem_claim($1, $2, decode($3, 'hex'), $4::interval) c",
              SCOPE, key, fp, o.lease),
            0);
        a.outcome = get(r, 0);
        a.attempt = r[1].as<int>();
        if (a.outcome == "claimed" || a.outcome == "reclaimed") {
            if (o.mode == Mode::TwoPhase) {
                t->commit(); // the claim is visible to everyone: duplicates get in_progress
                t.reset();
                if (o.provider)
                    o.provider(a.attempt);
                t = std::make_unique<pqxx::work>(c);
            } else if (o.provider) {
                o.provider(a.attempt);
            }
            record_payment(*t, key, body_text, a.attempt, true, &a);
        } else if (a.outcome == "replayed") {
            a.payment_id = get(r, 2);
            a.body = get(r, 3);
            a.http = r[4].as<int>();
        } else if (a.outcome == "in_progress") {
            a.http = 409;
            a.retry_after = r[5].as<int>();
            a.body = R"({"error":"a request with this Idempotency-Key is being processed"})";
        } else if (a.outcome == "mismatch") {
            a.http = 422;
            a.body = R"({"error":"this Idempotency-Key was used with a different request"})";
        } else {
            a.http = 500;
        }
        t->commit();
    } catch (const pqxx::sql_error &e) {
        a.http = e.sqlstate() == "22P02" ? 400 : 500; // malformed JSON body: 400
        a.outcome = "error " + idem::db::sqlstate(e);
        a.body = e.what();
    }
    return a;
}

// ---------------------------------------------------------------------------------------------
// Harness: connections, a barrier, concurrent clients, the result table.

std::unique_ptr<pqxx::connection> connect() {
    auto c = std::make_unique<pqxx::connection>(g_conninfo);
    pqxx::nontransaction t(*c);
    t.exec("SET statement_timeout = '30s'");
    t.exec("SET application_name = 'payment_demo'");
    return c;
}

using idemtest::Barrier; // lets the n threads of concurrent() start together

// n clients, each on its own connection, send the same request at the same moment.
// after(i, answer) runs in client i's thread right after its answer arrived.
std::vector<Answer> concurrent(int n, const std::string &key, const std::string &body,
                               const HandlerOptions &o,
                               std::function<void(int, const Answer &)> after = nullptr) {
    std::vector<std::unique_ptr<pqxx::connection>> conns;
    for (int i = 0; i < n; i++)
        conns.push_back(connect());
    std::vector<Answer> answers(n);
    Barrier barrier(n);
    std::vector<std::thread> threads;
    for (int i = 0; i < n; i++)
        threads.emplace_back([&, i] {
            barrier.wait();
            try {
                answers[i] = handle_payment(*conns[i], key, body, o);
            } catch (const std::exception &e) {
                answers[i].outcome = std::string("exception: ") + e.what();
            }
            if (after)
                after(i, answers[i]);
        });
    for (auto &t : threads)
        t.join();
    return answers;
}

long payment_rows(pqxx::connection &c, const std::string &key) {
    pqxx::nontransaction t(c);
    return idem::db::exec_params(t, "SELECT count(*) FROM payments WHERE idempotency_key = $1", key)
        .at(0)[0]
        .as<long>();
}

long all_payment_rows(pqxx::connection &c) {
    pqxx::nontransaction t(c);
    return t.exec("SELECT count(*) FROM payments").at(0)[0].as<long>();
}

std::string describe(const Answer &a) {
    std::ostringstream s;
    s << a.http << ' ' << a.outcome;
    if (a.attempt > 0 && a.outcome != "replayed")
        s << " attempt " << a.attempt;
    if (!a.payment_id.empty())
        s << " id=" << a.payment_id;
    if (a.http == 409)
        s << " Retry-After: " << a.retry_after;
    return s.str();
}

// "201 claimed x1, 201 replayed x9" and the set of payment ids.
// Payment ids in numeric order.
struct ByNumber {
    bool operator()(const std::string &a, const std::string &b) const {
        return a.size() != b.size() ? a.size() < b.size() : a < b;
    }
};
using IdSet = std::set<std::string, ByNumber>;

std::string summarize(const std::vector<Answer> &answers, IdSet *ids) {
    std::map<std::string, int> groups;
    for (const auto &a : answers) {
        groups[std::to_string(a.http) + " " + a.outcome]++;
        if (!a.payment_id.empty())
            ids->insert(a.payment_id);
    }
    std::string s;
    for (const auto &[k, n] : groups)
        s += (s.empty() ? "" : ", ") + k + " x" + std::to_string(n);
    return s;
}

std::string ids_text(const IdSet &ids) {
    std::string s = "{";
    for (const auto &i : ids)
        s += (s.size() > 1 ? "," : "") + i;
    return s + "}";
}

using demo::Row;
std::vector<Row> g_rows;

void report(const std::string &scenario, const std::string &expected, const std::string &observed,
            bool pass) {
    g_rows.push_back({scenario, expected, observed, pass});
    std::cout << "    -> " << (pass ? "PASS" : "FAIL") << ": " << observed << "\n" << std::flush;
}

void print_table() {
    demo::print_table(g_rows);
}

void banner(const std::string &s) {
    std::cout << "\n" << s << "\n" << std::flush;
}

// ---------------------------------------------------------------------------------------------
// The scenarios.

std::string g_run; // suffix that makes this run's keys unique
std::string key_of(const std::string &k) {
    return k + "-" + g_run;
}

const std::string BODY_1 = R"({"amount_cents":2500,"currency":"EUR","customer":"cus_42"})";
const std::string BODY_1_CHANGED = R"({"amount_cents":25000,"currency":"EUR","customer":"cus_42"})";

// 1 and 2: the double-click / retry storm, then the same key with another body.
void scenarios_1_2(pqxx::connection &admin) {
    std::string key = key_of("order-1001");
    banner("[1] 10 concurrent POST /v1/payments, Idempotency-Key " + key +
           ", same body, single-transaction handler");
    // The first claimer holds its transaction open (its provider call) until the other nine
    // are seen waiting on a lock in pg_stat_activity: the duplicates really overlap it.
    HandlerOptions o;
    std::atomic<bool> held{false};
    long blocked = 0;
    o.provider = [&](int) {
        if (held.exchange(true))
            return;
        auto c = connect();
        auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (blocked < 9 && std::chrono::steady_clock::now() < until) {
            pqxx::nontransaction t(*c);
            blocked = t.exec("SELECT count(*) FROM pg_stat_activity WHERE datname = "
                             "current_database() AND application_name = 'payment_demo' AND "
                             "wait_event_type = 'Lock'")
                          .at(0)[0]
                          .as<long>();
            if (blocked < 9)
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    };
    auto answers = concurrent(10, key, BODY_1, o);
    std::cout << "    while the first claim was uncommitted, " << blocked
              << " duplicate(s) waited on it\n";
    for (size_t i = 0; i < answers.size(); i++)
        std::cout << "    client " << i + 1 << ": " << describe(answers[i]) << "\n";
    IdSet ids;
    std::string groups = summarize(answers, &ids);
    long rows = payment_rows(admin, key);
    int claimed = 0;
    bool all201 = true;
    for (const auto &a : answers) {
        claimed += a.outcome == "claimed";
        all201 = all201 && a.http == 201;
    }
    report("1 10 concurrent requests, one key, same body",
           "1 payment row; 10x 201, one payment id; 9 waited",
           std::to_string(rows) + " row(s); " + groups + "; ids " + ids_text(ids) + "; " +
               std::to_string(blocked) + " waited",
           rows == 1 && all201 && ids.size() == 1 && answers.size() == 10 && claimed == 1 &&
               blocked == 9);

    banner("[2] the same key " + key + " with a different body (amount 25000)");
    auto c = connect();
    Answer a = handle_payment(*c, key, BODY_1_CHANGED);
    rows = payment_rows(admin, key);
    report("2 same key, different body", "422 mismatch; still 1 row",
           describe(a) + "; " + std::to_string(rows) + " row(s)",
           a.http == 422 && a.outcome == "mismatch" && rows == 1);
}

// 3: the response is lost after COMMIT; the client retries on a new connection.
void scenario_3(pqxx::connection &admin) {
    std::string key = key_of("order-1002");
    std::string body = R"({"amount_cents":990,"currency":"USD","customer":"cus_7"})";
    banner("[3] response lost after COMMIT, Idempotency-Key " + key);
    std::string lost_id;
    {
        auto c = connect();
        Answer lost = handle_payment(*c, key, body); // committed ...
        lost_id = lost.payment_id;                   // (kept only to check the retry)
        std::cout << "    first request: committed, the answer (" << describe(lost)
                  << ") never reaches the client; connection dropped\n";
    } // ... and the connection is gone
    auto c = connect();
    Answer a = handle_payment(*c, key, body);
    std::cout << "    retry on a new connection: " << describe(a) << "\n";
    long rows = payment_rows(admin, key);
    report("3 response lost after COMMIT, client retries", "replayed 201, same payment id, 1 row",
           describe(a) + " (lost answer id=" + lost_id + "); " + std::to_string(rows) + " row(s)",
           a.http == 201 && a.outcome == "replayed" && !lost_id.empty() &&
               a.payment_id == lost_id && rows == 1);
}

// Reads one line from fd, waiting at most timeout_ms; "" on timeout or EOF.
std::string read_line(int fd, int timeout_ms) {
    std::string s;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
        int left = int(std::chrono::duration_cast<std::chrono::milliseconds>(
                           deadline - std::chrono::steady_clock::now())
                           .count());
        if (left <= 0)
            return s;
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, left) <= 0)
            return s;
        char ch;
        if (read(fd, &ch, 1) != 1 || ch == '\n')
            return s;
        s += ch;
    }
}

// 4: two-phase handler, the worker process is SIGKILLed after its claim committed.
void scenario_4(pqxx::connection &admin) {
    std::string key = key_of("order-1003");
    std::string body = R"({"amount_cents":12000,"currency":"EUR","customer":"cus_99"})";
    HandlerOptions o;
    o.mode = Mode::TwoPhase;
    o.lease = "2 seconds";
    banner("[4] two-phase handler with a 2 s lease, Idempotency-Key " + key);

    // A forked worker runs the same handler; its provider call never returns: it reports its
    // claim and is killed. No thread of this process is running at the fork.
    int fds[2];
    if (pipe(fds) != 0)
        throw std::runtime_error("pipe failed");
    std::cout << std::flush;
    pid_t pid = fork();
    if (pid < 0)
        throw std::runtime_error("fork failed");
    if (pid == 0) {
        close(fds[0]);
        try {
            auto c = connect();
            HandlerOptions w = o;
            w.provider = [&](int attempt) {
                dprintf(fds[1], "%d\n", attempt);
                for (;;)
                    pause();
            };
            Answer a = handle_payment(*c, key, body, w);
            dprintf(fds[1], "returned %s\n", describe(a).c_str());
        } catch (const std::exception &e) {
            dprintf(fds[1], "error %s\n", e.what());
        }
        _exit(1);
    }
    close(fds[1]);
    std::string worker = read_line(fds[0], 20000);
    close(fds[0]);
    kill(pid, SIGKILL);
    int wstatus = 0;
    waitpid(pid, &wstatus, 0);
    bool killed = WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL;
    std::cout << "    worker pid " << pid << " claimed (attempt " << worker
              << "), calling the provider ... SIGKILL" << (killed ? "" : " (it was already gone)")
              << "\n";

    // 4a: duplicates while the dead worker's lease runs.
    auto dups = concurrent(3, key, body, o);
    IdSet ids;
    std::string groups = summarize(dups, &ids);
    for (size_t i = 0; i < dups.size(); i++)
        std::cout << "    duplicate " << i + 1 << ": " << describe(dups[i]) << "\n";
    bool ok = killed && worker == (g_break ? "0" : "1");
    for (const auto &a : dups)
        ok = ok && a.http == 409 && a.outcome == "in_progress" && a.retry_after >= 1 &&
             a.retry_after <= 2;
    long rows = payment_rows(admin, key);
    report("4a worker killed after claim; 3 duplicates",
           "3x 409 in_progress, Retry-After 1-2 s; 0 rows",
           groups + "; " + std::to_string(rows) + " row(s)", ok && rows == 0);

    // Wait until the lease has expired (by the server's clock).
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (;;) {
        pqxx::nontransaction t(admin);
        auto r = idem::db::exec_params(t,
                                       "SELECT lease_expires_at < clock_timestamp() FROM "
                                       "idempotency.idem_lookup($1, $2)",
                                       SCOPE, key);
        if (r.empty() || r[0][0].is_null() || r[0][0].as<bool>() ||
            std::chrono::steady_clock::now() > until)
            break;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (g_break)
        std::this_thread::sleep_for(std::chrono::milliseconds(2100));
    std::cout << "    ... the lease has expired\n";

    // 4b/4c: 5 concurrent retries. The winner's provider call waits until the others have
    // their answers, then the dead worker's late idempotency.idem_complete(attempt 1) arrives.
    std::mutex m;
    std::condition_variable cv;
    int returned = 0;
    std::string zombie;
    std::atomic<bool> zombie_done{false};
    HandlerOptions r = o;
    r.provider = [&](int) {
        {
            std::unique_lock<std::mutex> l(m);
            cv.wait_for(l, std::chrono::seconds(5), [&] { return returned >= 4; });
        }
        if (zombie_done.exchange(true))
            return;
        try {
            auto c = connect();
            pqxx::nontransaction t(*c);
            bool stored =
                idem::db::exec_params(t,
                                      "SELECT idempotency.idem_complete($1, $2, 1, 'ghost', "
                                      "'{\"id\":\"ghost\"}'::jsonb, 201)",
                                      SCOPE, key)
                    .at(0)[0]
                    .as<bool>();
            zombie = stored ? "accepted (true)" : "accepted (false)";
        } catch (const pqxx::sql_error &e) {
            std::string msg = e.what();
            msg = msg.substr(0, msg.find('\n'));
            if (msg.rfind("ERROR:  ", 0) == 0)
                msg = msg.substr(8);
            zombie = "refused " + idem::db::sqlstate(e) + " (" + msg + ")";
        }
    };
    auto retries = concurrent(5, key, body, r, [&](int, const Answer &) {
        std::lock_guard<std::mutex> l(m);
        returned++;
        cv.notify_all();
    });
    ids.clear();
    groups = summarize(retries, &ids);
    for (size_t i = 0; i < retries.size(); i++)
        std::cout << "    retry " << i + 1 << ": " << describe(retries[i]) << "\n";
    int reclaimed = 0, in_progress = 0;
    std::string winner_id;
    for (const auto &a : retries) {
        if (a.outcome == "reclaimed" && a.attempt == 2 && a.http == 201) {
            reclaimed++;
            winner_id = a.payment_id;
        }
        in_progress += a.outcome == "in_progress" && a.http == 409;
    }
    rows = payment_rows(admin, key);
    report("4b lease expired; 5 concurrent retries",
           "1x 201 reclaimed attempt 2, 4x 409 in_progress; 1 row",
           groups + "; " + std::to_string(rows) + " row(s)",
           reclaimed == 1 && in_progress == 4 && rows == 1);
    std::cout << "    dead worker's late idempotency.idem_complete(attempt 1): " << zombie << "\n";
    bool refused = zombie.rfind("refused IK002", 0) == 0 || zombie.rfind("refused IK003", 0) == 0;
    rows = payment_rows(admin, key);
    report("4c dead worker's late complete (attempt 1)", "refused: IK002 fenced (or IK003)",
           zombie.substr(0, zombie.find(" (")) + "; " + std::to_string(rows) + " row(s)",
           refused && rows == 1);

    // 4d: a retry after the new owner finished replays its result.
    auto c = connect();
    Answer a = handle_payment(*c, key, body, o);
    std::string stored;
    {
        pqxx::nontransaction t(admin);
        auto l =
            idem::db::exec_params(t,
                                  "SELECT status || ' attempt ' || attempt || ' id=' || "
                                  "coalesce(resource_id, '-') FROM idempotency.idem_lookup($1, $2)",
                                  SCOPE, key);
        stored = l.empty() ? "no record" : get(idem::db::row_at(l, 0), 0);
    }
    rows = payment_rows(admin, key);
    std::cout << "    late retry: " << describe(a) << "; record: " << stored << "\n";
    report("4d retry after recovery", "201 replayed, the reclaimer's payment id, 1 row",
           describe(a) + "; record " + stored + "; " + std::to_string(rows) + " row(s)",
           a.http == 201 && a.outcome == "replayed" && !winner_id.empty() &&
               a.payment_id == winner_id && rows == 1);
}

// 5 and 6: request fingerprints (idem_fingerprint, RFC 8785 + SHA-256).
void scenarios_5_6(pqxx::connection &admin) {
    std::string key = key_of("order-1004");
    std::string body = R"({"amount_cents":4200,"currency":"EUR","customer":"cus_5"})";
    std::string reordered =
        "{\n  \"customer\" : \"cus_5\",\n  \"currency\":\"EUR\",   \"amount_cents\" : 4200\n}";
    std::string changed = R"({"amount_cents":4300,"currency":"EUR","customer":"cus_5"})";
    std::string note = g_have_idem_fp ? "" : " [idem_fingerprint not installed]";
    banner("[5] a retry with reordered keys and different spacing, Idempotency-Key " + key);
    auto c = connect();
    Answer first = handle_payment(*c, key, body);
    Answer retry = handle_payment(*c, key, reordered);
    std::cout << "    first: " << describe(first) << "\n    retry: " << describe(retry) << "\n";
    long rows = payment_rows(admin, key);
    report("5 retry: keys reordered, other spacing", "201 replayed, same payment id, 1 row",
           describe(retry) + "; " + std::to_string(rows) + " row(s)" + note,
           g_have_idem_fp && first.http == 201 && retry.http == 201 &&
               retry.outcome == "replayed" && !first.payment_id.empty() &&
               retry.payment_id == first.payment_id && rows == 1);

    banner("[6] the same key " + key + " with a changed amount (4300)");
    Answer a = handle_payment(*c, key, changed);
    rows = payment_rows(admin, key);
    report("6 same key, changed amount", "422 mismatch; still 1 row",
           describe(a) + "; " + std::to_string(rows) + " row(s)" + note,
           g_have_idem_fp && a.http == 422 && a.outcome == "mismatch" && rows == 1);
}

// 7: no Idempotency-Key: 400 before any database work.
void scenario_7(pqxx::connection &admin) {
    banner("[7] POST /v1/payments without an Idempotency-Key");
    auto c = connect();
    long before_rows = all_payment_rows(admin);
    long before_calls = g_db_calls.load();
    Answer a = handle_payment(*c, "", BODY_1);
    long calls = g_db_calls.load() - before_calls;
    long rows = all_payment_rows(admin) - before_rows;
    report("7 no Idempotency-Key header", "400, no database statement, no row",
           std::to_string(a.http) + "; " + std::to_string(calls) + " statement(s); " +
               std::to_string(rows) + " new row(s)",
           a.http == 400 && calls == 0 && rows == 0);
}

void setup(bool ci) {
    if (ci) {
        pqxx::connection c; // libpq environment
        pqxx::nontransaction t(c);
        t.exec("DROP DATABASE IF EXISTS payment_demo WITH (FORCE)");
        t.exec("CREATE DATABASE payment_demo");
        g_conninfo = "dbname=payment_demo";
    }
    auto c = connect();
    pqxx::nontransaction t(*c);
    t.exec("CREATE EXTENSION IF NOT EXISTS idempotency");
    t.exec("DROP TABLE IF EXISTS payments");
    t.exec("CREATE TABLE payments ("
           " id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
           " idempotency_key text NOT NULL," // deliberately not UNIQUE: the extension dedups
           " customer text NOT NULL,"
           " amount_cents bigint NOT NULL CHECK (amount_cents > 0),"
           " currency text NOT NULL,"
           " created_at timestamptz NOT NULL DEFAULT now())");
    g_have_idem_fp =
        t.exec("SELECT EXISTS (SELECT 1 FROM pg_proc WHERE proname = 'idem_fingerprint' "
               "AND pronargs - pronargdefaults = 1 AND proargtypes[0] = 'text'::regtype "
               "AND prorettype = 'bytea'::regtype)")
            .at(0)[0]
            .as<bool>();
    g_fp_sql = g_have_idem_fp ? "idempotency.idem_fingerprint($1::text)"
                              : "sha256(convert_to($1::text, 'UTF8'))";
    std::string version = t.exec("SELECT extversion FROM pg_extension WHERE extname = "
                                 "'idempotency'")
                              .at(0)[0]
                              .c_str();
    std::cout << "payment demo: database " << c->dbname() << ", extension idempotency " << version
              << ", scope \"" << SCOPE << "\"\n"
              << "fingerprint: " << g_fp_sql << (g_break ? " (unused by --break)" : "") << "\n";
    if (!g_have_idem_fp)
        std::cout << "note: idempotency.idem_fingerprint(text) is not installed; falling back to "
                     "sha256(convert_to(body, 'UTF8')), byte-exact, so scenarios 5 and 6 fail\n";
    if (g_break)
        std::cout << "--break: the naive handler (no idem_claim); this run must FAIL\n";
}

} // namespace

int main(int argc, char **argv) {
    bool ci = false;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (a == "--ci")
            ci = true;
        else if (a == "--break")
            g_break = true;
        else {
            std::cerr << "usage: " << argv[0] << " [--ci] [--break]\n";
            return 2;
        }
    }
    if (const char *b = std::getenv("IDEM_DEMO_BREAK"); b && *b && std::strcmp(b, "0") != 0)
        g_break = true;
    {
        char buf[16];
        std::snprintf(buf, sizeof buf, "%06lx",
                      static_cast<unsigned long>(
                          std::chrono::system_clock::now().time_since_epoch().count() ^ getpid()) &
                          0xffffff);
        g_run = buf;
    }
    try {
        setup(ci);
        auto admin = connect();
        scenarios_1_2(*admin);
        scenario_3(*admin);
        scenario_4(*admin);
        scenarios_5_6(*admin);
        scenario_7(*admin);
    } catch (const std::exception &e) {
        std::cerr << "payment demo: " << e.what() << "\n";
        print_table();
        return 2;
    }
    print_table();
    long failed = std::count_if(g_rows.begin(), g_rows.end(), [](const Row &r) { return !r.pass; });
    std::printf("\n%zu scenarios, %ld failed\n", g_rows.size(), failed);
    if (ci && failed == 0) {
        try {
            pqxx::connection c;
            pqxx::nontransaction t(c);
            t.exec("DROP DATABASE IF EXISTS payment_demo WITH (FORCE)");
        } catch (const std::exception &) {
        }
    }
    return failed == 0 ? 0 : 1;
}
