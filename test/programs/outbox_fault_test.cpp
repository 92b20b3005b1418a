// The outbox under faults: producers emit events in transactions with a business row
// (some of them rolled back), relay processes deliver them into a sink, the relays are SIGKILLed
// at chosen points and replaced, and the server is crash-restarted (pg_ctl stop -m immediate)
// while producers and relays run. Afterwards, read from the database:
//  - every committed event was delivered exactly once and is done: committed events = done
//    events = distinct effects, no effect twice, none lost;
//  - no event of a rolled-back transaction exists or was delivered;
//  - per key, the effects were applied in emit order;
//  - no event is left pending, leased or dead;
//  - the faults happened: kills in each of the three windows, at least one crash-restart, lease
//    takeovers, and duplicates absorbed by the sink's UNIQUE.
//
// Producers (threads): each transaction emits one or two events of a random key, each with
// idem_outbox_emit first and then the business writes: the aggregate's version (accounts, a row
// lock) and the order row that records the event and that version. Because the emit comes first,
// only the outbox's own per-key lock orders the events of a key in commit order: a version is a
// key's commit order, and the outbox's seq must agree with it.
//
// Relays (processes: this program run again with --relay, each with its own connection) loop
// idempotency.idem_outbox_next(topic, 3, 200 ms) and, for each event, apply the effect
// idempotently: lock the key's row of sink_keys, INSERT INTO sink ... ON CONFLICT (event_id) DO
// NOTHING with delivered_seq = the key's applied count + 1 (so delivered_seq is the order the key's
// effects were applied in), or when the event is already there log the absorbed duplicate
// (sink_absorbed). Half of the relays call idem_outbox_done in the effect's transaction; the
// other half commit the effect first and call idem_outbox_done on its own, which opens the
// window "effect applied, done lost". Each relay publishes its phase in shared memory; the killer
// waits for a relay in the phase it aims at, stops it (SIGSTOP) to read the phase it really is
// in, and SIGKILLs it; a replacement starts in its slot at once.
//
// The cluster is the one of the libpq environment: its directory is $IDEM_PGDIR, else $PGHOST
// (test/pgcluster puts the socket in the cluster directory); data in <dir>/data. As root the
// server is restarted as the postgres user (runuser). The cluster is running again when the
// program exits. Run it after the other client tests: it restarts the server.
//   --ci    4 producers x 250 transactions over 16 keys, 4 relays, one crash-restart (~15 s)
//   --soak  4 producers x 1500 transactions, 6 relays, three crash-restarts
//   --break a sink without the UNIQUE (a relay that trusts at-most-once delivery): must FAIL
#include "common.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <new>

using namespace idemtest;

namespace {

const char *const DB = "outbox_fault_test";
const char *const TOPIC = "orders";
const char *const LEASE = "200 milliseconds";
const int BATCH = 3;
constexpr int MAX_RELAYS = 8;

// Where a relay is; the killer reads it while the relay is stopped.
enum Phase {
    Connecting,      // (re)connecting
    Next,            // in idempotency.idem_outbox_next (may have leased events it has not seen yet)
    Idle,            // nothing leased, sleeping
    Leased,          // holding leases, before the current event's effect
    MidTx,           // effect applied (and done, in the same-transaction mode), not committed
    Committing,      // COMMIT sent
    EffectCommitted, // separate mode: the effect committed, idem_outbox_done not sent
    DoneSent,        // separate mode: idem_outbox_done in flight
    NPhases
};
const char *const PHASE_NAMES[NPhases] = {"connecting",
                                          "in next",
                                          "idle",
                                          "leased",
                                          "mid-tx",
                                          "committing",
                                          "effect committed, no done",
                                          "done in flight"};

// One relay slot in shared memory (counters cumulative over the slot's incarnations).
struct Slot {
    std::atomic<int> phase;
    std::atomic<long> leased, effects, absorbed, done, fenced, finished, transient, errors;
};
struct Shared {
    std::atomic<int> stop;
    Slot slots[MAX_RELAYS];
};

Shared *map_shared(int fd) {
    void *p = ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        std::perror("mmap");
        std::exit(2);
    }
    return static_cast<Shared *>(p);
}

