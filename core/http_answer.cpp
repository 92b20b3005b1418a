// The HTTP answer of a claim's outcome (core/http_answer.hpp).
#include "http_answer.hpp"

#include "cpp_only.hpp" // last include: core/ never sees postgres.h

namespace idem::http {

namespace {
// RFC 9457 problem details: type about:blank (nothing beyond the status code), the status's
// reason phrase as the title, and what happened as the detail.
const char *const BUSY_PROBLEM =
    R"({"type":"about:blank","title":"Conflict","status":409,)"
    R"("detail":"A request with the same Idempotency-Key is being processed; retry later."})";
const char *const MISMATCH_PROBLEM =
    R"({"type":"about:blank","title":"Unprocessable Content","status":422,)"
    R"("detail":"The Idempotency-Key was used with a different request."})";

char lower(char c) noexcept {
    return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}
} // namespace

Kind kind_of(std::string_view outcome) noexcept {
    if (outcome == "replayed")
        return Kind::Replay;
    if (outcome == "in_progress")
        return Kind::Busy;
    if (outcome == "mismatch")
        return Kind::Mismatch;
    return Kind::RunHandler;
}

int64_t retry_after_seconds(bool has_lease, int64_t lease_expires_us, int64_t now_us) noexcept {
    if (!has_lease || lease_expires_us <= now_us)
        return 1;
    int64_t left = lease_expires_us - now_us;
    int64_t s = left / 1000000 + (left % 1000000 != 0);
    return s < 1 ? 1 : s;
}

Answer answer(Kind kind, const Stored &stored, int64_t now_us) noexcept {
    Answer a{};
    switch (kind) {
    case Kind::RunHandler:
        break;
    case Kind::Replay:
        a.has_answer = true;
        a.status = stored.has_status ? stored.status : 200;
        a.replay_headers = true;
        a.json_type = !stored.has_body && stored.has_json && !stored.has_content_type;
        break;
    case Kind::Busy:
        a.has_answer = true;
        a.status = 409;
        a.retry_after = retry_after_seconds(stored.has_lease, stored.lease_expires_us, now_us);
        a.problem = BUSY_PROBLEM;
        break;
    case Kind::Mismatch:
        a.has_answer = true;
        a.status = 422;
        a.problem = MISMATCH_PROBLEM;
        break;
    }
    return a;
}

bool header_name_equal(std::string_view a, std::string_view b) noexcept {
    if (a.size() != b.size())
        return false;
    for (size_t i = 0; i < a.size(); i++)
        if (lower(a[i]) != lower(b[i]))
            return false;
    return true;
}

} // namespace idem::http
