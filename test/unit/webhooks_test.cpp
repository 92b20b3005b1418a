// Webhook signatures: the Standard Webhooks vector (test/vectors/README.md), Stripe-style
// headers, key rotation, the timestamp tolerance at its edges, and the two kinds of bad input:
// the sender's (missing, blank, CR/LF, malformed, oversized: an invalid signature, never an
// exception) and the receiver's (a secret of the wrong size: 22023).
#include "crypto.hpp"
#include "error.hpp"
#include "webhooks.hpp"

#include <gtest/gtest.h>

#include <cctype>
#include <functional>
#include <random>
#include <string>
#include <vector>

using namespace idem::webhooks;

namespace {

const std::string kSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const std::string kMsgId = "msg_p5jXN8AQM9LWM0D4loKWxJek";
const std::string kTs = "1614265330";
const std::string kPayload = "{\"test\": 2432232314}";
const std::string kSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
constexpr int64_t kNow = INT64_C(1614265330) * 1000000;
constexpr int64_t kTolerance = INT64_C(300) * 1000000;
const Clock kClock{kNow, kTolerance};

const std::string kStripeSecret = "whsec_7Kq2mX9pL4vR8sT1wZ6yB3nC5dF0gH2j"; // 38 bytes

std::vector<std::string_view> one(const std::string &s) {
    return {s};
}

std::string sqlstate_of(const std::function<void()> &fn) {
    try {
        fn();
    } catch (const idem::Error &e) {
        return e.sqlstate();
    }
    return "none";
}

// A verdict's name, or "raised <SQLSTATE>" when the call threw.
std::string outcome_of(const std::function<Verdict()> &fn) {
    try {
        return verdict_name(fn());
    } catch (const idem::Error &e) {
        return std::string("raised ") + e.sqlstate();
    }
}

// A Standard Webhooks secret of n key bytes.
std::string standard_secret_of(size_t n) {
    return "whsec_" + base64_encode(std::string(n, 'k'));
}

} // namespace

TEST(Base64, RoundTripAndPadding) {
    EXPECT_EQ(base64_encode(""), "");
    EXPECT_EQ(base64_encode("f"), "Zg==");
    EXPECT_EQ(base64_encode("fo"), "Zm8=");
    EXPECT_EQ(base64_encode("foo"), "Zm9v");
    EXPECT_EQ(base64_encode("foobar"), "Zm9vYmFy");
    std::string out;
    ASSERT_TRUE(base64_decode("Zg==", out));
    EXPECT_EQ(out, "f");
    ASSERT_TRUE(base64_decode("Zm8=", out));
    EXPECT_EQ(out, "fo");
    ASSERT_TRUE(base64_decode("Zm9vYmFy", out));
    EXPECT_EQ(out, "foobar");
    ASSERT_TRUE(base64_decode("", out));
    EXPECT_EQ(out, "");
    std::string bin("\x00\xff\x10", 3);
    ASSERT_TRUE(base64_decode(base64_encode(bin), out));
    EXPECT_EQ(out, bin);
}

TEST(Base64, RejectsMalformed) {
    std::string out;
    EXPECT_FALSE(base64_decode("Zg=", out));   // length not a multiple of 4
    EXPECT_FALSE(base64_decode("Z===", out));  // three pads
    EXPECT_FALSE(base64_decode("Z=g=", out));  // pad inside
    EXPECT_FALSE(base64_decode(" Zm9v", out)); // whitespace (EVP_DecodeBlock would skip it)
    EXPECT_FALSE(base64_decode("Zm9v ", out));
    EXPECT_FALSE(base64_decode("Zm-v", out)); // URL-safe alphabet is not standard base64
    EXPECT_FALSE(base64_decode("Zm9v\n", out));
}

