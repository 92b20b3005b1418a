// What a webhook verification costs the receiver: no HMAC for a request
// that a check without one refuses (no candidate signature for the scheme, no usable
// timestamp, a stale timestamp, an unusable id), and otherwise exactly one HMAC per secret,
// however many candidates the header carries. Counted through Checks::hmac, not timed.
#include "crypto.hpp"
#include "webhooks.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace idem::webhooks;

namespace {

int g_hmacs = 0;

idem::Digest counting_hmac(std::string_view key, std::string_view message) {
    g_hmacs++;
    return idem::hmac_sha256(key, message);
}

constexpr int64_t kTs = 1700000000;
const Clock kClock{kTs * 1000000, INT64_C(300) * 1000000};
const std::string kId = "msg_2KWPBgLlAfxdpx2AI54pPJ85f1W";
const std::string kBody = std::string(1 << 20, 'x'); // 1 MiB: what an attacker would send

// n distinct Standard Webhooks secrets, 32 key bytes each.
std::vector<std::string> standard_secrets(size_t n) {
    std::vector<std::string> out;
    for (size_t i = 0; i < n; i++)
        out.push_back("whsec_" + base64_encode(std::string(31, 'k') + static_cast<char>('a' + i)));
    return out;
}

// n distinct Stripe-style secrets, 38 bytes each.
std::vector<std::string> stripe_secrets(size_t n) {
    std::vector<std::string> out;
    for (size_t i = 0; i < n; i++)
        out.push_back("whsec_" + std::string(31, 's') + static_cast<char>('a' + i));
    return out;
}

std::vector<std::string_view> views(const std::vector<std::string> &v) {
    return {v.begin(), v.end()};
}

// A well-formed candidate that matches nothing.
const std::string kZeroB64 = "v1," + base64_encode(std::string(32, '\0'));
const std::string kZeroHex = "v1=" + std::string(64, '0');

// A table's sender field: owns its text (a Field would point into a destroyed temporary).
using Text = std::optional<std::string>;

Field field(const Text &t) {
    return t ? Field(*t) : std::nullopt;
}

struct Count {
    std::string verdict;
    int hmacs;
};

Count standard(const std::vector<std::string> &secrets, Field id, Field ts, Field header,
               Clock clock = kClock, Checks checks = {}) {
    g_hmacs = 0;
    checks.hmac = &counting_hmac;
    Verdict v = verify_standard(views(secrets), id, ts, kBody, header, clock, checks);
    return {verdict_name(v), g_hmacs};
}

Count stripe(const std::vector<std::string> &secrets, Field header, Clock clock = kClock,
             Checks checks = {}) {
    g_hmacs = 0;
    checks.hmac = &counting_hmac;
    Verdict v = verify_stripe(views(secrets), header, kBody, clock, checks);
    return {verdict_name(v), g_hmacs};
}

} // namespace

// Requests that carry no candidate signature, or fail another check without an HMAC, cost
// none, with 16 secrets and a 1 MiB body (before: one HMAC of the body per secret for each).
TEST(WebhookCost, StandardRefusedWithoutHmac) {
    auto secrets = standard_secrets(16);
    const std::string ts = std::to_string(kTs);
    struct Row {
        const char *why;
        Text id, ts, header;
        Clock clock;
        const char *verdict;
    };
    const std::string long_id(max_msg_id_bytes + 1, 'i');
    const std::string max_id(max_msg_id_bytes, 'i');
    const std::string oversized = kZeroB64 + std::string(max_header_bytes, ' ');
    const std::vector<Row> rows = {
        {"empty header", kId, ts, "", kClock, "invalid_signature"},
        {"blank header", kId, ts, " \r\n", kClock, "invalid_signature"},
        {"NULL header", kId, ts, std::nullopt, kClock, "invalid_signature"},
        {"only another version", kId, ts, "v1a,abcd", kClock, "invalid_signature"},
        {"v1 without signature", kId, ts, "v1,", kClock, "invalid_signature"},
        {"v1 not base64", kId, ts, "v1,!!!!", kClock, "invalid_signature"},
        {"v1 of 9 bytes", kId, ts, "v1,bm90IGEgbWFj", kClock, "invalid_signature"},
        {"entry without comma", kId, ts, kZeroB64 + " garbage", kClock, "invalid_signature"},
        {"header over 16 KiB", kId, ts, oversized, kClock, "invalid_signature"},
        {"empty id", "", ts, kZeroB64, kClock, "invalid_signature"},
        {"NULL id", std::nullopt, ts, kZeroB64, kClock, "invalid_signature"},
        {"id over 1024 bytes", long_id, ts, kZeroB64, kClock, "invalid_signature"},
        {"empty timestamp", kId, "", kZeroB64, kClock, "invalid_signature"},
        {"timestamp not digits", kId, "17e8", kZeroB64, kClock, "invalid_signature"},
        {"stale timestamp", kId, ts, kZeroB64, Clock{(kTs + 301) * 1000000, 300000000},
         "stale_timestamp"},
        {"future timestamp", kId, ts, kZeroB64, Clock{(kTs - 301) * 1000000, 300000000},
         "stale_timestamp"},
    };
    for (const Row &r : rows) {
        Count c = standard(secrets, field(r.id), field(r.ts), field(r.header), r.clock);
        EXPECT_EQ(c.verdict, r.verdict) << r.why;
        EXPECT_EQ(c.hmacs, 0) << r.why;
    }
    // the largest id is checked
    EXPECT_EQ(standard(secrets, max_id, ts, kZeroB64).hmacs, 16);
}