const char *const NEXT_SQL = "SELECT event_id::text, key, attempt "
                             "FROM idempotency.idem_outbox_next($1, $2::integer, $3::interval)";
const char *const DONE_SQL = "SELECT idempotency.idem_outbox_done($1::uuid, $2::integer, $3)";
const char *const LOCK_KEY_SQL = "SELECT applied FROM sink_keys WHERE key = $1 FOR UPDATE";
const char *const EFFECT_SQL = "INSERT INTO sink (event_id, key, delivered_seq, relay, attempt) "
                               "VALUES ($1::uuid, $2, $3::integer, $4::integer, $5::integer) "
                               "ON CONFLICT (event_id) DO NOTHING RETURNING 1";
const char *const EFFECT_BLIND_SQL = // --break: the sink has no UNIQUE
    "INSERT INTO sink (event_id, key, delivered_seq, relay, attempt) "
    "VALUES ($1::uuid, $2, $3::integer, $4::integer, $5::integer) RETURNING 1";
const char *const APPLIED_SQL = "UPDATE sink_keys SET applied = applied + 1 WHERE key = $1";
const char *const ABSORBED_SQL =
    "INSERT INTO sink_absorbed (event_id, relay, attempt) VALUES ($1::uuid, $2, $3)";

// Sometimes waits a little (1-8 ms) at a phase, so that the killer finds relays there.
void linger() {
    if (rand01() < 0.25)
        sleep_ms(rand_int(1, 8));
}

// The effect of event id (key) in w: true when applied, false when it was there already (the
// UNIQUE absorbed it).
bool apply_effect(pqxx::work &w, const std::string &id, const std::string &key, int slot,
                  int attempt, bool blind, Slot &s) {
    long applied = idem::db::exec_params1(w, LOCK_KEY_SQL, key)[0].as<long>();
    auto r = idem::db::exec_params(w, blind ? EFFECT_BLIND_SQL : EFFECT_SQL, id, key, applied + 1,
                                   slot, attempt);
    if (!r.empty()) {
        idem::db::exec_params(w, APPLIED_SQL, key);
        s.effects++;
        return true;
    }
    idem::db::exec_params(w, ABSORBED_SQL, id, slot, attempt);
    s.absorbed++;
    return false;
}

// A relay process: delivers events until the parent sets stop.
int relay_main(int slot, bool separate, int fd, const std::string &db, bool blind) {
    Shared *sh = map_shared(fd);
    Slot &s = sh->slots[slot];
    std::unique_ptr<pqxx::connection> c;
    int printed = 0;
    for (int failures = 0; !sh->stop;) {
        try {
            if (!c) {
                s.phase = Connecting;
                c = std::make_unique<pqxx::connection>(conninfo(db));
                failures = 0;
            }
            s.phase = Next;
            pqxx::result batch;
            {
                pqxx::nontransaction n(*c);
                batch = idem::db::exec_params(n, NEXT_SQL, TOPIC, BATCH, LEASE);
            }
            if (batch.empty()) {
                s.phase = Idle;
                sleep_ms(rand_int(5, 15));
                continue;
            }
            s.leased += static_cast<long>(batch.size());
            for (pqxx::result::size_type i = 0; i < batch.size(); i++) {
                pqxx::row ev = idem::db::row_at(batch, i);
                std::string id = ev[0].as<std::string>(), key = ev[1].as<std::string>();
                int token = ev[2].as<int>();
                s.phase = Leased;
                linger();
                try {
                    {
                        pqxx::work w(*c);
                        apply_effect(w, id, key, slot, token, blind, s);
                        s.phase = MidTx;
                        linger();
                        if (!separate) {
                            idem::db::exec_params(w, DONE_SQL, id, token, TOPIC);
                            linger();
                        }
                        s.phase = Committing;
                        w.commit();
                    }
                    if (separate) {
                        s.phase = EffectCommitted;
                        linger();
                        s.phase = DoneSent;
                        pqxx::nontransaction n(*c);
                        idem::db::exec_params(n, DONE_SQL, id, token, TOPIC);
                    }
                    s.done++;
                } catch (const pqxx::sql_error &e) {
                    std::string st = idem::db::sqlstate(e);
                    if (st == "IK002") { // the lease expired and another relay took the event
                        s.fenced++;
                        continue;
                    }
                    if (st == "IK003") { // another relay finished it
                        s.finished++;
                        continue;
                    }
                    throw;
                }
            }
        } catch (const std::exception &e) {
            if (is_transient(e)) {
                s.transient++;
            } else {
                s.errors++;
                if (printed++ < 3)
                    std::fprintf(stderr, "relay %d (pid %d): %s\n", slot, (int)::getpid(),
                                 e.what());
            }
            c.reset();
            s.phase = Connecting;
            backoff(std::min(failures++, 6), 5, 300);
        }
    }
    return 0;
}