TEST(Hex, RoundTrip) {
    std::string out;
    EXPECT_EQ(hex_encode(std::string("\x01\xab\xff", 3)), "01abff");
    ASSERT_TRUE(hex_decode("01ABff", out));
    EXPECT_EQ(out, std::string("\x01\xab\xff", 3));
    EXPECT_FALSE(hex_decode("abc", out));
    EXPECT_FALSE(hex_decode("zz", out));
}

TEST(StandardWebhooks, PublishedVector) {
    EXPECT_EQ(sign_standard(kSecret, kMsgId, kTs, kPayload), kSignature);
    EXPECT_EQ(verify_standard(one(kSecret), kMsgId, kTs, kPayload, kSignature, kClock),
              Verdict::Valid);
}

TEST(StandardWebhooks, SecretWithoutPrefixIsBase64Too) {
    std::string bare = kSecret.substr(6);
    EXPECT_EQ(verify_standard(one(bare), kMsgId, kTs, kPayload, kSignature, kClock),
              Verdict::Valid);
}

TEST(StandardWebhooks, AnyChangeInvalidates) {
    EXPECT_EQ(verify_standard(one(kSecret), kMsgId, kTs, kPayload + " ", kSignature, kClock),
              Verdict::InvalidSignature);
    EXPECT_EQ(verify_standard(one(kSecret), "msg_other", kTs, kPayload, kSignature, kClock),
              Verdict::InvalidSignature);
    // a re-signed timestamp needs a new signature: the old one does not carry over
    EXPECT_EQ(verify_standard(one(kSecret), kMsgId, "1614265331", kPayload, kSignature, kClock),
              Verdict::InvalidSignature);
    std::string other = "whsec_" + base64_encode("another key of some length");
    EXPECT_EQ(verify_standard(one(other), kMsgId, kTs, kPayload, kSignature, kClock),
              Verdict::InvalidSignature);
    // one flipped character of the signature
    std::string bad = kSignature;
    bad[5] = bad[5] == 'A' ? 'B' : 'A';
    EXPECT_EQ(verify_standard(one(kSecret), kMsgId, kTs, kPayload, bad, kClock),
              Verdict::InvalidSignature);
}

TEST(StandardWebhooks, SeveralSignaturesAndVersions) {
    std::string header = "v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA= v1a,xyz " + kSignature;
    EXPECT_EQ(verify_standard(one(kSecret), kMsgId, kTs, kPayload, header, kClock), Verdict::Valid);
    // the signature order does not matter, nor repeated spaces
    header = kSignature + "  v1,bm90IGEgbWFj";
    EXPECT_EQ(verify_standard(one(kSecret), kMsgId, kTs, kPayload, header, kClock), Verdict::Valid);
    // only another version: nothing to check, not valid
    EXPECT_EQ(
        verify_standard(one(kSecret), kMsgId, kTs, kPayload, "v1a," + kSignature.substr(3), kClock),
        Verdict::InvalidSignature);
    // undecodable v1 candidates never match and never raise
    EXPECT_EQ(verify_standard(one(kSecret), kMsgId, kTs, kPayload, "v1,!!!! v1,", kClock),
              Verdict::InvalidSignature);
}

TEST(StandardWebhooks, KeyRotation) {
    std::string old_secret = kSecret;
    std::string new_secret = "whsec_" + base64_encode("the new key, 32 bytes long......");
    std::vector<std::string_view> both{new_secret, old_secret};
    EXPECT_EQ(verify_standard(both, kMsgId, kTs, kPayload, kSignature, kClock), Verdict::Valid);
    std::string signed_new = sign_standard(new_secret, kMsgId, kTs, kPayload);
    EXPECT_EQ(verify_standard(both, kMsgId, kTs, kPayload, signed_new, kClock), Verdict::Valid);
    EXPECT_EQ(verify_standard(one(old_secret), kMsgId, kTs, kPayload, signed_new, kClock),
              Verdict::InvalidSignature);
}

