// Shared helpers of the libpqxx client programs (test/programs/*_test.cpp): options, connection
// strings from the libpq environment, a per-program database, a thread barrier, the threads'
// error log, retry with backoff, SQLSTATE checks, the payment each key got, the final invariant
// table, the handler under test, and pg_ctl on the test cluster. idem::db below is the one place
// that knows which libpqxx it is built against; the demos (demo/*.cpp) use it too.
#pragma once

#include <pqxx/pqxx>
#include <pqxx/version>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

// The libpqxx calls whose spelling differs between the versions the programs build against:
// 6.4 (Debian 12), 7.10 (Debian 13) and 8.0 (Debian forky). 7.10 deprecates exec_params,
// exec_params1 and exec1 for exec(sql, params) and result::one_row(); 8.0 takes the transaction
// as the first argument of params (the client encoding), returns SQLSTATEs as string_views and
// gives row_refs (valid only while their result lives) from result::at and operator[].
// Everything else the programs use is the same in all three.
namespace idem::db {

#if PQXX_VERSION_MAJOR > 7 || (PQXX_VERSION_MAJOR == 7 && PQXX_VERSION_MINOR >= 10)
#define IDEM_PQXX_EXEC_WITH_PARAMS 1
#else
#define IDEM_PQXX_EXEC_WITH_PARAMS 0
#endif

// The parameterised statement sql with $1, $2, ... bound to args (sent as text); its result.
template <typename... Args>
pqxx::result exec_params(pqxx::transaction_base &tx, const std::string &sql, Args &&...args) {
#if PQXX_VERSION_MAJOR >= 8
    return tx.exec(sql, pqxx::params{tx, std::forward<Args>(args)...});
#elif IDEM_PQXX_EXEC_WITH_PARAMS
    return tx.exec(sql, pqxx::params{std::forward<Args>(args)...});
#else
    return tx.exec_params(sql, std::forward<Args>(args)...);
#endif
}

// Like exec_params, for a statement that returns exactly one row (pqxx::unexpected_rows
// otherwise); the row keeps the result's data alive.
template <typename... Args>
pqxx::row exec_params1(pqxx::transaction_base &tx, const std::string &sql, Args &&...args) {
#if IDEM_PQXX_EXEC_WITH_PARAMS
    return idem::db::exec_params(tx, sql, std::forward<Args>(args)...).one_row();
#else
    return tx.exec_params1(sql, std::forward<Args>(args)...);
#endif
}

// The statement sql, which returns exactly one row (pqxx::unexpected_rows otherwise).
inline pqxx::row exec1(pqxx::transaction_base &tx, const std::string &sql) {
#if IDEM_PQXX_EXEC_WITH_PARAMS
    return tx.exec(sql).one_row();
#else
    return tx.exec1(sql);
#endif
}

// Row i of r (pqxx::range_error past the end) as a pqxx::row, which keeps the result's data
// alive after r is gone (8.0's result::at gives a row_ref into r).
inline pqxx::row row_at(const pqxx::result &r, pqxx::result::size_type i) {
    return pqxx::row{r.at(i)};
}

// The SQLSTATE of e as a string (8.0: sql_error::sqlstate() is a string_view).
inline std::string sqlstate(const pqxx::sql_error &e) {
    return std::string(e.sqlstate());
}

} // namespace idem::db

namespace idemtest {

// Command-line options shared by every program.
struct Options {
    bool ci = true;      // --ci: bounded run (default)
    bool soak = false;   // --soak: the full/longer run
    bool broken = false; // --break: naive handler without idempotency (the run must FAIL)
    bool verbose = false;
};

inline Options parse_options(int argc, char **argv, const char *usage_extra = "") {
    Options o;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (a == "--ci") {
            o.ci = true;
            o.soak = false;
        } else if (a == "--soak") {
            o.soak = true;
            o.ci = false;
        } else if (a == "--break") {
            o.broken = true;
        } else if (a == "-v" || a == "--verbose") {
            o.verbose = true;
        } else {
            std::fprintf(stderr, "usage: %s [--ci|--soak] [--break] [-v]%s\n", argv[0],
                         usage_extra);
            std::exit(2);
        }
    }
    return o;
}

inline std::string env_or(const char *name, const char *dflt) {
    const char *v = std::getenv(name);
    return v && *v ? v : dflt;
}

// The server's TCP port (PGPORT, as set by `eval "$(test/pgcluster start)"`).
inline int pg_port() {
    return std::atoi(env_or("PGPORT", "5432").c_str());
}