// The relays, as seen by the parent: one process per slot, replaced when killed.
class Relays {
  public:
    Relays(int n, int fd, Shared *sh, bool blind, const std::string &self)
        : n_(n), fd_(fd), sh_(sh), blind_(blind), self_(self), pids_(n, 0) {}

    // Slot i delivers done in a transaction of its own (odd slots) or in the effect's (even).
    static bool separate(int slot) { return slot % 2 == 1; }

    // Starts the relay of slot i (fork + exec of this program with --relay).
    bool spawn(int i) {
        std::vector<std::string> args = {self_,
                                         "--relay",
                                         std::to_string(i),
                                         separate(i) ? "separate" : "same",
                                         std::to_string(fd_),
                                         DB,
                                         blind_ ? "blind" : "unique"};
        std::vector<char *> argv;
        for (auto &a : args)
            argv.push_back(const_cast<char *>(a.c_str()));
        argv.push_back(nullptr);
        sh_->slots[i].phase = Connecting;
        pid_t pid = ::fork();
        if (pid < 0) {
            std::perror("fork");
            return false;
        }
        if (pid == 0) { // only async-signal-safe calls until exec
            ::execv(argv[0], argv.data());
            ::_exit(127);
        }
        pids_[i] = pid;
        started++;
        return true;
    }

    // A relay that exited although nobody killed it: reaped, counted and replaced (the first
    // 20 times).
    void reap_unexpected() {
        for (int i = 0; i < n_; i++) {
            int status;
            if (pids_[i] > 0 && ::waitpid(pids_[i], &status, WNOHANG) == pids_[i]) {
                unexpected_exits++;
                std::fprintf(stderr, "relay %d (pid %d) exited by itself (status %d)\n", i,
                             (int)pids_[i], status);
                pids_[i] = 0;
                if (unexpected_exits <= 20)
                    spawn(i);
            }
        }
    }

    // SIGSTOPs relay i, reads its phase, SIGKILLs it and starts a replacement. The phase it was
    // killed in, or -1 if it had exited already.
    int kill_and_replace(int i) {
        pid_t pid = pids_[i];
        if (pid <= 0 || ::kill(pid, SIGSTOP) != 0)
            return -1;
        int status;
        if (::waitpid(pid, &status, WUNTRACED) != pid || !WIFSTOPPED(status)) {
            unexpected_exits++;
            pids_[i] = 0;
            spawn(i);
            return -1;
        }
        int phase = sh_->slots[i].phase;
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        pids_[i] = 0;
        spawn(i);
        return phase;
    }

    // Sets stop and waits up to 10 s for every relay to exit (SIGKILL after that).
    void stop_all() {
        sh_->stop = 1;
        auto t = std::chrono::steady_clock::now();
        for (int i = 0; i < n_; i++) {
            while (pids_[i] > 0) {
                int status;
                if (::waitpid(pids_[i], &status, WNOHANG) == pids_[i]) {
                    pids_[i] = 0;
                } else if (seconds_since(t) > 10) {
                    ::kill(pids_[i], SIGKILL);
                    ::waitpid(pids_[i], &status, 0);
                    pids_[i] = 0;
                } else {
                    sleep_ms(10);
                }
            }
        }
    }