TEST(StandardWebhooks, ToleranceBothDirections) {
    auto at = [&](int64_t now_s, int64_t tol_s) {
        return verify_standard(one(kSecret), kMsgId, kTs, kPayload, kSignature,
                               Clock{now_s * 1000000, tol_s * 1000000});
    };
    const int64_t ts = 1614265330;
    EXPECT_EQ(at(ts + 300, 300), Verdict::Valid);
    EXPECT_EQ(at(ts - 300, 300), Verdict::Valid);
    EXPECT_EQ(at(ts + 301, 300), Verdict::StaleTimestamp);
    EXPECT_EQ(at(ts - 301, 300), Verdict::StaleTimestamp);
    EXPECT_EQ(at(ts, 0), Verdict::Valid);
    EXPECT_EQ(at(ts + 1, 0), Verdict::StaleTimestamp);
    // one microsecond past the edge
    EXPECT_EQ(verify_standard(one(kSecret), kMsgId, kTs, kPayload, kSignature,
                              Clock{ts * 1000000 + 300000001, 300000000}),
              Verdict::StaleTimestamp);
    // a stale timestamp is refused before any HMAC: a forged signature is not looked at
    // (was InvalidSignature, after an HMAC of the body per secret)
    EXPECT_EQ(verify_standard(one(kSecret), kMsgId, kTs, kPayload,
                              "v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
                              Clock{(ts + 1000) * 1000000, kTolerance}),
              Verdict::StaleTimestamp);
    // but a header without a usable candidate stays an invalid signature
    EXPECT_EQ(verify_standard(one(kSecret), kMsgId, kTs, kPayload, "v1,bm90IGEgbWFj",
                              Clock{(ts + 1000) * 1000000, kTolerance}),
              Verdict::InvalidSignature);
}

// What the sender controls never throws: a malformed header or timestamp is an invalid
// signature (these raised 22023 before).
TEST(StandardWebhooks, MalformedSenderInputIsInvalidSignature) {
    auto verify = [&](std::string ts, std::string header) {
        return outcome_of(
            [&] { return verify_standard(one(kSecret), kMsgId, ts, kPayload, header, kClock); });
    };
    for (const std::string &header :
         {std::string(), std::string("   "), std::string("\t"), std::string("\r\n"),
          std::string("g0hM9SsE+OTPJTGt"), kSignature + " garbage", std::string(","),
          std::string("v1"), std::string("v1,"), std::string("v1,!!!!")})
        EXPECT_EQ(verify(kTs, header), "invalid_signature") << "header \"" << header << '"';
    for (const std::string &ts :
         {std::string(), std::string(" "), std::string("\r\n"), std::string("-1614265330"),
          std::string("+1614265330"), std::string("1614265330.5"), std::string("1.6e9"),
          std::string("0x60380f72"), std::string("1614265330 1"),
          std::string("1234567890123456789")})
        EXPECT_EQ(verify(ts, kSignature), "invalid_signature") << "timestamp \"" << ts << '"';
}

// The receiver's own mistakes raise 22023 (with a hint).
TEST(StandardWebhooks, ReceiverConfigurationRaises22023) {
    auto verify = [&](std::vector<std::string_view> secrets, Clock clock = kClock) {
        return sqlstate_of(
            [&] { verify_standard(secrets, kMsgId, kTs, kPayload, kSignature, clock); });
    };
    EXPECT_EQ(verify({}), "22023");
    EXPECT_EQ(verify(one("whsec_not base64!")), "22023");
    EXPECT_EQ(verify(one("whsec_")), "22023");
    EXPECT_EQ(verify(one(kSecret), Clock{kNow, -1}), "22023");
    try {
        verify_standard(one(standard_secret_of(1)), kMsgId, kTs, kPayload, kSignature, kClock);
        FAIL() << "a secret of 1 byte was accepted";
    } catch (const idem::Error &e) {
        EXPECT_STREQ(e.what(), "webhook secret 1 is too short for Standard Webhooks");
        EXPECT_EQ(e.detail(), "It decodes to 1 bytes; the Standard Webhooks specification "
                              "requires 24 to 64 bytes (192 to 512 bits).");
        EXPECT_FALSE(e.hint().empty());
    }
}

