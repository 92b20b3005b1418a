// Webhook signature verification: Standard Webhooks (https://www.standardwebhooks.com,
// "v1,<base64 HMAC-SHA256 of id.timestamp.payload>", whsec_ secrets) and the Stripe-style
// "t=<unix seconds>,v1=<hex HMAC-SHA256 of t.payload>" header. Signatures are computed over the
// raw body bytes; every candidate signature is compared against every secret in constant time
// (no early exit), and the signed timestamp must lie within a tolerance of the clock in both
// directions. Errors are idem::Error 22023 and never contain a secret.
#pragma once

#include "error.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace idem::webhooks {

// The idem::Error (22023) raised for a malformed signature header or timestamp, i.e. input the
// sender controls; a receiver may treat it as an invalid signature.
class MalformedHeader : public Error {
  public:
    using Error::Error;
};

// RFC 4648 base64 (standard alphabet, with padding), through OpenSSL EVP_EncodeBlock.
std::string base64_encode(std::string_view bytes);

// Strict RFC 4648 base64 decoding (standard alphabet, length a multiple of 4, at most two '='
// and only at the end), through OpenSSL EVP_DecodeBlock. Returns false if text is malformed.
bool base64_decode(std::string_view text, std::string &out);

// Lower-case hex of bytes.
std::string hex_encode(std::string_view bytes);

// Hex decoding (either case, even length). Returns false if text is malformed.
bool hex_decode(std::string_view text, std::string &out);

// The HMAC key of a Standard Webhooks secret: the base64 text after the optional "whsec_"
// prefix, decoded. index (1-based) names the secret in errors; throws idem::Error 22023.
std::string standard_key(std::string_view secret, size_t index);

// A unix timestamp in seconds written as 1 to 18 decimal digits; throws idem::Error 22023 with
// what ("webhook-timestamp", "t") naming the field.
int64_t parse_timestamp(std::string_view text, const char *what);

enum class Verdict {
    Valid,            // a signature matches one of the secrets and the timestamp is fresh
    InvalidSignature, // no candidate signature matches any secret
    StaleTimestamp,   // authentic, but the signed timestamp is outside the tolerance
};

// "valid", "invalid_signature" or "stale_timestamp".
const char *verdict_name(Verdict v);

// Times are microseconds since the unix epoch; tolerance_usec >= 0 (else 22023). The timestamp
// is accepted when |now - timestamp| <= tolerance.
struct Clock {
    int64_t now_usec;
    int64_t tolerance_usec;
};

// Standard Webhooks: secrets are whsec_ secrets (several for key rotation), msg_id and timestamp
// are the webhook-id and webhook-timestamp headers, signature_header the webhook-signature
// header (space-separated "version,signature" entries; versions other than v1 are ignored).
// Throws idem::Error 22023 for no secrets, a malformed secret, a malformed timestamp or an
// empty or malformed signature header.
Verdict verify_standard(const std::vector<std::string_view> &secrets, std::string_view msg_id,
                        std::string_view timestamp, std::string_view payload,
                        std::string_view signature_header, Clock clock);

// Stripe-style: secrets are used as raw bytes (Stripe's whsec_ strings are the HMAC key as
// they are, not base64), header is "t=<seconds>,v1=<hex>[,v1=<hex>...]" (other schemes such as
// v0 are ignored). Throws idem::Error 22023 for no secrets, an empty secret, or a header that
// is malformed, lacks t= or has it twice.
Verdict verify_stripe(const std::vector<std::string_view> &secrets, std::string_view header,
                      std::string_view payload, Clock clock);

// The webhook-signature header value "v1,<base64>" a Standard Webhooks sender would send.
std::string sign_standard(std::string_view secret, std::string_view msg_id,
                          std::string_view timestamp, std::string_view payload);

// The Stripe-Signature header value "t=<timestamp>,v1=<hex>".
std::string sign_stripe(std::string_view secret, int64_t timestamp, std::string_view payload);

} // namespace idem::webhooks
