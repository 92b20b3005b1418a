// HTTP field syntax: the Idempotency-Key request header (IETF httpapi Idempotency-Key draft,
// section 2), whose value is a Structured Field string (RFC 8941 section 3.3.3),
// Idempotency-Key: "8e03978e-40d5"; and the response headers a record stores for its replays
// (RFC 9110 section 5). Server-independent.
#pragma once

#include <cstddef>
#include <string_view>

namespace idem {

// Parses a header value into the key it carries, written to out (capacity value.size(); the key
// is never longer) and returns the key's length. Accepted:
//   - an sf-string: DQUOTE, printable ASCII with \" and \\ escapes, DQUOTE, optionally followed
//     by parameters (";name=value", RFC 8941 section 3.1.2), which the draft defines none of and
//     which are ignored;
//   - for clients that do not quote (many send the bare key, as Stripe's do): a value without
//     DQUOTE made of visible ASCII, taken verbatim, so that "k" and k are the same key.
// Leading and trailing spaces and tabs are not part of the value (RFC 9110 section 5.5).
// Throws Error 22023 for anything else (empty, unterminated, a bad escape, a control or
// non-ASCII byte, an empty string, characters after the string that are not parameters).
size_t parse_key_header(std::string_view value, char *out);

// Checks one response header to be stored for replay: the name a token (RFC 9110 section 5.1),
// 1-256 bytes; the value without CR, LF or NUL (section 5.5), at most 8,192 bytes. Throws Error
// 22023 naming the header otherwise.
void validate_response_header(std::string_view name, std::string_view value);

} // namespace idem