// "Signing secret: Random. At least 24 bytes (192 bits, 512 maximum)" (the specification's
// table of symmetric signatures), after base64 decoding; the whsec_ prefix is optional, as in
// the specification's reference libraries.
TEST(StandardWebhooks, SecretOf24To64Bytes) {
    auto accepted = [&](const std::string &secret) {
        return outcome_of([&] {
            return verify_standard(one(secret), kMsgId, kTs, kPayload, kSignature, kClock);
        });
    };
    EXPECT_EQ(accepted(standard_secret_of(1)), "raised 22023");
    EXPECT_EQ(accepted(standard_secret_of(16)), "raised 22023");
    EXPECT_EQ(accepted(standard_secret_of(23)), "raised 22023");
    EXPECT_EQ(accepted(standard_secret_of(24)), "invalid_signature");
    EXPECT_EQ(accepted(standard_secret_of(64)), "invalid_signature");
    EXPECT_EQ(accepted(standard_secret_of(65)), "raised 22023");
    EXPECT_EQ(accepted(standard_secret_of(24).substr(6)), "invalid_signature"); // no prefix
    EXPECT_EQ(accepted(kSecret), "valid"); // the specification's example: 24 bytes
    // signing checks the same
    EXPECT_EQ(sqlstate_of([&] { sign_standard(standard_secret_of(23), kMsgId, kTs, kPayload); }),
              "22023");
    EXPECT_EQ(sqlstate_of([&] { sign_standard(standard_secret_of(24), kMsgId, kTs, kPayload); }),
              "none");
}

// A framework may hand a header over with its line's CR LF (or the timestamp with spaces):
// HTTP whitespace at either end is not part of the value (RFC 9110, section 5.5).
TEST(StandardWebhooks, HttpWhitespaceAtTheEndsIsIgnored) {
    for (const std::string ws : {"\r\n", "\n", "\r", " ", "\t", " \r\n"}) {
        EXPECT_EQ(verify_standard(one(kSecret), kMsgId, kTs, kPayload, kSignature + ws, kClock),
                  Verdict::Valid);
        EXPECT_EQ(verify_standard(one(kSecret), kMsgId, kTs, kPayload, ws + kSignature, kClock),
                  Verdict::Valid);
        EXPECT_EQ(verify_standard(one(kSecret), kMsgId, kTs + ws, kPayload, kSignature, kClock),
                  Verdict::Valid);
    }
    // the id is signed byte for byte: it is the dedup key, and a replay must not get a new one
    EXPECT_EQ(verify_standard(one(kSecret), kMsgId + "\r\n", kTs, kPayload, kSignature, kClock),
              Verdict::InvalidSignature);
}

TEST(StandardWebhooks, OversizedHeaderIsInvalidSignature) {
    std::string padded = kSignature + std::string(max_header_bytes - kSignature.size(), ' ');
    EXPECT_EQ(verify_standard(one(kSecret), kMsgId, kTs, kPayload, padded, kClock), Verdict::Valid);
    EXPECT_EQ(verify_standard(one(kSecret), kMsgId, kTs, kPayload, padded + " ", kClock),
              Verdict::InvalidSignature);
    std::string many = kSignature;
    while (many.size() <= max_header_bytes)
        many += " v1,AAAA";
    EXPECT_EQ(verify_standard(one(kSecret), kMsgId, kTs, kPayload, many, kClock),
              Verdict::InvalidSignature);
}