// Connection string for database db over the libpq environment (PGHOST/PGPORT/PGUSER).
inline std::string conninfo(const std::string &db) {
    return "dbname=" + db;
}

// Connection string for database db over TCP to 127.0.0.1:port (used through the proxy).
inline std::string tcp_conninfo(const std::string &db, int port) {
    return "host=127.0.0.1 port=" + std::to_string(port) + " dbname=" + db +
           " sslmode=disable gssencmode=disable connect_timeout=10";
}

// Drops and creates database db with the extension and the business table payments
// (one row per charge: the effect each test counts).
inline void create_test_db(const std::string &db) {
    {
        pqxx::connection c(conninfo(env_or("PGDATABASE", "postgres")));
        pqxx::nontransaction n(c);
        n.exec("DROP DATABASE IF EXISTS " + c.quote_name(db) + " WITH (FORCE)");
        n.exec("CREATE DATABASE " + c.quote_name(db));
    }
    pqxx::connection c(conninfo(db));
    pqxx::nontransaction n(c);
    // CREATE EXTENSION is retried for a while: while the extension is being reinstalled
    // (make install by a parallel build) its script and module can briefly disagree.
    for (int i = 0;; i++) {
        try {
            n.exec("CREATE EXTENSION idempotency");
            break;
        } catch (const pqxx::sql_error &e) {
            if (i >= 30)
                throw;
            std::fprintf(stderr, "CREATE EXTENSION failed (%s), retrying\n", e.what());
            std::this_thread::sleep_for(std::chrono::seconds(2));
        }
    }
    n.exec("CREATE TABLE payments ("
           "  id         bigserial PRIMARY KEY,"
           "  scope      text NOT NULL,"
           "  key        text NOT NULL,"
           "  payment_id text NOT NULL,"
           "  amount     integer NOT NULL,"
           "  created_at timestamptz NOT NULL DEFAULT clock_timestamp())");
    n.exec("CREATE INDEX ON payments (scope, key)");
}

// create_test_db for a program's setup: false after printing "setup failed: ..." (exit 2 then).
inline bool setup_test_db(const std::string &db) {
    try {
        create_test_db(db);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "setup failed: %s\n", e.what());
        return false;
    }
    return true;
}

// Drops database db (best effort; a crash test may leave connections behind).
inline void drop_test_db(const std::string &db) {
    for (int i = 0; i < 20; i++) {
        try {
            pqxx::connection c(conninfo(env_or("PGDATABASE", "postgres")));
            pqxx::nontransaction n(c);
            n.exec("DROP DATABASE IF EXISTS " + c.quote_name(db) + " WITH (FORCE)");
            return;
        } catch (const std::exception &e) {
            std::this_thread::sleep_for(std::chrono::milliseconds(250));
        }
    }
}

// A reusable barrier for n threads (C++17 has no std::barrier).
class Barrier {
  public:
    explicit Barrier(int n) : n_(n) {}
    void wait() {
        std::unique_lock<std::mutex> lk(m_);
        unsigned gen = gen_;
        if (++count_ == n_) {
            count_ = 0;
            gen_++;
            cv_.notify_all();
        } else {
            cv_.wait(lk, [&] { return gen != gen_; });
        }
    }

  private:
    std::mutex m_;
    std::condition_variable cv_;
    int n_;
    int count_ = 0;
    unsigned gen_ = 0;
};

// The errors of a run's client threads: how many, and the first one's message.
class ErrorLog {
  public:
    // Counts e and keeps its message if it is the first.
    void record(const std::exception &e) {
        n_++;
        std::lock_guard<std::mutex> g(m_);
        if (first_.empty())
            first_ = e.what();
    }
    // Counts an error whose message is not kept.
    void tally() { n_++; }
    int count() const { return n_.load(); }
    // Prints "[label] first error: ..." ("first error: ..." without a label) if one was kept.
    void print(const char *label = nullptr) const {
        std::lock_guard<std::mutex> g(m_);
        if (first_.empty())
            return;
        if (label)
            std::printf("[%s] first error: %s\n", label, first_.c_str());
        else
            std::printf("first error: %s\n", first_.c_str());
    }

  private:
    std::atomic<int> n_{0};
    mutable std::mutex m_;
    std::string first_;
};

