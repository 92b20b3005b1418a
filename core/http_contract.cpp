// The HTTP contract's rules that need no database (core/http_contract.hpp).
#include "http_contract.hpp"

#include <algorithm>
#include <cstdio>

#include "cpp_only.hpp" // last include: core/ never sees postgres.h

namespace idem::http {

bool request_scope(bool has_principal, std::string_view principal, std::string_view operation,
                   bool shared_key_space, std::string &out) {
    out.clear();
    if (shared_key_space) {
        out.push_back('*');
    } else {
        if (!has_principal || principal.empty())
            return false;
        out.reserve(principal.size() + 1 + operation.size());
        for (char c : principal) {
            switch (c) {
            case '%':
                out += "%25";
                break;
            case '/':
                out += "%2F";
                break;
            case '*':
                out += "%2A";
                break;
            default:
                out.push_back(c);
            }
        }
    }
    out.push_back('/');
    out.append(operation);
    return true;
}

bool stored_status(int status) noexcept {
    if (status < 200 || status >= 500)
        return false;
    switch (status) {
    case 401: // Unauthorized: the same request may pass with credentials
    case 403: // Forbidden: may pass once granted
    case 408: // Request Timeout
    case 409: // Conflict: the state it conflicts with may change
    case 423: // Locked
    case 424: // Failed Dependency
    case 425: // Too Early
    case 429: // Too Many Requests
        return false;
    default:
        return true;
    }
}

std::string_view location_resource_id(std::string_view location) noexcept {
    size_t end = std::min(location.find('?'), location.find('#'));
    std::string_view path = location.substr(0, end);
    size_t slash = path.rfind('/');
    return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

std::string_view problem_title(int status) noexcept {
    switch (status) {
    case 400:
        return "Bad Request";
    case 403:
        return "Forbidden";
    case 409:
        return "Conflict";
    case 422:
        return "Unprocessable Content";
    case 500:
        return "Internal Server Error";
    case 503:
        return "Service Unavailable";
    default:
        return "Error";
    }
}

namespace {
// A JSON string as PostgreSQL's escape_json writes it: '"' and '\' escaped, \b \f \n \r \t,
// other control characters as \u00xx; every other byte as it is.
void append_json_string(std::string &out, std::string_view s) {
    out.push_back('"');
    for (char ch : s) {
        unsigned char c = static_cast<unsigned char>(ch);
        switch (c) {
        case '"':
            out += "\\\"";
            break;
        case '\\':
            out += "\\\\";
            break;
        case '\b':
            out += "\\b";
            break;
        case '\f':
            out += "\\f";
            break;
        case '\n':
            out += "\\n";
            break;
        case '\r':
            out += "\\r";
            break;
        case '\t':
            out += "\\t";
            break;
        default:
            if (c < 0x20) {
                char buf[8];
                std::snprintf(buf, sizeof buf, "\\u%04x", c);
                out += buf;
            } else {
                out.push_back(ch);
            }
        }
    }
    out.push_back('"');
}
} // namespace

std::string problem_body(int status, bool has_detail, std::string_view detail) {
    std::string out = R"({"type":"about:blank","title":)";
    append_json_string(out, problem_title(status));
    out += ",\"status\":";
    out += std::to_string(status);
    out += ",\"detail\":";
    if (has_detail)
        append_json_string(out, detail);
    else
        out += "null";
    out.push_back('}');
    return out;
}

} // namespace idem::http