// A misconfigured receiver secret is reported whatever the sender sent: a malformed signature
// header or timestamp from the sender must not turn it into a plain invalid signature.
TEST(StandardWebhooks, BadSecretIsReportedBeforeTheHeaders) {
    auto kind = [](const std::string &secret, const std::string &ts, const std::string &header) {
        try {
            return std::string(
                verdict_name(verify_standard(one(secret), kMsgId, ts, kPayload, header, kClock)));
        } catch (const idem::Error &e) {
            return std::string(e.sqlstate()) + " " + e.what();
        }
    };
    const std::string bad_secret = "22023 webhook secret 1 is not a valid Standard Webhooks secret";
    EXPECT_EQ(kind("whsec_not base64!", kTs, kSignature), bad_secret);
    EXPECT_EQ(kind("whsec_not base64!", kTs, "garbage"), bad_secret);
    EXPECT_EQ(kind("whsec_not base64!", kTs, ""), bad_secret);
    EXPECT_EQ(kind("whsec_not base64!", "not-a-timestamp", kSignature), bad_secret);
    const std::string short_secret = "22023 webhook secret 1 is too short for Standard Webhooks";
    EXPECT_EQ(kind(standard_secret_of(1), kTs, "garbage"), short_secret);
    EXPECT_EQ(kind(standard_secret_of(1), "not-a-timestamp", kSignature), short_secret);
}

TEST(StandardWebhooks, ErrorsNeverContainTheSecret) {
    std::string secret = "whsec_SuperSecretValue!!";
    try {
        verify_standard(one(secret), kMsgId, kTs, kPayload, kSignature, kClock);
        FAIL() << "expected an error";
    } catch (const idem::Error &e) {
        std::string all = std::string(e.what()) + e.detail() + e.hint();
        EXPECT_EQ(all.find("SuperSecret"), std::string::npos) << all;
    }
}

TEST(Stripe, SignAndVerify) {
    std::string payload = R"({"id":"evt_1","type":"payment_intent.succeeded"})";
    std::string header = sign_stripe(kStripeSecret, 1700000000, payload);
    ASSERT_EQ(header.substr(0, 16), "t=1700000000,v1=");
    ASSERT_EQ(header.size(), 16u + 64u);
    // the signature is HMAC-SHA256 keyed with the secret's bytes as they are
    idem::Digest mac = idem::hmac_sha256(kStripeSecret, "1700000000." + payload);
    EXPECT_EQ(header.substr(16),
              hex_encode(std::string_view(reinterpret_cast<const char *>(mac.data()), 32)));
    Clock clock{INT64_C(1700000000) * 1000000, kTolerance};
    EXPECT_EQ(verify_stripe(one(kStripeSecret), header, payload, clock), Verdict::Valid);
    EXPECT_EQ(verify_stripe(one(kStripeSecret), header, payload + "x", clock),
              Verdict::InvalidSignature);
    // upper-case hex is the same signature
    std::string upper = header.substr(0, 16);
    for (char c : header.substr(16))
        upper.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
    EXPECT_EQ(verify_stripe(one(kStripeSecret), upper, payload, clock), Verdict::Valid);
}

TEST(Stripe, SeveralV1AndOtherSchemes) {
    std::string payload = "{}";
    std::string good = sign_stripe(kStripeSecret, 1700000000, payload);
    std::string v1 = good.substr(good.find("v1="));
    Clock clock{INT64_C(1700000000) * 1000000, kTolerance};
    std::string header = "t=1700000000,v0=abcd,v1=" + std::string(64, '0') + "," + v1;
    EXPECT_EQ(verify_stripe(one(kStripeSecret), header, payload, clock), Verdict::Valid);
    header = v1 + ",t=1700000000"; // order of items is free
    EXPECT_EQ(verify_stripe(one(kStripeSecret), header, payload, clock), Verdict::Valid);
    header = "t=1700000000, " + v1; // spaces around items are tolerated
    EXPECT_EQ(verify_stripe(one(kStripeSecret), header, payload, clock), Verdict::Valid);
    header = "t=1700000000,v0=" + v1.substr(3); // the right MAC under another scheme
    EXPECT_EQ(verify_stripe(one(kStripeSecret), header, payload, clock), Verdict::InvalidSignature);
    header = "t=1700000000,v1=nothex,v1=";
    EXPECT_EQ(verify_stripe(one(kStripeSecret), header, payload, clock), Verdict::InvalidSignature);
}