    int size() const { return n_; }
    long started = 0, unexpected_exits = 0;

  private:
    int n_, fd_;
    Shared *sh_;
    bool blind_;
    std::string self_;
    std::vector<pid_t> pids_;
};

// The tables of the test: the aggregate (accounts), the business row of each event (orders),
// the sink of the relays' effects, its per-key counter and the log of absorbed duplicates.
void create_tables(int keys, bool blind) {
    pqxx::connection c(conninfo(DB));
    pqxx::nontransaction n(c);
    n.exec("CREATE TABLE accounts (key text PRIMARY KEY, version integer NOT NULL)");
    n.exec("CREATE TABLE orders (event_id uuid PRIMARY KEY, key text NOT NULL, "
           "version integer NOT NULL, producer integer NOT NULL, UNIQUE (key, version))");
    n.exec(std::string("CREATE TABLE sink (event_id uuid NOT NULL") + (blind ? "" : " UNIQUE") +
           ", key text NOT NULL, delivered_seq integer NOT NULL, relay integer NOT NULL, "
           "attempt integer NOT NULL, applied_at timestamptz NOT NULL DEFAULT clock_timestamp())");
    n.exec("CREATE TABLE sink_keys (key text PRIMARY KEY, applied integer NOT NULL)");
    n.exec("CREATE TABLE sink_absorbed (event_id uuid NOT NULL, relay integer NOT NULL, "
           "attempt integer NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())");
    idem::db::exec_params(n,
                          "INSERT INTO accounts SELECT 'k' || i, 0 FROM generate_series(0, $1 - "
                          "1) i",
                          keys);
    n.exec("INSERT INTO sink_keys SELECT key, 0 FROM accounts");
}

// '{a,b,...}': a uuid[] literal of ids.
std::string uuid_array(const std::vector<std::string> &ids) {
    std::string s = "{";
    for (size_t i = 0; i < ids.size(); i++)
        s += (i ? "," : "") + ids[i];
    return s + "}";
}

// What the producers did.
struct Produced {
    std::mutex m;
    std::vector<std::string> acked;       // committed, COMMIT acknowledged
    std::vector<std::string> rolled_back; // ROLLBACK, or failed before COMMIT was sent
    std::atomic<long> tx{0}, committed_tx{0}, rolled_back_tx{0}, aborted_tx{0}, in_doubt_tx{0};
};

// One producer: txs transactions of one or two events of a random key; rollback_p of them end
// in ROLLBACK.
void produce(int p, int txs, int keys, double rollback_p, Produced &out, ErrorLog &errors) {
    Client cl(conninfo(DB));
    cl.on_connect = [](pqxx::connection &c) {
        pqxx::nontransaction n(c);
        n.exec("SET synchronous_commit = on");
    };
    for (int i = 0; i < txs; i++) {
        sleep_ms(rand_int(20, 70));
        std::string key = "k" + std::to_string(rand_int(0, keys - 1));
        int events = rand01() < 0.2 ? 2 : 1;
        bool rollback = rand01() < rollback_p;
        std::vector<std::string> ids;
        bool commit_sent = false;
        out.tx++;
        try {
            pqxx::work w(cl.get());
            for (int e = 0; e < events; e++) {
                ids.push_back(idem::db::exec_params1(
                                  w,
                                  "SELECT idempotency.idem_outbox_emit($1::text, "
                                  "jsonb_build_object('key', $2::text, "
                                  "'producer', $3::integer, 'tx', $4::integer), $2::text)::text",
                                  TOPIC, key, p, i)[0]
                                  .as<std::string>());
                if (rand01() < 0.3)
                    sleep_ms(rand_int(1, 5)); // another emit of the key may come meanwhile
                long version = idem::db::exec_params1(w,
                                                      "UPDATE accounts SET version = version + 1 "
                                                      "WHERE key = $1 RETURNING version",
                                                      key)[0]
                                   .as<long>();
                idem::db::exec_params(w,
                                      "INSERT INTO orders (event_id, key, version, producer) "
                                      "VALUES ($1::uuid, $2, $3, $4)",
                                      ids.back(), key, version, p);
                if (rand01() < 0.3)
                    sleep_ms(rand_int(1, 5)); // others queue on the key meanwhile
            }
            if (rollback) {
                w.abort();
                out.rolled_back_tx++;
            } else {
                commit_sent = true;
                w.commit();
                out.committed_tx++;
            }
            std::lock_guard<std::mutex> g(out.m);
            auto &to = rollback ? out.rolled_back : out.acked;
            to.insert(to.end(), ids.begin(), ids.end());
        } catch (const std::exception &e) {
            if (commit_sent) {
                out.in_doubt_tx++; // committed or not: the database says
            } else {
                out.aborted_tx++;
                std::lock_guard<std::mutex> g(out.m);
                out.rolled_back.insert(out.rolled_back.end(), ids.begin(), ids.end());
            }
            if (!is_transient(e))
                errors.record(e);
            cl.reset();
            backoff(rand_int(0, 4), 10, 200);
        }
    }
}

