// Webhook signatures: Standard Webhooks and Stripe-style headers, constant-time comparison.
#include "webhooks.hpp"

#include "crypto.hpp"
#include "error.hpp"

#include <openssl/evp.h>

#include <climits>

#include "cpp_only.hpp" // last include: core/ never sees postgres.h

namespace idem::webhooks {

namespace {

constexpr size_t mac_bytes = 32;
// Candidate signatures longer than this cannot be a SHA-256 MAC and are not decoded.
constexpr size_t max_candidate_chars = 256;
constexpr int64_t usec_per_sec = 1000000;

[[noreturn]] void malformed(std::string message, std::string detail = {}, std::string hint = {}) {
    throw Error(sqlstate::invalid_parameter_value, std::move(message), std::move(detail),
                std::move(hint));
}

bool is_base64_char(unsigned char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
           c == '/';
}

int hex_value(unsigned char c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

bool is_http_whitespace(char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

std::string ordinal(size_t index) {
    return std::to_string(index);
}

void check_secrets(const std::vector<std::string_view> &secrets) {
    if (secrets.empty())
        malformed("at least one webhook secret is required", {},
                  "Pass the current secret, or several during a key rotation.");
}

void check_clock(const Clock &clock) {
    if (clock.tolerance_usec < 0)
        malformed("webhook timestamp tolerance must not be negative", {},
                  "Pass an interval such as interval '5 minutes', or NULL for "
                  "idempotency.webhook_tolerance.");
}

// True when |now - ts seconds| <= tolerance (computed without overflow).
bool timestamp_fresh(int64_t ts_seconds, const Clock &clock) {
    __int128 diff =
        static_cast<__int128>(clock.now_usec) - static_cast<__int128>(ts_seconds) * usec_per_sec;
    if (diff < 0)
        diff = -diff;
    return diff <= clock.tolerance_usec;
}

// A candidate signature, decoded: only one of 32 bytes can match and is kept.
using Candidates = std::vector<std::string>;

// Compares every candidate against every expected MAC in constant time, without an early
// exit: the time depends only on the numbers of candidates and secrets.
bool any_match(const Candidates &candidates, const std::vector<Digest> &expected) {
    unsigned ok = 0;
    for (const std::string &given : candidates)
        for (const Digest &d : expected) {
            std::string_view want(reinterpret_cast<const char *>(d.data()), d.size());
            ok |= constant_time_equal(given, want) ? 1u : 0u;
        }
    return ok != 0;
}

// The verdict once the headers have been read: the checks that need no HMAC (a usable
// candidate, a fresh timestamp, a usable event id), then one HMAC of content per key.
template <typename Content>
Verdict decide(const std::vector<std::string_view> &keys, const Candidates &candidates, int64_t ts,
               const Clock &clock, const Checks &checks, Content content) {
    if (candidates.empty())
        return Verdict::InvalidSignature; // nothing that could match: no HMAC
    if (!timestamp_fresh(ts, clock))
        return Verdict::StaleTimestamp;
    if (!checks.event_id_usable)
        return Verdict::InvalidEventId;
    const std::string message = content();
    std::vector<Digest> expected;
    expected.reserve(keys.size());
    for (std::string_view key : keys)
        expected.push_back(checks.hmac(key, message));
    return any_match(candidates, expected) ? Verdict::Valid : Verdict::InvalidSignature;
}

// The v1 candidates of a webhook-signature header (space-separated "version,signature"
// entries); false for a malformed header (an entry without a comma).
bool standard_candidates(std::string_view header, Candidates &out) {
    std::string_view rest = trim_http_whitespace(header);
    while (!rest.empty()) {
        size_t sp = rest.find(' ');
        std::string_view token = rest.substr(0, sp);
        rest = sp == std::string_view::npos ? std::string_view() : rest.substr(sp + 1);
        if (token.empty())
            continue;
        size_t comma = token.find(',');
        if (comma == std::string_view::npos)
            return false; // not "<version>,<signature>": malformed header
        if (token.substr(0, comma) != "v1")
            continue; // another scheme (e.g. v1a, asymmetric): not ours to check
        std::string_view sig = token.substr(comma + 1);
        // Only the canonical base64 of 32 bytes: a last digit with its unused bits set decodes
        // to the same MAC, which the libraries (comparing text) refuse.
        std::string bytes;
        if (sig.size() <= max_candidate_chars && base64_decode(sig, bytes) &&
            bytes.size() == mac_bytes && base64_encode(bytes) == sig)
            out.push_back(std::move(bytes));
    }
    return true;
}

// The t= text and the v1= candidates of a Stripe-Signature header; false for a malformed
// header (an item without '=', no t= or two).
bool stripe_items(std::string_view header, std::string_view &t_text, Candidates &out) {
    bool have_t = false;
    std::string_view rest = header;
    while (true) {
        size_t comma = rest.find(',');
        std::string_view item = trim_http_whitespace(rest.substr(0, comma));
        size_t eq = item.find('=');
        if (eq == std::string_view::npos)
            return false; // not "<key>=<value>": malformed header
        std::string_view key = item.substr(0, eq);
        std::string_view value = item.substr(eq + 1);
        if (key == "t") {
            if (have_t)
                return false; // two timestamps: which one was signed?
            have_t = true;
            t_text = value;
        } else if (key == "v1") {
            std::string bytes;
            if (value.size() <= max_candidate_chars && hex_decode(value, bytes) &&
                bytes.size() == mac_bytes)
                out.push_back(std::move(bytes));
        }
        if (comma == std::string_view::npos)
            return have_t;
        rest = rest.substr(comma + 1);
    }
}

std::string signed_standard_content(std::string_view msg_id, std::string_view timestamp,
                                    std::string_view payload) {
    std::string content;
    content.reserve(msg_id.size() + timestamp.size() + payload.size() + 2);
    content.append(msg_id).append(1, '.').append(timestamp).append(1, '.').append(payload);
    return content;
}

} // namespace

// Base64 of bytes (EVP_EncodeBlock writes the padding and a terminating NUL).
std::string base64_encode(std::string_view bytes) {
    if (bytes.size() > static_cast<size_t>(INT_MAX / 4 * 3 - 3))
        malformed("value too long for base64 encoding");
    std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
    int n = EVP_EncodeBlock(reinterpret_cast<unsigned char *>(out.data()),
                            reinterpret_cast<const unsigned char *>(bytes.data()),
                            static_cast<int>(bytes.size()));
    out.resize(static_cast<size_t>(n));
    return out;
}

// Strict base64 decoding. EVP_DecodeBlock itself would skip surrounding whitespace and count
// padding as zero bytes, so the input is validated first and the padding subtracted.
bool base64_decode(std::string_view text, std::string &out) {
    out.clear();
    if (text.size() % 4 != 0 || text.size() > static_cast<size_t>(INT_MAX / 2))
        return false;
    if (text.empty())
        return true;
    size_t pad = 0;
    if (text[text.size() - 1] == '=')
        pad = text[text.size() - 2] == '=' ? 2 : 1;
    for (size_t i = 0; i < text.size() - pad; i++)
        if (!is_base64_char(static_cast<unsigned char>(text[i])))
            return false;
    out.resize(text.size() / 4 * 3);
    int n = EVP_DecodeBlock(reinterpret_cast<unsigned char *>(out.data()),
                            reinterpret_cast<const unsigned char *>(text.data()),
                            static_cast<int>(text.size()));
    if (n < 0 || static_cast<size_t>(n) != out.size()) {
        out.clear();
        return false;
    }
    out.resize(out.size() - pad);
    return true;
}

// Lower-case hex.
std::string hex_encode(std::string_view bytes) {
    std::string out(bytes.size() * 2, '\0');
    hex_lower(reinterpret_cast<const unsigned char *>(bytes.data()), bytes.size(), out.data());
    return out;
}

// Hex decoding, either case.
bool hex_decode(std::string_view text, std::string &out) {
    out.clear();
    if (text.size() % 2 != 0)
        return false;
    out.reserve(text.size() / 2);
    for (size_t i = 0; i < text.size(); i += 2) {
        int hi = hex_value(static_cast<unsigned char>(text[i]));
        int lo = hex_value(static_cast<unsigned char>(text[i + 1]));
        if (hi < 0 || lo < 0) {
            out.clear();
            return false;
        }
        out.push_back(static_cast<char>(hi << 4 | lo));
    }
    return true;
}

// Leading and trailing spaces, tabs, CRs and LFs removed.
std::string_view trim_http_whitespace(std::string_view text) noexcept {
    while (!text.empty() && is_http_whitespace(text.front()))
        text.remove_prefix(1);
    while (!text.empty() && is_http_whitespace(text.back()))
        text.remove_suffix(1);
    return text;
}

// whsec_<base64> → key bytes (24..64); the secret itself never appears in an error.
std::string standard_key(std::string_view secret, size_t index) {
    constexpr std::string_view prefix = "whsec_";
    if (secret.substr(0, prefix.size()) == prefix)
        secret.remove_prefix(prefix.size());
    const std::string hint = "Copy the secret exactly as the sender's dashboard shows it: "
                             "\"whsec_\" followed by base64 of 24 to 64 random bytes.";
    std::string key;
    if (!base64_decode(secret, key))
        malformed("webhook secret " + ordinal(index) + " is not a valid Standard Webhooks secret",
                  "A Standard Webhooks secret is \"whsec_\" followed by base64 (RFC 4648, with "
                  "padding).",
                  hint);
    if (key.size() < standard_secret_min_bytes || key.size() > standard_secret_max_bytes)
        malformed("webhook secret " + ordinal(index) + " is " +
                      (key.size() < standard_secret_min_bytes ? "too short" : "too long") +
                      " for Standard Webhooks",
                  "It decodes to " + std::to_string(key.size()) +
                      " bytes; the Standard Webhooks specification requires 24 to 64 bytes "
                      "(192 to 512 bits).",
                  hint);
    return key;
}

// At least 32 bytes, used as they are.
void check_stripe_secret(std::string_view secret, size_t index) {
    if (secret.size() < stripe_secret_min_bytes)
        malformed("webhook secret " + ordinal(index) + " is too short for a Stripe-style signature",
                  "It has " + std::to_string(secret.size()) +
                      " bytes; the HMAC-SHA256 key must have at least 32 bytes (RFC 2104: "
                      "shorter keys weaken HMAC).",
                  "Pass the endpoint's signing secret exactly as the sender shows it; Stripe's "
                  "start with \"whsec_\", which is part of the key.");
}

// Decimal unix seconds, 1 to 18 digits (no sign, no spaces).
bool parse_timestamp(std::string_view text, int64_t &out) noexcept {
    if (text.empty() || text.size() > 18)
        return false;
    int64_t v = 0;
    for (char ch : text) {
        if (ch < '0' || ch > '9')
            return false;
        v = v * 10 + (ch - '0');
    }
    out = v;
    return true;
}

const char *verdict_name(Verdict v) noexcept {
    switch (v) {
    case Verdict::Valid:
        return "valid";
    case Verdict::InvalidSignature:
        return "invalid_signature";
    case Verdict::StaleTimestamp:
        return "stale_timestamp";
    case Verdict::InvalidEventId:
        return "invalid_event_id";
    }
    return "invalid_signature";
}

// Standard Webhooks verification: the receiver's secrets, then the sender's fields, the v1
// candidates and the clock, then one HMAC per secret. A missing or malformed sender field is an
// invalid signature.
Verdict verify_standard(const std::vector<std::string_view> &secrets, Field msg_id, Field timestamp,
                        Field payload, Field signature_header, Clock clock, Checks checks) {
    check_secrets(secrets);
    check_clock(clock);
    // The receiver's own secrets first: a misconfigured one is an error whatever the sender sent.
    std::vector<std::string> keys;
    keys.reserve(secrets.size());
    for (size_t i = 0; i < secrets.size(); i++)
        keys.push_back(standard_key(secrets[i], i + 1));

    if (!msg_id || !timestamp || !payload || !signature_header ||
        signature_header->size() > max_header_bytes || msg_id->empty() ||
        msg_id->size() > max_msg_id_bytes)
        return Verdict::InvalidSignature;
    std::string_view ts_text = trim_http_whitespace(*timestamp);
    int64_t ts = 0;
    Candidates candidates;
    if (!parse_timestamp(ts_text, ts) || !standard_candidates(*signature_header, candidates))
        return Verdict::InvalidSignature;
    std::vector<std::string_view> key_views(keys.begin(), keys.end());
    return decide(key_views, candidates, ts, clock, checks,
                  [&] { return signed_standard_content(*msg_id, ts_text, *payload); });
}

// Stripe-style verification: the receiver's secrets, then t= and the v1= candidates and the
// clock, then one HMAC per secret. A missing or malformed header or body is an invalid
// signature.
Verdict verify_stripe(const std::vector<std::string_view> &secrets, Field header, Field payload,
                      Clock clock, Checks checks) {
    check_secrets(secrets);
    check_clock(clock);
    for (size_t i = 0; i < secrets.size(); i++)
        check_stripe_secret(secrets[i], i + 1);

    if (!header || !payload || header->size() > max_header_bytes)
        return Verdict::InvalidSignature;
    std::string_view t_text;
    Candidates candidates;
    int64_t ts = 0;
    if (!stripe_items(*header, t_text, candidates) || !parse_timestamp(t_text, ts))
        return Verdict::InvalidSignature;
    return decide(secrets, candidates, ts, clock, checks, [&] {
        std::string content;
        content.reserve(t_text.size() + 1 + payload->size());
        content.append(t_text).append(1, '.').append(*payload);
        return content;
    });
}

// "v1,<base64 HMAC>" over msg_id.timestamp.payload.
std::string sign_standard(std::string_view secret, std::string_view msg_id,
                          std::string_view timestamp, std::string_view payload) {
    std::string key = standard_key(secret, 1);
    int64_t ts = 0;
    if (!parse_timestamp(timestamp, ts))
        malformed("malformed webhook timestamp (webhook-timestamp)",
                  "The timestamp must be unix seconds written as 1 to 18 decimal digits.");
    Digest mac = hmac_sha256(key, signed_standard_content(msg_id, timestamp, payload));
    return "v1," +
           base64_encode(std::string_view(reinterpret_cast<const char *>(mac.data()), mac.size()));
}

// "t=<timestamp>,v1=<hex HMAC>" over timestamp.payload.
std::string sign_stripe(std::string_view secret, int64_t timestamp, std::string_view payload) {
    check_stripe_secret(secret, 1);
    if (timestamp < 0)
        malformed("webhook timestamp must not be negative");
    std::string t = std::to_string(timestamp);
    std::string content;
    content.reserve(t.size() + 1 + payload.size());
    content.append(t).append(1, '.').append(payload);
    Digest mac = hmac_sha256(secret, content);
    return "t=" + t + ",v1=" +
           hex_encode(std::string_view(reinterpret_cast<const char *>(mac.data()), mac.size()));
}

} // namespace idem::webhooks