TEST(Stripe, KeyRotation) {
    std::string payload = "{\"id\":\"evt_rot\"}";
    std::string old_secret = "whsec_old_0123456789abcdefghijklmnop";
    std::string new_secret = "whsec_new_0123456789abcdefghijklmnop";
    Clock clock{INT64_C(1700000000) * 1000000, kTolerance};
    std::vector<std::string_view> both{old_secret, new_secret};
    EXPECT_EQ(verify_stripe(both, sign_stripe(new_secret, 1700000000, payload), payload, clock),
              Verdict::Valid);
    EXPECT_EQ(verify_stripe(both, sign_stripe(old_secret, 1700000000, payload), payload, clock),
              Verdict::Valid);
    EXPECT_EQ(verify_stripe(one(old_secret), sign_stripe(new_secret, 1700000000, payload), payload,
                            clock),
              Verdict::InvalidSignature);
}

TEST(Stripe, Tolerance) {
    std::string payload = "{}";
    std::string header = sign_stripe(kStripeSecret, 1700000000, payload);
    auto at = [&](int64_t now_s) {
        return verify_stripe(one(kStripeSecret), header, payload,
                             Clock{now_s * 1000000, kTolerance});
    };
    EXPECT_EQ(at(1700000300), Verdict::Valid);
    EXPECT_EQ(at(1699999700), Verdict::Valid);
    EXPECT_EQ(at(1700000301), Verdict::StaleTimestamp);
    EXPECT_EQ(at(1699999699), Verdict::StaleTimestamp);
}

// What the sender controls never throws (these raised 22023 before).
TEST(Stripe, MalformedHeaderIsInvalidSignature) {
    Clock clock{INT64_C(1700000000) * 1000000, kTolerance};
    auto verify = [&](std::string header) {
        return outcome_of([&] { return verify_stripe(one(kStripeSecret), header, "{}", clock); });
    };
    std::string v1 = "v1=" + std::string(64, 'a');
    for (const std::string &header :
         {std::string(), std::string(" "), std::string("\r\n"), v1,
          "t=1700000000,t=1700000001," + v1, "t=abc," + v1, "t=," + v1, "t=-1," + v1,
          "t=1700000000000000000," + v1, "t=1700000000," + v1 + ",junk",
          std::string("t=1700000000,,"), std::string(",,,"), std::string("garbage"),
          "T=1700000000," + v1, "t = 1700000000," + v1})
        EXPECT_EQ(verify(header), "invalid_signature") << "header \"" << header << '"';
}

