// The HTTP contract's rules that need no database (docs/records.md "The HTTP contract"): the
// scope of a request's record, which answers are stored, the resource id a Location names and the
// RFC 9457 problem body. src/http_contract.cpp calls them for idem_http_begin, idem_http_end,
// idem_http_scope, idem_http_stored and idem_http_problem.
#pragma once

#include <string>
#include <string_view>

namespace idem::http {

// The scope of a request's record: the principal with its '%', '/' and '*' percent-encoded (so
// that no principal can spell another's scope, nor the shared one), '/', the operation; with
// shared_key_space "*/" and the operation whatever the principal. False (no scope: the request
// is answered 403) for an absent or empty principal without shared_key_space.
bool request_scope(bool has_principal, std::string_view principal, std::string_view operation,
                   bool shared_key_space, std::string &out);

// Whether an answer of this status is the request's result, stored and replayed: 2xx, 3xx and
// 4xx but 401, 403, 408, 409, 423, 424, 425 and 429 (the same request may succeed later). 1xx
// and 5xx are not: the key is released for a retry.
bool stored_status(int status) noexcept;

// The resource id a Location header names: the last segment of its path (the query and the
// fragment dropped); empty when the path ends with '/' or the value is empty.
std::string_view location_resource_id(std::string_view location) noexcept;

// The reason phrase the contract's problem answers use as their title ("Error" for a status
// they never answer with).
std::string_view problem_title(int status) noexcept;

// An RFC 9457 problem body: {"type":"about:blank","title":...,"status":...,"detail":...}, the
// detail (UTF-8) escaped as PostgreSQL's to_json escapes a string, or null without one.
std::string problem_body(int status, bool has_detail, std::string_view detail);

} // namespace idem::http
