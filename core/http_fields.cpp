// HTTP field syntax (http_fields.hpp).
#include "http_fields.hpp"
#include "error.hpp"

#include <algorithm>
#include <string>
#include <vector>

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

std::string quoted(std::string_view name) {
    return "\"" + std::string(name) + "\"";
}

char lower(char c) {
    return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

std::string lowered(std::string_view s) {
    std::string out(s);
    for (char &c : out)
        c = lower(c);
    return out;
}

// RFC 9110 sections 6.1, 7.6.1, 8.6, 10.1.4 and RFC 9112 section 6.1: fields that frame one
// message or belong to one connection.
bool framing_or_hop_by_hop(std::string_view name) {
    static const char *const names[] = {"content-length",   "transfer-encoding",
                                        "connection",       "keep-alive",
                                        "proxy-connection", "te",
                                        "trailer",          "upgrade"};
    std::string n = lowered(name);
    for (const char *f : names)
        if (n == f)
            return true;
    return false;
}

// What is wrong with the byte at i of a field value, or nullptr (RFC 9110 section 5.5).
const char *bad_value_byte(std::string_view v, size_t i) {
    auto at = [&](size_t k) { return k < v.size() ? static_cast<unsigned char>(v[k]) : 0u; };
    unsigned char c = at(i);
    if (c == ' ' || c == '\t')
        return i == 0 || i + 1 == v.size() ? "begins or ends with a space or tab" : nullptr;
    if (c < 0x20 || c == 0x7f)
        return "contains a control character (CR, LF, NUL, DEL and the other C0 controls but "
               "HTAB are not field-value characters)";
    if (c == 0xc2 && at(i + 1) >= 0x80 && at(i + 1) <= 0x9f)
        return "contains a C1 control character (U+0080-U+009F, such as U+0085 NEL)";
    if (c == 0xe2 && at(i + 1) == 0x80 && (at(i + 2) == 0xa8 || at(i + 2) == 0xa9))
        return "contains U+2028 or U+2029 (line or paragraph separator)";
    return nullptr;
}

[[noreturn]] void too_many(std::string detail, const char *setting) {
    throw Error(sqlstate::program_limit_exceeded, std::string("response_headers exceed ") + setting,
                std::move(detail),
                std::string("Store fewer or shorter headers, or have a superuser raise ") +
                    setting + ".");
}

} // namespace

void validate_response_header(std::string_view name, std::string_view value) {
    if (name.empty() || name.size() > 256)
        bad_header("A header name must have 1 to 256 bytes.");
    for (unsigned char c : name)
        if (!is_tchar(c))
            bad_header("Header name " + quoted(name) +
                       " is not an HTTP token (RFC 9110 section 5.1).");
    if (framing_or_hop_by_hop(name))
        bad_header("Header " + quoted(name) +
                   " frames a single message or belongs to one connection (RFC 9110 sections "
                   "7.6.1 and 8.6, RFC 9112 section 6): the server that sends the replay writes "
                   "its own. Content-Length, Transfer-Encoding, Connection, Keep-Alive, "
                   "Proxy-Connection, TE, Trailer and Upgrade are not stored.");
    if (value.size() > 8192)
        bad_header("The value of header " + quoted(name) + " is longer than 8192 bytes.");
    for (size_t i = 0; i < value.size(); i++)
        if (const char *why = bad_value_byte(value, i))
            bad_header("The value of header " + quoted(name) + " " + why + " at byte " +
                       std::to_string(i + 1) + " (RFC 9110 section 5.5).");
}

void validate_response_headers(const HeaderField *fields, size_t n, HeaderLimits limits) {
    if (n > limits.max_count)
        too_many("There are " + std::to_string(n) + " headers; the maximum is " +
                     std::to_string(limits.max_count) + ".",
                 "idempotency.max_response_headers");
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++)
        bytes += fields[i].name.size() + fields[i].value.size();
    if (bytes > limits.max_bytes)
        too_many("The names and values have " + std::to_string(bytes) +
                     " bytes together; the maximum is " + std::to_string(limits.max_bytes) + ".",
                 "idempotency.max_response_header_bytes");
    std::vector<std::pair<std::string, size_t>> names;
    names.reserve(n);
    for (size_t i = 0; i < n; i++) {
        validate_response_header(fields[i].name, fields[i].value);
        names.emplace_back(lowered(fields[i].name), i);
    }
    std::sort(names.begin(), names.end());
    for (size_t i = 1; i < names.size(); i++)
        if (names[i].first == names[i - 1].first)
            bad_header("Headers " + quoted(fields[names[i - 1].second].name) + " and " +
                       quoted(fields[names[i].second].name) +
                       " are the same field: header names are case-insensitive (RFC 9110 "
                       "section 5.1).");
}

} // namespace idem
