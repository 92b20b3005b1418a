// Inbox demo: a payment provider sends payment.succeeded webhooks (Standard Webhooks) at least
// once. Each order is paid once and gets one license although the provider delivers the event
// three times (once re-signed with a new timestamp), sequentially and concurrently from
// separate connections; a forged and a too-old delivery are refused and change nothing.
//
// Usage: inbox_demo [--ci]   (connection from PGHOST / PGPORT / PGUSER; creates and uses a fresh
// database inbox_demo). Prints a PASS/FAIL table and exits non-zero on any FAIL.
#include "common.hpp" // idem::db: the libpqxx calls that differ between versions; Barrier, conninfo

#include <pqxx/pqxx>

#include <cstdio>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

namespace {

const char *const kSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"; // the provider's secret
const char *const kDb = "inbox_demo";
using idemtest::conninfo; // "dbname=<db>" over the libpq environment

struct Check {
    std::string what;
    bool ok;
    std::string detail;
};
std::vector<Check> checks;

void check(const std::string &what, bool ok, const std::string &detail = {}) {
    checks.push_back({what, ok, detail});
}

// A delivery as the provider sends it: headers and the raw body.
struct Delivery {
    std::string msg_id, timestamp, body, signature;
};

std::string body_for(const std::string &order, const std::string &payment) {
    return "{\"type\":\"payment.succeeded\",\"data\":{\"order\":\"" + order + "\",\"payment\":\"" +
           payment + "\"}}";
}

// The provider signs with the Standard Webhooks scheme (v1, HMAC-SHA256 over id.ts.body).
Delivery sign(pqxx::connection &provider, const std::string &secret, const std::string &msg_id,
              long long ts, const std::string &body) {
    pqxx::work tx(provider);
    std::string sig =
        idem::db::exec_params1(tx, "SELECT idempotency.idem_webhook_sign_standard($1, $2, $3, $4)",
                               secret, msg_id, std::to_string(ts), body)[0]
            .as<std::string>();
    tx.commit();
    return {msg_id, std::to_string(ts), body, sig};
}

// The shop's webhook endpoint: verify + dedup + business effect in one transaction.
// Returns the inbox outcome (new, duplicate, invalid_signature, stale_timestamp, ...).
std::string handle(pqxx::connection &shop, const Delivery &d, const std::string &order,
                   const std::string &payment) {
    for (int tries = 0;; tries++) {
        try {
            pqxx::work tx(shop);
            std::string outcome =
                idem::db::exec_params1(
                    tx,
                    "SELECT idempotency.idem_webhook_receive('shop', 'standard', ARRAY[$1], $2, "
                    "$3, $4, $5, event_type => 'payment.succeeded')",
                    kSecret, d.msg_id, d.body, d.signature, d.timestamp)[0]
                    .as<std::string>();
            if (outcome == "new") {
                // the second layer: a business key and a guarded state transition
                pqxx::result r = idem::db::exec_params(
                    tx,
                    "UPDATE shop_orders SET status = 'PAID', provider_payment_id = $2 "
                    "WHERE id = $1 AND status = 'PENDING'",
                    order, payment);
                if (r.affected_rows() == 1)
                    idem::db::exec_params(
                        tx,
                        "INSERT INTO licenses (order_id, license_key) VALUES ($1, "
                        "'LIC-' || $1)",
                        order);
            }
            tx.commit();
            return outcome;
        } catch (const pqxx::serialization_failure &) {
            if (tries >= 5)
                throw;
        }
    }
}

using idemtest::Barrier; // lets threads start their deliveries at the same moment

long long count(pqxx::connection &c, const std::string &sql) {
    pqxx::work tx(c);
    long long n = idem::db::exec1(tx, sql)[0].as<long long>();
    tx.commit();
    return n;
}

std::string one(pqxx::connection &c, const std::string &sql) {
    pqxx::work tx(c);
    pqxx::row r = idem::db::exec1(tx, sql);
    tx.commit();
    return r[0].is_null() ? "NULL" : r[0].as<std::string>();
}

int run() {
    {
        pqxx::connection admin(conninfo("postgres"));
        pqxx::nontransaction nt(admin);
        nt.exec(std::string("DROP DATABASE IF EXISTS ") + kDb + " WITH (FORCE)");
        nt.exec(std::string("CREATE DATABASE ") + kDb);
    }
    pqxx::connection setup(conninfo(kDb));
    {
        pqxx::work tx(setup);
        tx.exec("CREATE EXTENSION idempotency");
        tx.exec("CREATE TABLE shop_orders (id text PRIMARY KEY, status text NOT NULL CHECK "
                "(status IN ('PENDING', 'PAID')), provider_payment_id text UNIQUE)");
        tx.exec("CREATE TABLE licenses (order_id text PRIMARY KEY REFERENCES shop_orders, "
                "license_key text NOT NULL)");
        tx.exec("INSERT INTO shop_orders (id, status) VALUES ('order-1', 'PENDING'), "
                "('order-2', 'PENDING'), ('order-3', 'PENDING')");
        tx.commit();
    }
    pqxx::connection provider(conninfo(kDb));

    // The signing path reproduces the published Standard Webhooks vector.
    Delivery vec = sign(provider, kSecret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330,
                        "{\"test\": 2432232314}");
    check("signature = published Standard Webhooks vector",
          vec.signature == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", vec.signature);

    long long now = static_cast<long long>(std::time(nullptr));

    // Scene 1, sequential: order-1's payment.succeeded three times, the third re-signed later.
    {
        pqxx::connection shop(conninfo(kDb));
        std::string body = body_for("order-1", "pay_1");
        Delivery first = sign(provider, kSecret, "msg_order1", now, body);
        Delivery resigned = sign(provider, kSecret, "msg_order1", now + 5, body);
        std::string o1 = handle(shop, first, "order-1", "pay_1");
        std::string o2 = handle(shop, first, "order-1", "pay_1");
        std::string o3 = handle(shop, resigned, "order-1", "pay_1");
        check("sequential: outcomes new, duplicate, duplicate (re-signed)",
              o1 == "new" && o2 == "duplicate" && o3 == "duplicate", o1 + "," + o2 + "," + o3);
    }

    // Scene 2, concurrent: order-2's event three times at once from three connections (one
    // re-signed), repeated in rounds with a fresh event id each round on its own order.
    {
        const int rounds = 5;
        int exactly_one_new = 0;
        std::string detail;
        for (int round = 0; round < rounds; round++) {
            std::string order = round == 0 ? "order-2" : "order-2-" + std::to_string(round);
            if (round > 0) {
                pqxx::work tx(setup);
                idem::db::exec_params(
                    tx, "INSERT INTO shop_orders (id, status) VALUES ($1, 'PENDING')", order);
                tx.commit();
            }
            std::string payment = "pay_2_" + std::to_string(round);
            std::string msg = "msg_" + order;
            std::string body = body_for(order, payment);
            std::vector<Delivery> ds = {sign(provider, kSecret, msg, now, body),
                                        sign(provider, kSecret, msg, now, body),
                                        sign(provider, kSecret, msg, now + 7, body)};
            std::vector<std::string> outcomes(ds.size());
            std::vector<std::string> errors(ds.size());
            Barrier barrier(static_cast<int>(ds.size()));
            std::vector<std::thread> threads;
            for (size_t i = 0; i < ds.size(); i++)
                threads.emplace_back([&, i] {
                    try {
                        pqxx::connection shop(conninfo(kDb));
                        barrier.wait();
                        outcomes[i] = handle(shop, ds[i], order, payment);
                    } catch (const std::exception &e) {
                        errors[i] = e.what();
                    }
                });
            for (auto &t : threads)
                t.join();
            int news = 0, dups = 0;
            for (size_t i = 0; i < ds.size(); i++) {
                if (!errors[i].empty())
                    detail = "error: " + errors[i];
                news += outcomes[i] == "new";
                dups += outcomes[i] == "duplicate";
            }
            if (news == 1 && dups == 2)
                exactly_one_new++;
        }
        check("concurrent: exactly one new per event in every round", exactly_one_new == rounds,
              std::to_string(exactly_one_new) + "/" + std::to_string(rounds) + " rounds " + detail);
        check("concurrent: every order PAID once with one license",
              count(setup, "SELECT count(*) FROM shop_orders WHERE id LIKE 'order-2%' AND "
                           "status = 'PAID'") == rounds &&
                  count(setup, "SELECT count(*) FROM licenses WHERE order_id LIKE 'order-2%'") ==
                      rounds);
    }

    // Scene 3, refused: a forged delivery (wrong secret) and a too-old one (signed an hour ago).
    {
        pqxx::connection shop(conninfo(kDb));
        std::string body = body_for("order-3", "pay_3");
        std::string forger_secret = "whsec_" + std::string("Zm9yZ2VkIGtleSBvZiB0aGUgYXR0YWNrZXI=");
        Delivery forged = sign(provider, forger_secret, "msg_order3", now, body);
        Delivery old = sign(provider, kSecret, "msg_order3_old", now - 3600, body);
        Delivery tampered = sign(provider, kSecret, "msg_order3_t", now, body);
        tampered.body = body_for("order-1", "pay_3"); // body swapped after signing
        std::string of = handle(shop, forged, "order-3", "pay_3");
        std::string oo = handle(shop, old, "order-3", "pay_3");
        std::string ot = handle(shop, tampered, "order-3", "pay_3");
        check("forged delivery refused", of == "invalid_signature", of);
        check("too-old delivery refused", oo == "stale_timestamp", oo);
        check("tampered body refused", ot == "invalid_signature", ot);
        check("refused deliveries wrote nothing",
              count(setup, "SELECT count(*) FROM idempotency.inbox WHERE event_id LIKE "
                           "'msg_order3%'") == 0);
        check("order-3 still PENDING, no license",
              one(setup, "SELECT status FROM shop_orders WHERE id = 'order-3'") == "PENDING" &&
                  count(setup, "SELECT count(*) FROM licenses WHERE order_id = 'order-3'") == 0);
    }

    check("order-1 PAID once, one license",
          one(setup, "SELECT status FROM shop_orders WHERE id = 'order-1'") == "PAID" &&
              count(setup, "SELECT count(*) FROM licenses WHERE order_id = 'order-1'") == 1);
    check("inbox: one row per event id, all done",
          count(setup, "SELECT count(*) FROM idempotency.inbox WHERE consumer = 'shop'") == 6 &&
              count(setup, "SELECT count(*) FROM idempotency.inbox WHERE consumer = 'shop' AND "
                           "status <> 'done'") == 0);

    int failed = 0;
    std::printf("\n%-60s %s\n", "check", "result");
    std::printf("%-60s %s\n", std::string(60, '-').c_str(), "------");
    for (const Check &c : checks) {
        std::printf("%-60s %s%s%s\n", c.what.c_str(), c.ok ? "PASS" : "FAIL",
                    c.detail.empty() ? "" : "  ", c.detail.c_str());
        failed += !c.ok;
    }
    std::printf("\n%zu checks, %d failed\n", checks.size(), failed);
    return failed == 0 ? 0 : 1;
}

} // namespace

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (a != "--ci") {
            std::fprintf(stderr, "usage: %s [--ci]\n", argv[0]);
            return 2;
        }
    }
    try {
        return run();
    } catch (const std::exception &e) {
        std::fprintf(stderr, "inbox_demo: %s\n", e.what());
        return 1;
    }
}