// SQLSTATE of an exception, "" if it carries none.
inline std::string sqlstate_of(const std::exception &e) {
    if (auto *s = dynamic_cast<const pqxx::sql_error *>(&e))
        return idem::db::sqlstate(*s);
    return "";
}

// True for errors after which the same request should simply be sent again: a lost or
// killed connection, a commit in doubt, an admin shutdown/crash, a serialization failure or
// deadlock, "cannot connect now" during recovery.
inline bool is_transient(const std::exception &e) {
    if (dynamic_cast<const pqxx::broken_connection *>(&e) ||
        dynamic_cast<const pqxx::in_doubt_error *>(&e))
        return true;
    std::string s = sqlstate_of(e);
    if (s.rfind("08", 0) == 0 || s.rfind("57P", 0) == 0 || s == "40001" || s == "40P01")
        return true;
    std::string w = e.what();
    return w.find("server closed the connection") != std::string::npos ||
           w.find("terminating connection") != std::string::npos ||
           w.find("could not connect") != std::string::npos ||
           w.find("connection to server") != std::string::npos ||
           w.find("no connection to the server") != std::string::npos ||
           w.find("Lost connection") != std::string::npos ||
           w.find("lost connection") != std::string::npos ||
           w.find("the database system is") != std::string::npos ||
           w.find("Connection reset") != std::string::npos;
}

// Thread-local random numbers.
inline std::mt19937_64 &rng() {
    thread_local std::mt19937_64 r(std::random_device{}() ^
                                   std::hash<std::thread::id>{}(std::this_thread::get_id()));
    return r;
}
inline int rand_int(int lo, int hi) { // inclusive
    return std::uniform_int_distribution<int>(lo, hi)(rng());
}
inline double rand01() {
    return std::uniform_real_distribution<double>(0, 1)(rng());
}
inline void sleep_ms(int ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

// Exponential backoff with jitter: attempt 0, 1, 2, ... → ~base, 2·base, ... capped at cap ms.
inline void backoff(int attempt, int base_ms = 5, int cap_ms = 500) {
    int ms = base_ms << std::min(attempt, 16);
    if (ms > cap_ms || ms <= 0)
        ms = cap_ms;
    sleep_ms(rand_int(ms / 2, ms));
}

// Calls f() until it returns without a transient error (see is_transient), with backoff;
// other exceptions propagate. Gives up after deadline_s seconds (throws the last error).
template <class F> auto retry(F &&f, double deadline_s = 120, int *retries = nullptr) {
    auto start = std::chrono::steady_clock::now();
    for (int attempt = 0;; attempt++) {
        try {
            return f();
        } catch (const std::exception &e) {
            if (!is_transient(e))
                throw;
            if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >
                deadline_s)
                throw;
            if (retries)
                ++*retries;
            backoff(attempt);
        }
    }
}

inline double seconds_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// One line of the final invariant table.
struct Invariant {
    std::string scenario;
    long keys;
    long expected;
    long observed;
    bool pass;
    std::string note;
};

// Prints the invariant table; returns the exit code (0 when every row passes).
inline int print_invariants(const char *program, const std::vector<Invariant> &rows,
                            double elapsed_s) {
    std::printf("\n%-52s %6s %10s %10s  %-6s %s\n", "invariant", "keys", "expected", "observed",
                "result", "note");
    std::printf("%s\n", std::string(104, '-').c_str());
    bool ok = !rows.empty();
    for (const auto &r : rows) {
        std::printf("%-52s %6ld %10ld %10ld  %-6s %s\n", r.scenario.c_str(), r.keys, r.expected,
                    r.observed, r.pass ? "PASS" : "FAIL", r.note.c_str());
        ok = ok && r.pass;
    }
    std::printf("%s: %s in %.1f s\n", program, ok ? "PASS" : "FAIL", elapsed_s);
    std::fflush(stdout);
    return ok ? 0 : 1;
}