// The receiver's own mistakes raise 22023 with a hint: no secrets, an empty secret, or one of
// fewer than 32 bytes (RFC 2104, section 3: a key shorter than the 32-byte output of SHA-256
// "is strongly discouraged"), in verifying and in signing.
TEST(Stripe, SecretOfAtLeast32Bytes) {
    Clock clock{INT64_C(1700000000) * 1000000, kTolerance};
    auto accepted = [&](const std::string &secret, const std::string &header) {
        return outcome_of([&] { return verify_stripe(one(secret), header, "{}", clock); });
    };
    std::string v1 = "t=1700000000,v1=" + std::string(64, 'a');
    EXPECT_EQ(accepted("", v1), "raised 22023");
    EXPECT_EQ(accepted("s", v1), "raised 22023");
    EXPECT_EQ(accepted("whsec_test", v1), "raised 22023");
    EXPECT_EQ(accepted(std::string(31, 'k'), v1), "raised 22023");
    EXPECT_EQ(accepted(std::string(31, 'k'), "garbage"), "raised 22023"); // before the header
    EXPECT_EQ(accepted(std::string(32, 'k'), v1), "invalid_signature");
    EXPECT_EQ(accepted(std::string(32, 'k'), sign_stripe(std::string(32, 'k'), 1700000000, "{}")),
              "valid");
    EXPECT_EQ(sqlstate_of([&] { verify_stripe({}, v1, "{}", clock); }), "22023");
    EXPECT_EQ(sqlstate_of([&] { sign_stripe("whsec_test", 1700000000, "{}"); }), "22023");
    try {
        verify_stripe(one("whsec_test"), v1, "{}", clock);
        FAIL() << "a secret of 10 bytes was accepted";
    } catch (const idem::Error &e) {
        EXPECT_STREQ(e.what(), "webhook secret 1 is too short for a Stripe-style signature");
        EXPECT_EQ(e.detail(), "It has 10 bytes; the HMAC-SHA256 key must have at least 32 bytes "
                              "(RFC 2104: shorter keys weaken HMAC).");
        EXPECT_FALSE(e.hint().empty());
        std::string all = std::string(e.what()) + e.detail() + e.hint();
        EXPECT_EQ(all.find("whsec_test"), std::string::npos) << all;
    }
}

// Stripe's libraries hand the header to the parser as the framework gives it; HTTP whitespace
// (the line's CR LF, spaces) at the ends and around items is not part of any value.
TEST(Stripe, HttpWhitespaceIsIgnored) {
    std::string payload = "{}";
    std::string header = sign_stripe(kStripeSecret, 1700000000, payload);
    Clock clock{INT64_C(1700000000) * 1000000, kTolerance};
    for (const std::string ws : {"\r\n", "\n", "\r", " ", "\t", " \r\n"}) {
        EXPECT_EQ(verify_stripe(one(kStripeSecret), header + ws, payload, clock), Verdict::Valid);
        EXPECT_EQ(verify_stripe(one(kStripeSecret), ws + header, payload, clock), Verdict::Valid);
        std::string spread = header;
        spread.insert(header.find(',') + 1, ws);
        EXPECT_EQ(verify_stripe(one(kStripeSecret), spread, payload, clock), Verdict::Valid);
    }
    // a v1 item that gets the CR LF as the last item, and the t item as the last one
    std::string v1 = header.substr(header.find("v1="));
    EXPECT_EQ(verify_stripe(one(kStripeSecret), v1 + ",t=1700000000\r\n", payload, clock),
              Verdict::Valid);
}

TEST(Stripe, OversizedHeaderIsInvalidSignature) {
    std::string payload = "{}";
    std::string header = sign_stripe(kStripeSecret, 1700000000, payload);
    Clock clock{INT64_C(1700000000) * 1000000, kTolerance};
    std::string padded = header + std::string(max_header_bytes - header.size(), ' ');
    EXPECT_EQ(verify_stripe(one(kStripeSecret), padded, payload, clock), Verdict::Valid);
    EXPECT_EQ(verify_stripe(one(kStripeSecret), padded + " ", payload, clock),
              Verdict::InvalidSignature);
}

