// The purchase demo, every party a process of its own. A payment provider sends the
// shop Standard Webhooks: payment.succeeded twice under one id, the same fact under a second id,
// last a late payment.pending. The shop's endpoint verifies, receives into the inbox, moves the
// order AWAITING_PAYMENT -> PAID and emits order.paid (dedup key order:<id>:paid) in one
// transaction. A license worker issues the license (UNIQUE(order_id)) and is SIGKILLed before
// idem_outbox_done; a second worker takes the event over after the lease. The relay delivers the
// license.issued event to a receiver (the CRM, its own database) as a Standard Webhook signed
// with idem_webhook_sign_standard; the receiver answers too late once, the relay retries, the
// receiver's inbox dedups. Every expected number is read from the databases.
//
// Usage: purchase_demo [--ci]   (libpq environment; creates the databases purchase_demo and
// purchase_demo_crm, kept for inspection, dropped after a pass with --ci). Prints the PASS/FAIL
// table; exit status 0 all PASS, 1 a FAIL, 2 a setup error.
#include "common.hpp"        // idem::db: the libpqxx calls that differ between versions
#include "purchase_demo.hpp" // HTTP over a Unix socket, whole log lines, the table

#include <pqxx/pqxx>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

namespace {

using demo::say;
using idemtest::conninfo;
const char *const kDb = "purchase_demo";
const char *const kCrmDb = "purchase_demo_crm";
const char *const kProviderSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"; // provider -> shop
const char *const kOutboundSecret =                                           // shop -> CRM
    "whsec_c2hvcCBvdXRib3VuZCB3ZWJob29rIGtleSAyMDI2ISE=";
const std::string kOrder = "order-4711";
std::string g_dir; // the sockets: <dir>/shop.sock (the shop's endpoint), <dir>/crm.sock

template <typename... Args>
std::string one(pqxx::connection &c, const std::string &sql, Args... a) {
    pqxx::nontransaction n(c);
    pqxx::row r = idem::db::exec_params1(n, sql, a...);
    return r[0].is_null() ? "NULL" : r[0].c_str();
}

// "leased attempt 1": the state of the outbox events of a topic.
std::string events(pqxx::connection &c, const char *topic) {
    return one(c,
               "SELECT string_agg(status || ' attempt ' || attempt, ', ') FROM "
               "idempotency.outbox WHERE topic = $1",
               topic);
}

// Leases a batch of topic's events: (event id, attempt, payload as text, payload's order).
using Event = std::tuple<std::string, int, std::string, std::string>;
std::vector<Event> next(pqxx::connection &c, const char *topic, const char *lease) {
    pqxx::nontransaction n(c);
    std::vector<Event> batch;
    for (auto row :
         idem::db::exec_params(n,
                               "SELECT event_id::text, attempt, payload::text, "
                               "payload->>'order' FROM idempotency.idem_outbox_next($1, 10, $2)",
                               topic, lease))
        batch.emplace_back(row[0].c_str(), row[1].as<int>(), row[2].c_str(), row[3].c_str());
    return batch;
}

// The shop's webhook endpoint: signature, inbox, state machine and outbox in one transaction.
// The ordering guard (entity pi_4711, the provider's sequence) makes a late event stale before
// any business code runs: the state machine would refuse PAID -> PENDING too, but the mirrored
// provider_status (last write wins) has only the guard to keep it right.
void shop_endpoint(int listen_fd) {
    pqxx::connection c(conninfo(kDb));
    demo::serve(listen_fd, [&](int fd, const demo::Message &m) {
        pqxx::work tx(c);
        pqxx::row r = idem::db::exec_params1(
            tx,
            "SELECT idempotency.idem_webhook_receive('shop', 'standard', ARRAY[$1], $2, s.raw, $4, "
            "$5, "
            "event_type => s.b->>'type', entity_key => s.b->'data'->>'payment', "
            "entity_seq => (s.b->>'sequence')::bigint), s.b->>'type', s.b->'data'->>'order', "
            "s.b->'data'->>'payment' FROM (SELECT $3::text AS raw, $3::text::jsonb AS b) s",
            kProviderSecret, m.header("webhook-id"), m.body, m.header("webhook-signature"),
            m.header("webhook-timestamp"));
        std::string outcome = r[0].c_str(), type = r[1].c_str(), order = r[2].c_str();
        long moved = 0;
        std::string emitted = "-";
        if (outcome == "new" && type == "payment.succeeded") {
            // The business guard: only AWAITING_PAYMENT (or PENDING) becomes PAID, so another
            // event id for the same payment moves nothing.
            moved = idem::db::exec_params(tx,
                                          "UPDATE orders SET status = 'PAID', payment_id = $2 "
                                          "WHERE id = $1 AND status IN ('AWAITING_PAYMENT', "
                                          "'PENDING')",
                                          order, r[3].c_str())
                        .affected_rows();
            // order.paid for a PAID order, emitted again on every such event: the producer's
            // dedup key keeps it one event (the emit returns the first id).
            pqxx::result e = idem::db::exec_params(
                tx,
                "SELECT idempotency.idem_outbox_emit('order.paid', jsonb_build_object('order', id, "
                "'payment', payment_id), key => id, dedup_key => 'order:' || id || ':paid') "
                "FROM orders WHERE id = $1 AND status = 'PAID'",
                order);
            if (!e.empty())
                emitted = e[0][0].c_str();
        } else if (outcome == "new" && type == "payment.pending") {
            moved = idem::db::exec_params(tx,
                                          "UPDATE orders SET status = 'PENDING' WHERE id = $1 "
                                          "AND status = 'AWAITING_PAYMENT'",
                                          order)
                        .affected_rows();
        }
        if (outcome == "new") // the provider's view of the payment, mirrored
            idem::db::exec_params(tx, "UPDATE orders SET provider_status = $2 WHERE id = $1", order,
                                  type.substr(type.find('.') + 1));
        tx.commit();
        int http = outcome == "invalid_signature"                                  ? 401
                   : outcome == "stale_timestamp" || outcome == "invalid_event_id" ? 400
                                                                                   : 200;
        demo::respond(fd, http,
                      "outcome=" + outcome + " moved=" + std::to_string(moved) +
                          " order_paid=" + emitted);
    });
}

// The license worker. Two transactions, on purpose: the license commits, then
// idem_outbox_done. That is the shape of every worker whose effect is not in the outbox's
// database (a license server, an e-mail, a payment API), and the one the incident needs: a crash
// between the two leaves an issued license and an unfinished event, which the next worker takes
// over after the lease. UNIQUE(order_id) with ON CONFLICT DO NOTHING makes that second issue a
// no-op. (With the effect in this database, insert and done in one transaction are the better
// choice: such a crash cannot happen, and a worker that outlived its lease gets IK002 from done
// and rolls its insert back; UNIQUE(order_id) still guards the effect.) The license.issued
// notification is emitted with the license, under its own dedup key.
void license_worker(int report, bool die_after_issue) {
    pqxx::connection c(conninfo(kDb));
    int pid = int(getpid());
    for (;;) {
        for (const auto &[id, attempt, body, order] : next(c, "order.paid", "2 seconds")) {
            say("    [worker pid %d] leased order.paid %s, attempt %d, lease 2 s", pid, id.c_str(),
                attempt);
            pqxx::work tx(c);
            long issued = idem::db::exec_params(
                              tx,
                              "INSERT INTO licenses (order_id, license_key, issued_by_pid) "
                              "VALUES ($1::text, 'LIC-' || upper(left(md5($1::text), 12)), $2) "
                              "ON CONFLICT (order_id) DO NOTHING",
                              order, pid)
                              .affected_rows();
            idem::db::exec_params(
                tx,
                "SELECT idempotency.idem_outbox_emit('webhooks.out', jsonb_build_object('type', "
                "'license.issued', 'data', jsonb_build_object('order', order_id, 'license', "
                "license_key)), key => order_id, dedup_key => 'order:' || order_id || "
                "':license.issued') FROM licenses WHERE order_id = $1",
                order);
            tx.commit();
            say(issued ? "    [worker pid %d] license for %s issued (committed)"
                       : "    [worker pid %d] license for %s already issued: INSERT ... ON "
                         "CONFLICT (order_id) DO NOTHING wrote 0 rows",
                pid, order.c_str());
            if (die_after_issue) { // the parent SIGKILLs this process now, before done
                dprintf(report, "issued=%ld\n", issued);
                for (;;)
                    pause();
            }
            std::string done;
            try {
                done = one(c, "SELECT idempotency.idem_outbox_done($1::uuid, $2)", id, attempt);
            } catch (const pqxx::sql_error &e) {
                done = "refused_" + idem::db::sqlstate(e);
            }
            say("    [worker pid %d] idempotency.idem_outbox_done(attempt %d): %s", pid, attempt,
                done.c_str());
            dprintf(report, "attempt=%d issued=%ld done=%s\n", attempt, issued, done.c_str());
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
}

// The relay: outbox topic webhooks.out -> the CRM's endpoint as Standard Webhooks. webhook-id
// is the event id (the same on every retry: what the receiver dedups on), each attempt signed
// anew with its own timestamp. No answer within 2 s: idem_outbox_fail, retried after a backoff.
void relay(int report) {
    pqxx::connection c(conninfo(kDb));
    for (;;) {
        for (const auto &[id, attempt, body, order] : next(c, "webhooks.out", "10 seconds")) {
            std::string ts = std::to_string(std::time(nullptr)), answer, result;
            std::string sig =
                one(c, "SELECT idempotency.idem_webhook_sign_standard($1, $2, $3, $4)",
                    kOutboundSecret, id, ts, body);
            int http = demo::post(
                g_dir + "/crm.sock",
                {{"webhook-id", id}, {"webhook-timestamp", ts}, {"webhook-signature", sig}}, body,
                2000, &answer);
            if (http >= 200 && http < 300)
                result = one(c, "SELECT idempotency.idem_outbox_done($1::uuid, $2)", id, attempt);
            else
                result =
                    one(c, "SELECT idempotency.idem_outbox_fail($1::uuid, $2, true, $3)", id,
                        attempt, http ? "HTTP " + std::to_string(http) : "no answer within 2 s");
            say("    [relay pid %d] POST license.issued webhook-id %s attempt %d: %s -> %s",
                int(getpid()), id.c_str(), attempt,
                http ? ("HTTP " + std::to_string(http) + " " + answer).c_str()
                     : "no answer within 2 s",
                result.c_str());
            dprintf(report, "attempt=%d http=%d answer=%s result=%s\n", attempt, http,
                    answer.empty() ? "-" : answer.c_str(), result.c_str());
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
}

// The CRM's endpoint (its own database): verify + inbox + the notification row in one
// transaction. Its first answer comes only after 3 s (after the commit), too late for the relay.
void crm_endpoint(int listen_fd, int report) {
    pqxx::connection c(conninfo(kCrmDb));
    bool slow = true;
    demo::serve(listen_fd, [&](int fd, const demo::Message &m) {
        pqxx::work tx(c);
        std::string id = m.header("webhook-id");
        std::string outcome =
            idem::db::exec_params1(tx,
                                   "SELECT idempotency.idem_webhook_receive('crm', 'standard', "
                                   "ARRAY[$1], $2, $3::text, $4, $5, "
                                   "event_type => 'license.issued')",
                                   kOutboundSecret, id, m.body, m.header("webhook-signature"),
                                   m.header("webhook-timestamp"))[0]
                .c_str();
        if (outcome == "new")
            idem::db::exec_params(tx,
                                  "INSERT INTO notifications (webhook_id, event_type, order_id, "
                                  "license_key) SELECT $1, b->>'type', b->'data'->>'order', "
                                  "b->'data'->>'license' FROM (SELECT $2::jsonb AS b) s",
                                  id, m.body);
        tx.commit();
        say("    [receiver pid %d] webhook-id %s: %s%s", int(getpid()), id.c_str(), outcome.c_str(),
            slow ? " (committed; the answer leaves only after 3 s)" : "");
        dprintf(report, "outcome=%s\n", outcome.c_str());
        if (slow)
            std::this_thread::sleep_for(std::chrono::milliseconds(3000));
        slow = false;
        demo::respond(fd, outcome == "invalid_signature" ? 401 : 200, outcome);
    });
}

// The provider: signs a payment event for order-4711 (payment pi_4711) and posts it to the shop.
std::string g_answer; // the shop's last answer
int deliver(pqxx::connection &c, const std::string &msg_id, long long ts, const std::string &type,
            int sequence) {
    std::string body = "{\"type\":\"" + type + "\",\"sequence\":" + std::to_string(sequence) +
                       ",\"data\":{\"order\":\"" + kOrder +
                       "\",\"payment\":\"pi_4711\",\"amount_cents\":4900,\"currency\":\"EUR\"}}";
    std::string sig = one(c, "SELECT idempotency.idem_webhook_sign_standard($1, $2, $3, $4)",
                          kProviderSecret, msg_id, std::to_string(ts), body);
    g_answer.clear();
    int http = demo::post(g_dir + "/shop.sock",
                          {{"webhook-id", msg_id},
                           {"webhook-timestamp", std::to_string(ts)},
                           {"webhook-signature", sig}},
                          body, 10000, &g_answer);
    say("    provider -> shop: %s %s (sequence %d): HTTP %d %s", type.c_str(), msg_id.c_str(),
        sequence, http, g_answer.c_str());
    return http;
}

void setup() {
    for (const char *db : {kDb, kCrmDb}) {
        pqxx::connection admin(conninfo("postgres"));
        pqxx::nontransaction n(admin);
        n.exec(std::string("DROP DATABASE IF EXISTS ") + db + " WITH (FORCE)");
        n.exec(std::string("CREATE DATABASE ") + db);
        pqxx::connection c(conninfo(db));
        pqxx::nontransaction t(c);
        t.exec("CREATE EXTENSION idempotency");
    }
    pqxx::connection shop(conninfo(kDb));
    pqxx::work t(shop);
    // order_history: every status change, so that "never rolled back to PENDING" is read.
    t.exec("CREATE TABLE orders (id text PRIMARY KEY, status text NOT NULL CHECK (status IN "
           "('AWAITING_PAYMENT', 'PENDING', 'PAID')), payment_id text, provider_status text);"
           "CREATE TABLE order_history (n bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, "
           "order_id text NOT NULL, from_status text NOT NULL, to_status text NOT NULL);"
           "CREATE FUNCTION log_order_status() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
           "INSERT INTO order_history (order_id, from_status, to_status) VALUES (NEW.id, "
           "OLD.status, NEW.status); RETURN NEW; END $$;"
           "CREATE TRIGGER order_history AFTER UPDATE OF status ON orders FOR EACH ROW WHEN "
           "(OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION log_order_status();"
           "CREATE TABLE licenses (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, order_id "
           "text NOT NULL UNIQUE REFERENCES orders, license_key text NOT NULL, issued_by_pid int "
           "NOT NULL);"
           "INSERT INTO orders (id, status) VALUES ('order-4711', 'AWAITING_PAYMENT')");
    t.commit();
    pqxx::connection crm(conninfo(kCrmDb));
    pqxx::nontransaction n(crm);
    // Deliberately not UNIQUE(webhook_id): only the receiver's inbox stands between a redelivery
    // and a second notification.
    n.exec("CREATE TABLE notifications (n bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, "
           "webhook_id text NOT NULL, event_type text NOT NULL, order_id text NOT NULL, "
           "license_key text NOT NULL)");
}

// A check: observed against expected, or against the condition ok when given.
std::vector<demo::Row> g_rows;
void check(const std::string &what, const std::string &expected, const std::string &observed,
           int ok = -1) {
    bool pass = ok < 0 ? observed == expected : ok == 1;
    g_rows.push_back({what, expected, observed, pass});
    say("    -> %s: %s", pass ? "PASS" : "FAIL", observed.c_str());
}

int run() {
    setup();
    char tmpl[] = "/tmp/purchase_demo.XXXXXX";
    if (!mkdtemp(tmpl))
        throw std::runtime_error("mkdtemp failed");
    g_dir = tmpl;
    int shop_l = demo::listen_unix(g_dir + "/shop.sock");
    int crm_l = demo::listen_unix(g_dir + "/crm.sock");
    int shop_r, crm_r, relay_r, w1_r, w2_r;
    pid_t shop = demo::spawn("shop", &shop_r, [&](int) { shop_endpoint(shop_l); });
    pid_t crm = demo::spawn("receiver", &crm_r, [&](int r) { crm_endpoint(crm_l, r); });
    close(shop_l);
    close(crm_l);
    pqxx::connection db(conninfo(kDb)), crm_db(conninfo(kCrmDb));
    say("purchase demo: databases %s (the shop) and %s (the receiver), idempotency %s", kDb, kCrmDb,
        one(db, "SELECT extversion FROM pg_extension WHERE extname = 'idempotency'").c_str());
    say("shop endpoint pid %d, receiver pid %d; %s is AWAITING_PAYMENT", int(shop), int(crm),
        kOrder.c_str());
    long long now = std::time(nullptr);
    const std::string kA = "evt_pi_4711_succeeded", kB = "evt_pi_4711_succeeded_recon";
    auto answer = [](int http) { return "HTTP " + std::to_string(http) + " " + g_answer; };

    say("\n[1] payment.succeeded (sequence 2), webhook-id %s", kA.c_str());
    int http = deliver(db, kA, now, "payment.succeeded", 2);
    std::string first_id = demo::field(g_answer, "order_paid");
    check("1 payment.succeeded, id A", "HTTP 200 outcome=new moved=1 order_paid=<id>", answer(http),
          http == 200 && g_answer == "outcome=new moved=1 order_paid=" + first_id &&
              first_id.size() == 36);

    say("\n[2] the provider retries: the same webhook-id %s, signed anew", kA.c_str());
    http = deliver(db, kA, now + 3, "payment.succeeded", 2);
    check("2 the same delivery again, id A", "HTTP 200 outcome=duplicate moved=0 order_paid=-",
          answer(http));

    say("\n[3] the provider's reconciliation: the same payment under a second id %s", kB.c_str());
    http = deliver(db, kB, now + 5, "payment.succeeded", 3);
    check("3 the same fact under a second id B",
          "HTTP 200 outcome=new moved=0 order_paid=<the same id>", answer(http),
          http == 200 && g_answer == "outcome=new moved=0 order_paid=" + first_id);

    say("\n[4] worker 1 takes order.paid, issues the license, is SIGKILLed before "
        "idem_outbox_done");
    pid_t w1 = demo::spawn("worker", &w1_r, [&](int r) { license_worker(r, true); });
    std::string line = demo::read_line(w1_r, 20000);
    int st = demo::stop(w1, SIGKILL);
    bool killed = WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
    say("    worker pid %d: %s", int(w1), killed ? "SIGKILL" : "gone before the SIGKILL");
    check("4 worker 1 issues, is killed before done",
          "killed; issued=1; 1 license by pid " + std::to_string(w1) +
              "; order.paid leased attempt 1",
          std::string(killed ? "killed; " : "not killed; ") + line + "; " +
              one(db, "SELECT count(*) || ' license by pid ' || string_agg(issued_by_pid::text, "
                      "',') FROM licenses") +
              "; order.paid " + events(db, "order.paid"));

    say("\n[5] worker 2 starts; order.paid comes back to it when worker 1's lease expires");
    pid_t w2 = demo::spawn("worker", &w2_r, [&](int r) { license_worker(r, false); });
    line = demo::read_line(w2_r, 20000);
    check("5 worker 2 takes over after the lease",
          "attempt=2 issued=0 done=done; order.paid done attempt 2; 1 license",
          line + "; order.paid " + events(db, "order.paid") + "; " +
              one(db, "SELECT count(*) FROM licenses") + " license");

    say("\n[6] the relay starts: license.issued to the receiver as a signed Standard Webhook");
    pid_t rel = demo::spawn("relay", &relay_r, [&](int r) { relay(r); });
    for (int i = 0; i < 300 && events(db, "webhooks.out").rfind("done", 0) != 0; i++)
        std::this_thread::sleep_for(std::chrono::milliseconds(100)); // up to 30 s
    std::string r1 = demo::read_line(relay_r, 1000), r2 = demo::read_line(relay_r, 1000);
    std::string c1 = demo::read_line(crm_r, 1000), c2 = demo::read_line(crm_r, 1000);
    check("6 relay: first answer too late, redelivered",
          "receiver new, duplicate; relay pending, done; done attempt 2",
          "receiver " + demo::field(c1, "outcome") + ", " + demo::field(c2, "outcome") +
              "; relay " + demo::field(r1, "result") + ", " + demo::field(r2, "result") + "; " +
              events(db, "webhooks.out"),
          c1 == "outcome=new" && c2 == "outcome=duplicate" &&
              r1 == "attempt=1 http=0 answer=- result=pending" &&
              r2 == "attempt=2 http=200 answer=duplicate result=done" &&
              events(db, "webhooks.out") == "done attempt 2");

    say("\n[7] last, a late payment.pending (sequence 1)");
    http = deliver(db, "evt_pi_4711_pending", now - 2, "payment.pending", 1);
    check("7 late payment.pending (sequence 1)",
          "HTTP 200 outcome=stale moved=0 order_paid=-; order PAID, provider status succeeded",
          answer(http) + "; order " +
              one(db, "SELECT status || ', provider status ' || provider_status FROM orders"));

    say("\n[8] the killed worker's late idempotency.idem_outbox_done(attempt 1), had it lived on");
    std::string late;
    try {
        late = "accepted: " + one(db, "SELECT idempotency.idem_outbox_done($1::uuid, 1)", first_id);
    } catch (const pqxx::sql_error &e) {
        late = "refused " + idem::db::sqlstate(e);
    }
    check("8 worker 1's late done (attempt 1)", "refused IK003", late);
    for (pid_t p : {shop, rel, crm, w2})
        demo::stop(p);

    say("\n[9] the numbers, read from the databases");
    check("PAID transitions", "1 (AWAITING_PAYMENT -> PAID)",
          one(db, "SELECT count(*) FILTER (WHERE to_status = 'PAID') || ' (' || "
                  "string_agg(from_status || ' -> ' || to_status, ', ' ORDER BY n) || ')' "
                  "FROM order_history"));
    check("licenses (UNIQUE(order_id))", "1", one(db, "SELECT count(*) FROM licenses"));
    check("order.paid events", "1: done attempt 2",
          one(db, "SELECT count(*) FROM idempotency.outbox WHERE topic = 'order.paid'") + ": " +
              events(db, "order.paid"));
    check("delivered notifications", "1 row; receiver inbox 1 event",
          one(crm_db, "SELECT (SELECT count(*) FROM notifications) || ' row; receiver inbox ' "
                      "|| (SELECT count(*) FROM idempotency.inbox) || ' event'"));
    check("order never rolled back to PENDING", "0 transitions to PENDING; now PAID",
          one(db, "SELECT count(*) FILTER (WHERE to_status = 'PENDING') || ' transitions to "
                  "PENDING; now ' || (SELECT status FROM orders) FROM order_history"));
    check("shop inbox, one row per webhook-id",
          kA + " done, " + kB + " done, evt_pi_4711_pending stale",
          one(db, "SELECT string_agg(event_id || ' ' || status, ', ' ORDER BY received_at) "
                  "FROM idempotency.inbox"));
    return 0;
}

} // namespace

int main(int argc, char **argv) {
    bool ci = argc == 2 && std::string(argv[1]) == "--ci";
    if (argc > 2 || (argc == 2 && !ci)) {
        std::fprintf(stderr, "usage: %s [--ci]\n", argv[0]);
        return 2;
    }
    int rc = 0;
    try {
        run();
    } catch (const std::exception &e) {
        std::fprintf(stderr, "purchase demo: %s\n", e.what());
        rc = 2;
    }
    for (pid_t p : std::vector<pid_t>(demo::children))
        demo::stop(p, SIGKILL);
    if (!g_dir.empty()) {
        unlink((g_dir + "/shop.sock").c_str());
        unlink((g_dir + "/crm.sock").c_str());
        rmdir(g_dir.c_str());
    }
    demo::print_table(g_rows);
    long failed =
        std::count_if(g_rows.begin(), g_rows.end(), [](const demo::Row &r) { return !r.pass; });
    std::printf("\n%zu checks, %ld failed\n", g_rows.size(), failed);
    if (rc == 0 && failed == 0 && ci)
        for (const char *db : {kDb, kCrmDb})
            idemtest::drop_test_db(db);
    return rc ? rc : failed ? 1 : 0;
}
