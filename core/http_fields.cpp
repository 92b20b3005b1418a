// HTTP field syntax (http_fields.hpp).
#include "http_fields.hpp"
#include "error.hpp"

#include <string>

#include "cpp_only.hpp"

namespace idem {
namespace {

[[noreturn]] void malformed(const std::string &detail) {
    throw Error(sqlstate::invalid_parameter_value, "invalid Idempotency-Key header", detail,
                "Send the key as a Structured Field string, Idempotency-Key: \"<key>\" (IETF "
                "Idempotency-Key draft, RFC 8941 section 3.3.3).");
}

bool is_ows(char c) {
    return c == ' ' || c == '\t';
}

// RFC 8941 section 3.3.3: a string's characters are %x20-7E.
bool is_printable(unsigned char c) {
    return c >= 0x20 && c <= 0x7e;
}

// RFC 8941 section 3.1.2: parameters, each ";" *SP key [ "=" bare-item ], as far as this
// parser checks them: printable ASCII starting with ";". Their content is ignored.
void check_parameters(std::string_view rest) {
    if (rest.empty())
        return;
    if (rest[0] != ';')
        malformed("Characters follow the closing quote of the string.");
    for (unsigned char c : rest)
        if (!is_printable(c))
            malformed("A parameter after the string contains a control or non-ASCII byte.");
}

// The quoted form: s starts with DQUOTE.
size_t parse_string(std::string_view s, char *out) {
    size_t n = 0;
    for (size_t i = 1; i < s.size(); i++) {
        unsigned char c = static_cast<unsigned char>(s[i]);
        if (c == '\\') {
            if (i + 1 == s.size() || (s[i + 1] != '"' && s[i + 1] != '\\'))
                malformed("A backslash in the string escapes neither '\"' nor '\\'.");
            out[n++] = s[++i];
        } else if (c == '"') {
            if (n == 0)
                malformed("The string is empty.");
            check_parameters(s.substr(i + 1));
            return n;
        } else if (!is_printable(c)) {
            malformed("The string contains a control or non-ASCII byte (position " +
                      std::to_string(i + 1) + ").");
        } else {
            out[n++] = static_cast<char>(c);
        }
    }
    malformed("The string has no closing quote.");
}

} // namespace

size_t parse_key_header(std::string_view value, char *out) {
    size_t b = 0, e = value.size();
    while (b < e && is_ows(value[b]))
        b++;
    while (e > b && is_ows(value[e - 1]))
        e--;
    std::string_view s = value.substr(b, e - b);
    if (s.empty())
        malformed("The header value is empty.");
    if (s[0] == '"')
        return parse_string(s, out);
    for (size_t i = 0; i < s.size(); i++) {
        unsigned char c = static_cast<unsigned char>(s[i]);
        if (c <= 0x20 || c >= 0x7f || c == '"')
            malformed("An unquoted key must be visible ASCII without spaces or quotes "
                      "(position " +
                      std::to_string(b + i + 1) + ").");
        out[i] = static_cast<char>(c);
    }
    return s.size();
}

namespace {

// RFC 9110 section 5.6.2: tchar.
bool is_tchar(unsigned char c) {
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
        return true;
    for (char t : std::string_view("!#$%&'*+-.^_`|~"))
        if (c == static_cast<unsigned char>(t))
            return true;
    return false;
}

[[noreturn]] void bad_header(std::string detail) {
    throw Error(sqlstate::invalid_parameter_value, "invalid response_headers", std::move(detail),
                "Pass a JSON object of header name to string value, e.g. {\"Location\": "
                "\"/v1/payments/42\"}.");
}

} // namespace

void validate_response_header(std::string_view name, std::string_view value) {
    if (name.empty() || name.size() > 256)
        bad_header("A header name must have 1 to 256 bytes.");
    for (unsigned char c : name)
        if (!is_tchar(c))
            bad_header("Header name \"" + std::string(name) +
                       "\" is not an HTTP token (RFC 9110 section 5.1).");
    if (value.size() > 8192)
        bad_header("The value of header \"" + std::string(name) + "\" is longer than 8192 bytes.");
    for (unsigned char c : value)
        if (c == '\r' || c == '\n' || c == '\0')
            bad_header("The value of header \"" + std::string(name) +
                       "\" contains CR, LF or NUL (RFC 9110 section 5.5).");
}

} // namespace idem