// Invariant rows read from the database for a set of keys of one scope:
//  - payments per key: exactly one effect per key (sum and the worst key);
//  - completed records whose resource_id is the one payment of the key.
inline void effect_invariants(pqxx::connection &c, const std::string &label,
                              const std::string &scope, long keys, std::vector<Invariant> &out) {
    pqxx::nontransaction n(c);
    auto r = idem::db::exec_params(
        n,
        "SELECT count(*), coalesce(sum(n), 0), "
        "       count(*) FILTER (WHERE n > 1), coalesce(max(n), 0) "
        "FROM (SELECT key, count(*) AS n FROM payments WHERE scope = $1 GROUP BY key) s",
        scope);
    long keys_paid = r[0][0].as<long>(), effects = r[0][1].as<long>(),
         dup_keys = r[0][2].as<long>(), worst = r[0][3].as<long>();
    out.push_back({label + ": effects (payments rows)", keys, keys, effects,
                   effects == keys && keys_paid == keys && dup_keys == 0,
                   "keys with >1 effect: " + std::to_string(dup_keys) +
                       ", worst key: " + std::to_string(worst)});
    auto m = idem::db::exec_params(
        n,
        "SELECT count(*) FROM idempotency.records r "
        "JOIN (SELECT key, min(payment_id) AS pid, count(*) AS n FROM payments WHERE scope = $1 "
        "      GROUP BY key) p ON p.key = r.key "
        "WHERE r.scope = $1 AND r.status = 'completed' AND r.resource_id = p.pid AND p.n = 1",
        scope);
    long matched = m[0][0].as<long>();
    out.push_back(
        {label + ": completed record = its payment", keys, keys, matched, matched == keys, ""});
}

// Key -> the key's payment id in scope (the first one if a key was charged more than once).
inline std::map<std::string, std::string> payment_ids(pqxx::connection &c,
                                                      const std::string &scope) {
    std::map<std::string, std::string> paid;
    pqxx::nontransaction n(c);
    for (auto row : idem::db::exec_params(
             n, "SELECT key, min(payment_id) FROM payments WHERE scope = $1 GROUP BY key", scope))
        paid[row[0].as<std::string>()] = row[1].as<std::string>();
    return paid;
}

// answers[k]: the payment ids the clients of key "key-<k>" got back. How many of them are the
// key's payment id (in paid), and for how many keys all of them are.
struct Agreement {
    long answers = 0, keys = 0;
};
inline Agreement agreement(const std::vector<std::vector<std::string>> &answers,
                           const std::map<std::string, std::string> &paid) {
    Agreement a;
    for (size_t k = 0; k < answers.size(); k++) {
        auto p = paid.find("key-" + std::to_string(k));
        bool all = true;
        for (const std::string &id : answers[k]) {
            bool same = p != paid.end() && !id.empty() && id == p->second;
            a.answers += same;
            all = all && same;
        }
        a.keys += all;
    }
    return a;
}

// ---------------------------------------------------------------------------------------------
// The business handler under test: "charge `amount` once for Idempotency-Key `key`". The effect
// is one row in payments; its payment_id is the result every duplicate must get back.

// Single / TwoPhase: the two usage modes of the extension. Naive: no idempotency record, look
// for an earlier payment of the key and charge if there is none (races). Blind: no idempotency
// at all, every request charges (what a retrying client does to a plain handler).
enum class Mode { Single, TwoPhase, Naive, Blind };
inline const char *mode_name(Mode m) {
    switch (m) {
    case Mode::Single:
        return "single-tx";
    case Mode::TwoPhase:
        return "two-phase";
    case Mode::Naive:
        return "naive";
    case Mode::Blind:
        return "blind";
    }
    return "?";
}

// The modes a program runs: both usage modes, or with --break only the handler without
// idempotency that it breaks with (Naive or Blind).
inline std::vector<Mode> modes_to_run(const Options &opt, Mode broken) {
    return opt.broken ? std::vector<Mode>{broken} : std::vector<Mode>{Mode::Single, Mode::TwoPhase};
}

// Outcome counters of a run.
struct Stats {
    std::atomic<long> claimed{0}, reclaimed{0}, replayed{0}, in_progress{0}, mismatch{0}, fenced{0},
        finished{0}, transient{0}, in_doubt{0}, effects{0};
    std::string summary() const {
        char b[300];
        std::snprintf(b, sizeof b,
                      "claimed=%ld reclaimed=%ld replayed=%ld in_progress=%ld mismatch=%ld "
                      "fenced(IK002)=%ld finished(IK003)=%ld transient_errors=%ld in_doubt=%ld "
                      "effects_committed_by_clients=%ld",
                      claimed.load(), reclaimed.load(), replayed.load(), in_progress.load(),
                      mismatch.load(), fenced.load(), finished.load(), transient.load(),
                      in_doubt.load(), effects.load());
        return b;
    }
};

// Optional hook called at named points of the handler (kill test: where a backend may die).
using Hook = std::function<void(const char *point)>;

