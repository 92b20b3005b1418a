// Webhook signatures: the Standard Webhooks vector (test/vectors/README.md), Stripe-style
// headers, key rotation, malformed headers and the timestamp tolerance at its edges.
#include "crypto.hpp"
#include "error.hpp"
#include "webhooks.hpp"

#include <gtest/gtest.h>

#include <cctype>
#include <functional>
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

const std::string kStripeSecret = "whsec_stripe_test_secret";

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
    // a forged signature is reported as such even when the timestamp is stale too
    EXPECT_EQ(verify_standard(one(kSecret), kMsgId, kTs, kPayload, "v1,bm90IGEgbWFj",
                              Clock{(ts + 1000) * 1000000, kTolerance}),
              Verdict::InvalidSignature);
}

TEST(StandardWebhooks, MalformedInputRaises22023) {
    auto verify = [&](std::vector<std::string_view> secrets, std::string ts, std::string header,
                      Clock clock = kClock) {
        return sqlstate_of([&] { verify_standard(secrets, kMsgId, ts, kPayload, header, clock); });
    };
    EXPECT_EQ(verify(one(kSecret), kTs, ""), "22023");
    EXPECT_EQ(verify(one(kSecret), kTs, "   "), "22023");
    EXPECT_EQ(verify(one(kSecret), kTs, "g0hM9SsE+OTPJTGt"), "22023"); // no version
    EXPECT_EQ(verify(one(kSecret), kTs, kSignature + " garbage"), "22023");
    EXPECT_EQ(verify(one(kSecret), "", kSignature), "22023");
    EXPECT_EQ(verify(one(kSecret), "-1614265330", kSignature), "22023");
    EXPECT_EQ(verify(one(kSecret), "1614265330.5", kSignature), "22023");
    EXPECT_EQ(verify(one(kSecret), "1234567890123456789", kSignature), "22023");
    EXPECT_EQ(verify({}, kTs, kSignature), "22023");
    EXPECT_EQ(verify(one("whsec_not base64!"), kTs, kSignature), "22023");
    EXPECT_EQ(verify(one("whsec_"), kTs, kSignature), "22023");
    EXPECT_EQ(verify(one(kSecret), kTs, kSignature, Clock{kNow, -1}), "22023");
}

// A misconfigured receiver secret is reported whatever the sender sent: a malformed signature
// header or timestamp from the sender must not turn it into a plain invalid signature
// (MalformedHeader, which the SQL layer maps to invalid_signature).
TEST(StandardWebhooks, BadSecretIsReportedBeforeTheHeaders) {
    auto kind = [](const std::string &ts, const std::string &header) {
        try {
            verify_standard(one("whsec_not base64!"), kMsgId, ts, kPayload, header, kClock);
        } catch (const MalformedHeader &) {
            return std::string("malformed header");
        } catch (const idem::Error &e) {
            return std::string(e.sqlstate()) + " " + e.what();
        }
        return std::string("none");
    };
    const std::string bad_secret = "22023 webhook secret 1 is not a valid Standard Webhooks secret";
    EXPECT_EQ(kind(kTs, kSignature), bad_secret);
    EXPECT_EQ(kind(kTs, "garbage"), bad_secret);
    EXPECT_EQ(kind(kTs, ""), bad_secret);
    EXPECT_EQ(kind("not-a-timestamp", kSignature), bad_secret);
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
    std::string old_secret = "whsec_old";
    std::string new_secret = "whsec_new";
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

TEST(Stripe, MalformedHeaderRaises22023) {
    Clock clock{INT64_C(1700000000) * 1000000, kTolerance};
    auto verify = [&](std::string header, std::string secret = kStripeSecret) {
        return sqlstate_of([&] { verify_stripe(one(secret), header, "{}", clock); });
    };
    std::string v1 = "v1=" + std::string(64, 'a');
    EXPECT_EQ(verify(""), "22023");
    EXPECT_EQ(verify(v1), "22023");                                // no t=
    EXPECT_EQ(verify("t=1700000000,t=1700000001," + v1), "22023"); // two t=
    EXPECT_EQ(verify("t=abc," + v1), "22023");
    EXPECT_EQ(verify("t=," + v1), "22023");
    EXPECT_EQ(verify("t=1700000000," + v1 + ",junk"), "22023");
    EXPECT_EQ(verify("t=1700000000,,"), "22023");
    EXPECT_EQ(verify("t=1700000000," + v1, ""), "22023");
    EXPECT_EQ(sqlstate_of([&] { verify_stripe({}, "t=1," + v1, "{}", clock); }), "22023");
}
