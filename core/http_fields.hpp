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

// Checks one response header to be stored for replay (RFC 9110 section 5):
//   - the name a token (section 5.1), 1-256 bytes, and not a field that frames one message or
//     belongs to one connection (Content-Length, Transfer-Encoding, Connection, Keep-Alive,
//     Proxy-Connection, TE, Trailer, Upgrade; sections 6.1, 7.6.1, 8.6, 10.1.4, RFC 9112 6.1):
//     the server that sends the replay writes those for its own message;
//   - the value at most 8,192 bytes of field-value characters (section 5.5): visible ASCII,
//     obs-text (bytes 0x80-0xFF), and SP / HTAB only inside (not first or last). Refused even
//     as obs-text: the UTF-8 encodings of the C1 controls U+0080-U+009F (U+0085, NEL, among
//     them) and of U+2028 / U+2029, which some clients take for line breaks.
// Throws Error 22023 naming the header otherwise.
void validate_response_header(std::string_view name, std::string_view value);

// One header of a response to be stored.
struct HeaderField {
    std::string_view name, value;
};

// The bounds of a response's headers (idempotency.max_response_headers and
// idempotency.max_response_header_bytes).
struct HeaderLimits {
    size_t max_count; // headers
    size_t max_bytes; // the bytes of all names and values together
};

// Checks the headers of one response, in this order: at most max_count headers, at most
// max_bytes of names and values together (Error 54000, naming the setting); each header as
// validate_response_header (22023); no two names equal ignoring case (22023: a field name is
// case-insensitive, section 5.1, so "Location" and "location" would be one field twice).
void validate_response_headers(const HeaderField *fields, size_t n, HeaderLimits limits);

} // namespace idem