const char *const CLAIM_SQL =
    "SELECT outcome, attempt, resource_id FROM idempotency.idem_claim($1, $2, "
    "sha256(convert_to($2 || ':' || $3::text, 'UTF8')), $4::interval)";
const char *const PAY_SQL = "INSERT INTO payments (scope, key, payment_id, amount) "
                            "VALUES ($1, $2, 'pay_' || gen_random_uuid(), $3) RETURNING payment_id";
const char *const COMPLETE_SQL = "SELECT idempotency.idem_complete($1, $2, $3, $4, "
                                 "jsonb_build_object('payment_id', $4::text), 201)";

// Calls hook at point p of the handler, if there is a hook.
inline void call_hook(const Hook &hook, const char *p) {
    if (hook)
        hook(p);
}

// What a request does after idem_claim answered outcome: Replay the stored result, Retry later
// (in progress elsewhere), or Charge (claimed or reclaimed: the key is this request's now).
// Counts the outcome in st; throws on a fingerprint mismatch.
enum class Next { Replay, Retry, Charge };
inline Next after_claim(const std::string &outcome, const std::string &key, Stats &st) {
    if (outcome == "replayed") {
        st.replayed++;
        return Next::Replay;
    }
    if (outcome == "in_progress") {
        st.in_progress++;
        return Next::Retry;
    }
    if (outcome == "mismatch") {
        st.mismatch++;
        throw std::runtime_error("fingerprint mismatch for key " + key);
    }
    (outcome == "claimed" ? st.claimed : st.reclaimed)++;
    return Next::Charge;
}

// The effect (one payments row) and idem_complete of the claim's attempt in w, then COMMIT;
// returns the new payment id.
inline std::string pay_and_complete(pqxx::work &w, const std::string &scope, const std::string &key,
                                    int amount, int attempt, Stats &st, const Hook &hook) {
    std::string pid = idem::db::exec_params1(w, PAY_SQL, scope, key, amount)[0].as<std::string>();
    call_hook(hook, "work");
    idem::db::exec_params(w, COMPLETE_SQL, scope, key, attempt, pid);
    call_hook(hook, "before-commit");
    w.commit();
    st.effects++;
    return pid;
}

// One request. Returns the payment id, or "" when the key is in progress elsewhere (or this
// attempt was fenced) and the request must be sent again later. Throws on transport errors.
inline std::string charge_once(pqxx::connection &c, Mode mode, const std::string &scope,
                               const std::string &key, int amount, const std::string &lease,
                               Stats &st, const Hook &hook = nullptr) {
    if (mode == Mode::Naive || mode == Mode::Blind) { // no idempotency (--break)
        pqxx::work w(c);
        if (mode == Mode::Naive) { // look for an earlier payment, else charge
            auto r = idem::db::exec_params(
                w, "SELECT payment_id FROM payments WHERE scope = $1 AND key = $2", scope, key);
            if (!r.empty())
                return r[0][0].as<std::string>();
        }
        call_hook(hook, "work");
        std::string pid =
            idem::db::exec_params1(w, PAY_SQL, scope, key, amount)[0].as<std::string>();
        call_hook(hook, "before-commit");
        w.commit();
        st.effects++;
        return pid;
    }
    if (mode == Mode::Single) { // BEGIN; claim; effect; complete; COMMIT
        pqxx::work w(c);
        auto r = idem::db::exec_params1(w, CLAIM_SQL, scope, key, amount, lease);
        Next next = after_claim(r[0].as<std::string>(), key, st);
        if (next == Next::Replay) {
            w.commit();
            return r[2].as<std::string>();
        }
        if (next == Next::Retry)
            return "";
        int attempt = r[1].as<int>();
        call_hook(hook, "claimed");
        return pay_and_complete(w, scope, key, amount, attempt, st, hook);
    }
    // Two-phase: the claim commits on its own; effect + complete in a later transaction.
    std::string outcome, rid;
    int attempt = 0;
    {
        pqxx::nontransaction n(c);
        auto r = idem::db::exec_params1(n, CLAIM_SQL, scope, key, amount, lease);
        outcome = r[0].as<std::string>();
        if (!r[1].is_null())
            attempt = r[1].as<int>();
        if (!r[2].is_null())
            rid = r[2].as<std::string>();
    }
    Next next = after_claim(outcome, key, st);
    if (next == Next::Replay)
        return rid;
    if (next == Next::Retry)
        return "";
    call_hook(hook, "claimed");
    try {
        pqxx::work w(c);
        return pay_and_complete(w, scope, key, amount, attempt, st, hook);
    } catch (const pqxx::sql_error &e) {
        if (e.sqlstate() == "IK002") { // our lease ran out and another attempt took over
            st.fenced++;
            return "";
        }
        if (e.sqlstate() == "IK003") {
            st.finished++;
            return "";
        }
        throw;
    }
}

