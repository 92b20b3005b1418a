// Webhook signature verification: Standard Webhooks (https://www.standardwebhooks.com,
// "v1,<base64 HMAC-SHA256 of id.timestamp.payload>", whsec_ secrets) and the Stripe-style
// "t=<unix seconds>,v1=<hex HMAC-SHA256 of t.payload>" header. Signatures are computed over the
// raw body bytes; every candidate signature is compared against every secret in constant time
// (no early exit), and the signed timestamp must lie within a tolerance of the clock in both
// directions.
//
// Two kinds of input, two behaviours:
//  * the receiver's own configuration (secrets, tolerance) is checked first and a mistake throws
//    idem::Error 22023 with a hint, whatever the sender sent (never containing a secret);
//  * what the unauthenticated sender controls (the id, timestamp and signature headers, the
//    body) never throws: missing, empty, blank, malformed or oversized, it is
//    Verdict::InvalidSignature.
// Every check that needs no HMAC comes first (the headers' form, a usable candidate signature,
// the timestamp's freshness, the event id): a request that fails one costs no HMAC, whatever
// the size of its body. Then one HMAC per secret, compared with every candidate.
#pragma once

#include "crypto.hpp"
#include "error.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace idem::webhooks {

// Standard Webhooks: "Signing secret: Random. At least 24 bytes (192 bits, 512 maximum)" (the
// specification's table of symmetric signatures), i.e. 24 to 64 bytes after base64 decoding.
constexpr size_t standard_secret_min_bytes = 24;
constexpr size_t standard_secret_max_bytes = 64;
// Stripe-style secrets are the HMAC-SHA256 key as they are; no specification gives a length.
// RFC 2104, section 3: a key shorter than the hash output (32 bytes for SHA-256) "is strongly
// discouraged as it would decrease the security strength of the function". Stripe's endpoint
// secrets ("whsec_" and 32 characters, 38 bytes; the Stripe CLI's: 70 bytes) are longer.
constexpr size_t stripe_secret_min_bytes = 32;
// A signature header longer than this is not looked at (invalid signature): a real one holds a
// few signatures (well under 1 KiB), and HTTP servers refuse longer header lines by default
// (nginx 8 KiB, Apache 8190 bytes, Node.js 16 KiB for all headers together).
constexpr size_t max_header_bytes = 16384;
// A Standard Webhooks id (webhook-id) is the event's dedup key: one the inbox cannot record
// (empty, or longer than its 1024-byte event ids) is refused before any HMAC. The npm
// libraries refuse an empty id too ("Missing required headers").
constexpr size_t max_msg_id_bytes = 1024;

// RFC 4648 base64 (standard alphabet, with padding), through OpenSSL EVP_EncodeBlock.
std::string base64_encode(std::string_view bytes);

// Strict RFC 4648 base64 decoding (standard alphabet, length a multiple of 4, at most two '='
// and only at the end), through OpenSSL EVP_DecodeBlock. Returns false if text is malformed.
bool base64_decode(std::string_view text, std::string &out);

// Lower-case hex of bytes.
std::string hex_encode(std::string_view bytes);

// Hex decoding (either case, even length). Returns false if text is malformed.
bool hex_decode(std::string_view text, std::string &out);

// text without the HTTP whitespace (space, tab, CR, LF) at either end. A header value has none
// (RFC 9110, section 5.5), but frameworks sometimes hand a value over with the line's CR LF.
std::string_view trim_http_whitespace(std::string_view text) noexcept;

// The HMAC key of a Standard Webhooks secret: the base64 text after the optional "whsec_"
// prefix, decoded, 24 to 64 bytes. index (1-based) names the secret in errors; throws
// idem::Error 22023 (with a hint) otherwise.
std::string standard_key(std::string_view secret, size_t index);

// Checks a Stripe-style secret (used as the key as it is): at least 32 bytes; throws
// idem::Error 22023 (with a hint) otherwise.
void check_stripe_secret(std::string_view secret, size_t index);

// A unix timestamp in seconds written as 1 to 18 decimal digits, nothing else. False (out
// untouched) for anything else.
bool parse_timestamp(std::string_view text, int64_t &out) noexcept;

enum class Verdict {
    Valid,            // a signature matches one of the secrets and the timestamp is fresh
    InvalidSignature, // no proof: no candidate matches, or a sender field is missing/malformed
    StaleTimestamp,   // the timestamp is outside the tolerance (the signature is not checked)
    InvalidEventId,   // Checks::event_id_usable was false (the signature is not checked)
};

// "valid", "invalid_signature", "stale_timestamp" or "invalid_event_id".
const char *verdict_name(Verdict v) noexcept;

// Times are microseconds since the unix epoch; tolerance_usec >= 0 (else 22023). The timestamp
// is accepted when |now - timestamp| <= tolerance.
struct Clock {
    int64_t now_usec;
    int64_t tolerance_usec;
};

// A field the sender controls: std::nullopt when the request did not carry it (SQL NULL).
using Field = std::optional<std::string_view>;

// The MAC a verification computes: HMAC-SHA256 of message under key.
using HmacFn = Digest (*)(std::string_view key, std::string_view message);

// How a verification computes its MACs, and what the caller checked beforehand.
struct Checks {
    HmacFn hmac = &hmac_sha256; // unit tests count the calls
    // idem_webhook_receive's own check of the id it records (stripe: the id read from the
    // body): false answers InvalidEventId once the headers have passed, before any HMAC.
    bool event_id_usable = true;
};

// Standard Webhooks: secrets are whsec_ secrets (several for key rotation), msg_id and timestamp
// are the webhook-id and webhook-timestamp headers, signature_header the webhook-signature
// header (space-separated "version,signature" entries; versions other than v1 are ignored).
// The signature header and the timestamp are read without HTTP whitespace at their ends; the
// id is signed byte for byte (it is the event's dedup key; 1 to max_msg_id_bytes). Throws
// idem::Error 22023 only for the receiver's configuration: no secrets, a malformed secret, a
// negative tolerance.
Verdict verify_standard(const std::vector<std::string_view> &secrets, Field msg_id, Field timestamp,
                        Field payload, Field signature_header, Clock clock, Checks checks = {});

// Stripe-style: secrets are used as raw bytes (Stripe's whsec_ strings are the HMAC key as
// they are, not base64), header is "t=<seconds>,v1=<hex>[,v1=<hex>...]" (other schemes such as
// v0 are ignored; HTTP whitespace around items and at the ends is ignored). Throws idem::Error
// 22023 only for no secrets, a secret shorter than 32 bytes, or a negative tolerance.
Verdict verify_stripe(const std::vector<std::string_view> &secrets, Field header, Field payload,
                      Clock clock, Checks checks = {});

// The webhook-signature header value "v1,<base64>" a Standard Webhooks sender would send;
// throws 22023 for a malformed secret or timestamp (the caller's own values).
std::string sign_standard(std::string_view secret, std::string_view msg_id,
                          std::string_view timestamp, std::string_view payload);

// The Stripe-Signature header value "t=<timestamp>,v1=<hex>"; throws 22023 for a secret
// shorter than 32 bytes or a negative timestamp.
std::string sign_stripe(std::string_view secret, int64_t timestamp, std::string_view payload);

} // namespace idem::webhooks