// A field the request did not carry (SQL NULL) is an invalid signature, also an empty body's
// absence; the receiver's secrets are still checked first.
TEST(Webhooks, MissingSenderFieldIsInvalidSignature) {
    EXPECT_EQ(verify_standard(one(kSecret), std::nullopt, kTs, kPayload, kSignature, kClock),
              Verdict::InvalidSignature);
    EXPECT_EQ(verify_standard(one(kSecret), kMsgId, std::nullopt, kPayload, kSignature, kClock),
              Verdict::InvalidSignature);
    EXPECT_EQ(verify_standard(one(kSecret), kMsgId, kTs, std::nullopt, kSignature, kClock),
              Verdict::InvalidSignature);
    EXPECT_EQ(verify_standard(one(kSecret), kMsgId, kTs, kPayload, std::nullopt, kClock),
              Verdict::InvalidSignature);
    Clock clock{INT64_C(1700000000) * 1000000, kTolerance};
    std::string header = sign_stripe(kStripeSecret, 1700000000, "");
    EXPECT_EQ(verify_stripe(one(kStripeSecret), header, "", clock), Verdict::Valid);
    EXPECT_EQ(verify_stripe(one(kStripeSecret), header, std::nullopt, clock),
              Verdict::InvalidSignature);
    EXPECT_EQ(verify_stripe(one(kStripeSecret), std::nullopt, "", clock),
              Verdict::InvalidSignature);
    // nothing from the sender at all: the receiver's mistakes still raise
    EXPECT_EQ(sqlstate_of([&] {
                  verify_standard(one(standard_secret_of(1)), std::nullopt, std::nullopt,
                                  std::nullopt, std::nullopt, kClock);
              }),
              "22023");
    EXPECT_EQ(
        sqlstate_of([&] { verify_stripe(one("whsec_test"), std::nullopt, std::nullopt, clock); }),
        "22023");
    EXPECT_EQ(sqlstate_of([&] {
                  verify_stripe(one(kStripeSecret), std::nullopt, std::nullopt,
                                Clock{clock.now_usec, -1});
              }),
              "22023");
}

TEST(Webhooks, TrimHttpWhitespace) {
    EXPECT_EQ(trim_http_whitespace(" \t\r\nt=1, v1=ab \r\n"), "t=1, v1=ab");
    EXPECT_EQ(trim_http_whitespace("\r\n"), "");
    EXPECT_EQ(trim_http_whitespace(""), "");
    EXPECT_EQ(trim_http_whitespace("a\r\nb"), "a\r\nb");
    EXPECT_EQ(trim_http_whitespace(std::string_view("\0a\0", 3)), std::string_view("\0a\0", 3));
}

TEST(Webhooks, ParseTimestamp) {
    int64_t ts = -7;
    EXPECT_TRUE(parse_timestamp("0", ts));
    EXPECT_EQ(ts, 0);
    EXPECT_TRUE(parse_timestamp("999999999999999999", ts));
    EXPECT_EQ(ts, INT64_C(999999999999999999));
    ts = -7;
    for (const char *bad : {"", " 1", "1 ", "-1", "+1", "1.5", "1e9", "0x1", "1234567890123456789"})
        EXPECT_FALSE(parse_timestamp(bad, ts)) << bad;
    EXPECT_EQ(ts, -7);
}

// Random sender input (headers, timestamps, ids and bodies built from the characters the parsers
// split on, plus CR, LF, NUL and high bytes) never throws and never verifies.
TEST(Webhooks, RandomSenderInputNeverThrows) {
    std::mt19937 rng(18);
    const std::string alphabet =
        std::string("v1a,t= \t\r\n.0123456789abcdefAZ+/=_-") + std::string("\0\x80\xff", 3);
    auto random_text = [&](size_t max_len) {
        std::string s(rng() % (max_len + 1), ' ');
        for (char &c : s)
            c = alphabet[rng() % alphabet.size()];
        return s;
    };
    Clock stripe_clock{INT64_C(1700000000) * 1000000, kTolerance};
    for (int i = 0; i < 20000; i++) {
        std::string header = random_text(i % 10 == 0 ? 400 : 80);
        std::string ts = i % 3 == 0 ? kTs : random_text(20);
        std::string id = random_text(30);
        std::string body = random_text(30);
        EXPECT_EQ(
            outcome_of([&] { return verify_standard(one(kSecret), id, ts, body, header, kClock); }),
            "invalid_signature")
            << "header \"" << header << "\" timestamp \"" << ts << '"';
        EXPECT_EQ(outcome_of([&] {
                      return verify_stripe(one(kStripeSecret), header, body, stripe_clock);
                  }),
                  "invalid_signature")
            << "header \"" << header << '"';
    }
}