// A client with its own (re)connecting connection.
struct Client {
    std::string info;
    std::unique_ptr<pqxx::connection> conn;
    std::function<void(pqxx::connection &)> on_connect;
    bool reconnect_each = false; // a new connection for every request (no pool)
    explicit Client(std::string i) : info(std::move(i)) {}
    pqxx::connection &get() {
        if (!conn || !conn->is_open()) {
            conn.reset();
            conn = std::make_unique<pqxx::connection>(info);
            if (on_connect)
                on_connect(*conn);
        }
        return *conn;
    }
    void reset() {
        try {
            conn.reset();
        } catch (...) {
        }
    }
};

// Sends the request until it is answered with a payment id (retrying lost connections, commits
// in doubt and in_progress answers with the same key). Throws after deadline_s seconds.
inline std::string charge_until_answered(Client &cl, Mode mode, const std::string &scope,
                                         const std::string &key, int amount,
                                         const std::string &lease, Stats &st,
                                         double deadline_s = 120, const Hook &hook = nullptr) {
    auto start = std::chrono::steady_clock::now();
    for (int attempt = 0;; attempt++) {
        try {
            std::string pid = charge_once(cl.get(), mode, scope, key, amount, lease, st, hook);
            if (cl.reconnect_each)
                cl.reset();
            if (!pid.empty())
                return pid;
            backoff(std::min(attempt, 4), 5, 100); // in progress elsewhere: ask again
        } catch (const std::exception &e) {
            if (!is_transient(e))
                throw;
            (dynamic_cast<const pqxx::in_doubt_error *>(&e) ? st.in_doubt : st.transient)++;
            cl.reset();
            backoff(std::min(attempt, 6), 5, 300);
        }
        if (seconds_since(start) > deadline_s)
            throw std::runtime_error("key " + key + " not answered within deadline");
    }
}

// ---------------------------------------------------------------------------------------------
// The test cluster, for the programs that crash and restart it (crash_test, recovery_test).

// The cluster's directory: $IDEM_PGDIR, else $PGHOST (test/pgcluster keeps the socket there).
inline std::string cluster_dir() {
    std::string d = env_or("IDEM_PGDIR", "");
    return d.empty() ? env_or("PGHOST", "") : d;
}

// s as one word for the shell (single-quoted).
inline std::string shell_quote(const std::string &s) {
    std::string o = "'";
    for (char c : s)
        o += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return o + "'";
}

// The PostgreSQL program directory: pg_config --bindir (looked up once), else the 15 one.
inline const std::string &pg_bindir() {
    static const std::string dir = [] {
        std::string out;
        if (FILE *p = ::popen("pg_config --bindir", "r")) {
            char b[512];
            while (std::fgets(b, sizeof b, p))
                out += b;
            ::pclose(p);
        }
        while (!out.empty() && (out.back() == '\n' || out.back() == ' '))
            out.pop_back();
        return out.empty() ? std::string("/usr/lib/postgresql/15/bin") : out;
    }();
    return dir;
}

// Runs pg_ctl args on the cluster (data in <cluster_dir>/data), as postgres when we are root;
// returns its exit status.
inline int pg_ctl(const std::string &args) {
    std::string cmd = (::geteuid() == 0 ? "runuser -u postgres -- " : "") + pg_bindir() +
                      "/pg_ctl -D " + shell_quote(cluster_dir() + "/data") + " " + args +
                      " >/dev/null 2>&1";
    return std::system(cmd.c_str());
}

// Stops the server with pg_ctl stop -m immediate (a crash: recovery at the next start).
inline int crash_server() {
    return pg_ctl("-m immediate -w stop");
}

// Starts the server (log in <cluster_dir>/server.log), waiting up to 120 s; pg_ctl's status.
inline int start_server() {
    return pg_ctl("-l " + shell_quote(cluster_dir() + "/server.log") + " -w -t 120 start");
}

// Starts the server if it is not running.
inline void ensure_running() {
    if (pg_ctl("status") != 0)
        start_server();
}

} // namespace idemtest