TEST(WebhookCost, StripeRefusedWithoutHmac) {
    auto secrets = stripe_secrets(16);
    const std::string t = "t=" + std::to_string(kTs);
    struct Row {
        const char *why;
        Text header;
        Clock clock;
        const char *verdict;
    };
    const std::vector<Row> rows = {
        {"t=1 and nothing else (the attacker review's header)", std::string("t=1"), kClock,
         "invalid_signature"},
        {"fresh t, no signature", t, kClock, "invalid_signature"},
        {"only v0", t + ",v0=" + std::string(64, '0'), kClock, "invalid_signature"},
        {"v1 not hex", t + ",v1=nothex", kClock, "invalid_signature"},
        {"v1 of 31 bytes", t + ",v1=" + std::string(62, '0'), kClock, "invalid_signature"},
        {"v1 empty", t + ",v1=", kClock, "invalid_signature"},
        {"no t", kZeroHex, kClock, "invalid_signature"},
        {"t not digits", "t=abc," + kZeroHex, kClock, "invalid_signature"},
        {"two t", t + "," + t + "," + kZeroHex, kClock, "invalid_signature"},
        {"item without =", t + "," + kZeroHex + ",junk", kClock, "invalid_signature"},
        {"empty", std::string(), kClock, "invalid_signature"},
        {"NULL", std::nullopt, kClock, "invalid_signature"},
        {"stale t", t + "," + kZeroHex, Clock{(kTs + 301) * 1000000, 300000000}, "stale_timestamp"},
        {"t=1 with a candidate", "t=1," + kZeroHex, kClock, "stale_timestamp"},
    };
    for (const Row &r : rows) {
        Count c = stripe(secrets, field(r.header), r.clock);
        EXPECT_EQ(c.verdict, r.verdict) << r.why;
        EXPECT_EQ(c.hmacs, 0) << r.why;
    }
}

// idem_webhook_receive's event id check comes before the HMAC too.
TEST(WebhookCost, UnusableEventIdWithoutHmac) {
    Checks no_id;
    no_id.event_id_usable = false;
    auto st =
        stripe(stripe_secrets(16), "t=" + std::to_string(kTs) + "," + kZeroHex, kClock, no_id);
    EXPECT_EQ(st.verdict, "invalid_event_id");
    EXPECT_EQ(st.hmacs, 0);
    auto sw = standard(standard_secrets(16), kId, std::to_string(kTs), kZeroB64, kClock, no_id);
    EXPECT_EQ(sw.verdict, "invalid_event_id");
    EXPECT_EQ(sw.hmacs, 0);
    // but a malformed header or a stale timestamp is reported first
    EXPECT_EQ(stripe(stripe_secrets(1), std::string("t=1"), kClock, no_id).verdict,
              "invalid_signature");
    EXPECT_EQ(stripe(stripe_secrets(1), "t=1," + kZeroHex, kClock, no_id).verdict,
              "stale_timestamp");
}

// Past the cheap checks: one HMAC per secret, whatever the number of candidates (the signed
// content does not depend on the candidate), valid or not.
TEST(WebhookCost, OneHmacPerSecret) {
    const std::string ts = std::to_string(kTs);
    for (size_t n : {1u, 2u, 16u}) {
        auto secrets = standard_secrets(n);
        std::string good = sign_standard(secrets.back(), kId, ts, kBody);
        for (int extra : {0, 1, 5}) {
            std::string header = good;
            std::string forged;
            for (int i = 0; i < extra; i++) {
                header = kZeroB64 + " " + header;
                forged += (forged.empty() ? "" : " ") + kZeroB64;
            }
            Count c = standard(secrets, kId, ts, header);
            EXPECT_EQ(c.verdict, "valid") << n << " secrets, " << extra + 1 << " candidates";
            EXPECT_EQ(c.hmacs, static_cast<int>(n));
            if (extra > 0) {
                c = standard(secrets, kId, ts, forged);
                EXPECT_EQ(c.verdict, "invalid_signature");
                EXPECT_EQ(c.hmacs, static_cast<int>(n));
            }
        }
        auto ssecrets = stripe_secrets(n);
        std::string sgood = sign_stripe(ssecrets.front(), kTs, kBody);
        Count c = stripe(ssecrets, sgood + "," + kZeroHex + "," + kZeroHex);
        EXPECT_EQ(c.verdict, "valid");
        EXPECT_EQ(c.hmacs, static_cast<int>(n));
        c = stripe(ssecrets, "t=" + ts + "," + kZeroHex);
        EXPECT_EQ(c.verdict, "invalid_signature");
        EXPECT_EQ(c.hmacs, static_cast<int>(n));
    }
}

// A v1 signature is its canonical base64: the same MAC with the last digit's unused bits set
// is not a candidate (the official libraries compare the text; found by webhooks_diff).
TEST(StandardWebhooks, NonCanonicalBase64IsNoCandidate) {
    auto secrets = standard_secrets(1);
    const std::string ts = std::to_string(kTs);
    std::string good = sign_standard(secrets[0], kId, ts, "{}");
    ASSERT_EQ(good.size(), 3u + 44u);
    ASSERT_EQ(good.back(), '=');
    const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string odd = good;
    odd[odd.size() - 2] = alphabet[alphabet.find(odd[odd.size() - 2]) ^ 1];
    std::string a, b;
    ASSERT_TRUE(base64_decode(good.substr(3), a));
    ASSERT_TRUE(base64_decode(odd.substr(3), b));
    ASSERT_EQ(a, b); // the same 32 bytes
    auto v = [&](const std::string &h) {
        return verdict_name(verify_standard(views(secrets), kId, ts, "{}", h, kClock));
    };
    EXPECT_STREQ(v(good), "valid");
    EXPECT_STREQ(v(odd), "invalid_signature");
}