// The one value the query sql returns; $1 in it is the topic.
long scalar(pqxx::transaction_base &t, const std::string &sql) {
    if (sql.find("$1") == std::string::npos)
        return idem::db::exec1(t, sql)[0].as<long>();
    return idem::db::exec_params1(t, sql, TOPIC)[0].as<long>();
}

} // namespace

int main(int argc, char **argv) {
    if (argc == 7 && std::string(argv[1]) == "--relay")
        return relay_main(std::atoi(argv[2]), std::string(argv[3]) == "separate",
                          std::atoi(argv[4]), argv[5], std::string(argv[6]) == "blind");
    Options opt = parse_options(argc, argv);
    const int producers = 4, keys = 16;
    const int txs = opt.soak ? 1500 : 250;
    const int nrelays = opt.soak ? 6 : 4;
    const int crashes = opt.soak ? 3 : 1;
    const double rollback_p = 0.15;
    auto t0 = std::chrono::steady_clock::now();
    if (cluster_dir().empty() || ::access((cluster_dir() + "/data/PG_VERSION").c_str(), F_OK)) {
        std::fprintf(stderr, "outbox_fault_test: no cluster directory (set IDEM_PGDIR or PGHOST "
                             "to the test/pgcluster directory)\n");
        return 2;
    }
    char self[4096];
    ssize_t len = ::readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) {
        std::perror("readlink /proc/self/exe");
        return 2;
    }
    self[len] = '\0';
    std::printf("outbox_fault_test: %d producers x %d transactions (1-2 events each, %.0f%% rolled "
                "back) over %d keys; %d relay processes (even slots: done in the effect's "
                "transaction, odd: done on its own), batch %d, lease %s; relays SIGKILLed, %d "
                "crash-restart(s) of %s%s\n",
                producers, txs, rollback_p * 100, keys, nrelays, BATCH, LEASE, crashes,
                cluster_dir().c_str(), opt.broken ? " (--break: a sink without UNIQUE)" : "");
    if (!setup_test_db(DB))
        return 2;
    try {
        create_tables(keys, opt.broken);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "setup failed: %s\n", e.what());
        return 2;
    }

    // Shared memory for the relays' phases and counters: an unlinked file whose descriptor the
    // relays inherit.
    char path[] = "/tmp/outbox_fault_test.XXXXXX";
    int fd = ::mkstemp(path);
    if (fd < 0 || ::unlink(path) != 0 || ::ftruncate(fd, sizeof(Shared)) != 0) {
        std::perror("shared memory file");
        return 2;
    }
    Shared *sh = new (map_shared(fd)) Shared();
    Relays relays(nrelays, fd, sh, opt.broken, self);
    for (int i = 0; i < nrelays; i++)
        if (!relays.spawn(i))
            return 2;

    Produced prod;
    ErrorLog perrors;
    std::atomic<bool> producing{true}, finished{false};
    std::vector<std::thread> threads;
    for (int p = 0; p < producers; p++)
        threads.emplace_back([&, p] { produce(p, txs, keys, rollback_p, prod, perrors); });

    // The killer: in turn aims at a relay holding leases before the effect, one mid-transaction,
    // one whose effect committed before done, and any relay; waits up to 1 s for one to be
    // there, then stops it, reads where it really is, and kills it.
    long kills[NPhases] = {};
    std::thread killer([&] {
        const int aims[] = {Leased, MidTx, EffectCommitted, -1};
        for (int k = 0; !finished; k++) {
            relays.reap_unexpected();
            if (!producing) {
                sleep_ms(20);
                continue;
            }
            sleep_ms(rand_int(40, 140));
            int aim = aims[k % 4], slot = -1;
            auto t = std::chrono::steady_clock::now();
            while (slot < 0 && producing && seconds_since(t) < 1) {
                int first = rand_int(0, relays.size() - 1);
                for (int j = 0; j < relays.size() && slot < 0; j++) {
                    int i = (first + j) % relays.size(), ph = sh->slots[i].phase;
                    if (aim < 0 ? ph != Connecting && ph != Idle : ph == aim)
                        slot = i;
                }
                if (slot < 0)
                    ::usleep(200);
            }
            if (slot < 0)
                continue;
            int ph = relays.kill_and_replace(slot);
            if (ph >= 0) {
                kills[ph]++;
                if (opt.verbose)
                    std::printf("killed relay %d %s\n", slot, PHASE_NAMES[ph]);
            }
        }
    });

    // Crash-restarts spread over the production.
    int crashed = 0;
    bool restart_failed = false;
    for (int k = 1; k <= crashes && !restart_failed; k++) {
        long at = static_cast<long>(producers) * txs * k / (crashes + 1);
        while (prod.tx < at)
            sleep_ms(20);
        crash_server();
        crashed++;
        std::printf("crash %d: immediate shutdown after %ld producer transactions\n", k,
                    prod.tx.load());
        sleep_ms(300);
        if (start_server() != 0) {
            std::fprintf(stderr, "outbox_fault_test: restart failed, see %s/server.log\n",
                         cluster_dir().c_str());
            restart_failed = true;
        } else {
            std::printf("crash %d: restarted\n", k);
        }
    }
    for (auto &th : threads)
        th.join();
    producing = false;
    double produced_s = seconds_since(t0);

    // Drain: wait until no event is pending or leased (at most 40 s), then stop the relays.
    long left = -1;
    if (!restart_failed) {
        auto td = std::chrono::steady_clock::now();
        Client dc(conninfo(DB));
        while (seconds_since(td) < 40) {
            try {
                pqxx::nontransaction n(dc.get());
                left = idem::db::exec_params1(n,
                                              "SELECT count(*) FROM idempotency.outbox WHERE "
                                              "topic = $1 AND status IN ('pending', 'leased')",
                                              TOPIC)[0]
                           .as<long>();
                if (left == 0)
                    break;
            } catch (const std::exception &e) {
                dc.reset();
            }
            sleep_ms(100);
        }
    }
    finished = true;
    killer.join();
    relays.stop_all();
    long total_kills = 0;
    for (long k : kills)
        total_kills += k;
    Slot sum{};
    for (int i = 0; i < nrelays; i++) {
        Slot &s = sh->slots[i];
        sum.leased += s.leased, sum.effects += s.effects, sum.absorbed += s.absorbed;
        sum.done += s.done, sum.fenced += s.fenced, sum.finished += s.finished;
        sum.transient += s.transient, sum.errors += s.errors;
    }
    std::printf("producers: %.1f s, %ld transactions: %ld committed, %ld rolled back, %ld failed "
                "before COMMIT, %ld in doubt\n",
                produced_s, prod.tx.load(), prod.committed_tx.load(), prod.rolled_back_tx.load(),
                prod.aborted_tx.load(), prod.in_doubt_tx.load());
    std::printf("relays: %ld processes started; leased %ld, effects applied %ld (committed or "
                "not), duplicates absorbed %ld, done %ld, fenced IK002 %ld, finished IK003 %ld, "
                "transient errors %ld, other errors %ld\n",
                relays.started, sum.leased.load(), sum.effects.load(), sum.absorbed.load(),
                sum.done.load(), sum.fenced.load(), sum.finished.load(), sum.transient.load(),
                sum.errors.load());
    std::printf("kills:");
    for (int p = 0; p < NPhases; p++)
        std::printf(" %s %ld%s", PHASE_NAMES[p], kills[p], p + 1 < NPhases ? "," : "\n");
    perrors.print("producers");

    std::vector<Invariant> inv;
    auto row = [&](const std::string &name, long expected, long got, bool pass,
                   const std::string &note = "") {
        inv.push_back({name, keys, expected, got, pass, note});
    };
    auto at_least = [&](const std::string &name, long expected, long got,
                        const std::string &note = "") {
        row(name, expected, got, got >= expected, note.empty() ? ">= expected" : note);
    };
    if (restart_failed)
        row("server restarted after the crash", 1, 0, false);
    try {
        Client vc(conninfo(DB));
        pqxx::connection &c = *retry([&] { return &vc.get(); }, 60);
        pqxx::nontransaction n(c);
        const std::string ob = "idempotency.outbox WHERE topic = $1";
        long committed = scalar(n, "SELECT count(*) FROM orders");
        long events = scalar(n, "SELECT count(*) FROM " + ob);
        long events_with_order =
            scalar(n, "SELECT count(*) FROM idempotency.outbox o JOIN orders b USING (event_id) "
                      "WHERE o.topic = $1");
        long done = scalar(n, "SELECT count(*) FROM " + ob + " AND status = 'done'");
        long unfinished =
            scalar(n, "SELECT count(*) FROM " + ob + " AND status IN ('pending', 'leased')");
        long dead = scalar(n, "SELECT count(*) FROM " + ob + " AND status = 'dead'");
        long takeovers = scalar(n, "SELECT count(*) FROM " + ob + " AND attempt > 1");
        long max_attempt = scalar(n, "SELECT coalesce(max(attempt), 0) FROM " + ob);
        long sink_rows = scalar(n, "SELECT count(*) FROM sink");
        long sink_distinct = scalar(n, "SELECT count(DISTINCT event_id) FROM sink");
        long sink_of_committed = scalar(n, "SELECT count(DISTINCT s.event_id) FROM sink s "
                                           "JOIN orders b USING (event_id)");
        long stray = scalar(n, "SELECT count(*) FROM sink s WHERE NOT EXISTS "
                               "(SELECT FROM orders b WHERE b.event_id = s.event_id)");
        long absorbed = scalar(n, "SELECT count(*) FROM sink_absorbed");
        long out_of_order = scalar(n, "SELECT count(*) FROM sink s JOIN orders b USING (event_id) "
                                      "WHERE s.delivered_seq <> b.version");
        long keys_used = scalar(n, "SELECT count(DISTINCT key) FROM orders");
        // Per key: versions 1..n committed, effects 1..n, each applied in its version's place.
        long keys_in_order = scalar(
            n, "SELECT count(*) FROM (SELECT key, count(*) AS n, max(version) AS v FROM orders "
               "GROUP BY key) b JOIN (SELECT s.key, count(*) AS n, "
               "count(*) FILTER (WHERE s.delivered_seq = o.version) AS placed, "
               "max(s.delivered_seq) AS m FROM sink s JOIN orders o USING (event_id) "
               "GROUP BY s.key) e USING (key) WHERE b.n = b.v AND e.n = b.n AND e.placed = b.n "
               "AND e.m = b.n");
        long seq_vs_version = scalar(
            n, "SELECT count(*) FROM (SELECT b.version, row_number() OVER (PARTITION BY b.key "
               "ORDER BY o.seq) AS rn FROM orders b JOIN idempotency.outbox o USING (event_id) "
               "WHERE o.topic = $1) x WHERE version <> rn");
        std::vector<std::string> acked, rolled;
        {
            std::lock_guard<std::mutex> g(prod.m);
            acked = prod.acked;
            rolled = prod.rolled_back;
        }
        long acked_kept = idem::db::exec_params1(n,
                                                 "SELECT count(*) FROM idempotency.outbox o "
                                                 "JOIN orders b USING (event_id) WHERE "
                                                 "o.event_id = ANY ($1::uuid[])",
                                                 uuid_array(acked))[0]
                              .as<long>();
        long rolled_found =
            idem::db::exec_params1(n,
                                   "SELECT (SELECT count(*) FROM idempotency.outbox WHERE event_id "
                                   "= ANY ($1::uuid[])) + (SELECT count(*) FROM orders WHERE "
                                   "event_id = ANY ($1::uuid[])) + (SELECT count(*) FROM sink "
                                   "WHERE event_id = ANY ($1::uuid[]))",
                                   uuid_array(rolled))[0]
                .as<long>();

        row("committed events = business rows", committed, events,
            events == committed && events_with_order == committed,
            "with their order row: " + std::to_string(events_with_order));
        row("acknowledged commits kept", (long)acked.size(), acked_kept,
            acked_kept == (long)acked.size(), "synchronous_commit = on");
        row("done events = committed events", committed, done, done == committed);
        row("distinct effects = committed events", committed, sink_of_committed,
            sink_of_committed == committed && sink_distinct == committed, "none lost");
        row("effect rows (none applied twice)", committed, sink_rows, sink_rows == committed,
            "distinct event ids: " + std::to_string(sink_distinct));
        row("effects of no committed event", 0, stray, stray == 0);
        at_least("rolled-back events (>= 1)", 1, (long)rolled.size(),
                 std::to_string(prod.rolled_back_tx.load()) + " ROLLBACKs, " +
                     std::to_string(prod.aborted_tx.load()) + " failed before COMMIT");
        row("rolled-back events in outbox, orders or sink", 0, rolled_found, rolled_found == 0,
            "never delivered");
        at_least("duplicates absorbed by the UNIQUE (>= kills)", kills[EffectCommitted], absorbed,
                 "kills after the effect committed; effects tried by relays: " +
                     std::to_string(sum.effects.load() + sum.absorbed.load()));
        row("effects out of emit order", 0, out_of_order, out_of_order == 0,
            "delivered_seq <> the key's version");
        row("keys with effects 1..n in emit order", keys_used, keys_in_order,
            keys_in_order == keys_used);
        row("outbox seq order <> commit order (per key)", 0, seq_vs_version, seq_vs_version == 0,
            "emit before the business row");
        row("events left pending or leased", 0, unfinished, unfinished == 0);
        row("events dead", 0, dead, dead == 0,
            "max attempt " + std::to_string(max_attempt) + " (idempotency.max_attempts 20)");
        at_least("lease takeovers (events with attempt > 1)", 1, takeovers);
        at_least("relays killed holding leases, before effect", 1, kills[Leased]);
        at_least("relays killed mid-transaction", 1, kills[MidTx]);
        at_least("relays killed after effect, before done", 1, kills[EffectCommitted]);
        at_least("relays SIGKILLed in total", 3, total_kills,
                 "others: " + std::to_string(total_kills - kills[Leased] - kills[MidTx] -
                                             kills[EffectCommitted]));
        at_least("server crash-restarts", 1, crashed);
        row("unexpected errors (producers, relays)", 0, perrors.count() + sum.errors,
            perrors.count() + sum.errors == 0, "not a lost connection, IK002 or IK003");
        row("relay processes that exited by themselves", 0, relays.unexpected_exits,
            relays.unexpected_exits == 0);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "verification failed: %s\n", e.what());
        row("verification", 1, 0, false, e.what());
    }
    ensure_running();
    drop_test_db(DB);
    return print_invariants("outbox_fault_test", inv, seconds_since(t0));
}
