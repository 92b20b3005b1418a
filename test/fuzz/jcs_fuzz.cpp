// libFuzzer target: raw JSON text through the strict parser and canonical writer in both number
// modes. Invariants: only idem::Error escapes; accepted input gives well-formed canonical text
// that is a fixed point (re-canonicalising it returns it unchanged) and whose exact-mode form
// is also a fixed point; input that is not well-formed UTF-8 (RFC 3629, checked here on its
// own) is rejected with 22021 and only such input is.
#include "error.hpp"
#include "jcs.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

namespace {

// Whether s is well-formed UTF-8: the table of RFC 3629 section 4, one sequence at a time.
bool well_formed_utf8(std::string_view s) {
    const auto *p = reinterpret_cast<const unsigned char *>(s.data());
    const size_t n = s.size();
    auto in = [](unsigned c, unsigned lo, unsigned hi) { return c >= lo && c <= hi; };
    for (size_t i = 0; i < n;) {
        const unsigned c = p[i];
        const size_t left = n - i;
        auto at = [&](size_t k) { return k < left ? static_cast<unsigned>(p[i + k]) : 0u; };
        size_t len;
        if (c <= 0x7F)
            len = 1;
        else if (in(c, 0xC2, 0xDF) && in(at(1), 0x80, 0xBF))
            len = 2;
        else if (c == 0xE0 && in(at(1), 0xA0, 0xBF) && in(at(2), 0x80, 0xBF))
            len = 3;
        else if ((in(c, 0xE1, 0xEC) || in(c, 0xEE, 0xEF)) && in(at(1), 0x80, 0xBF) &&
                 in(at(2), 0x80, 0xBF))
            len = 3;
        else if (c == 0xED && in(at(1), 0x80, 0x9F) && in(at(2), 0x80, 0xBF))
            len = 3;
        else if (c == 0xF0 && in(at(1), 0x90, 0xBF) && in(at(2), 0x80, 0xBF) &&
                 in(at(3), 0x80, 0xBF))
            len = 4;
        else if (in(c, 0xF1, 0xF3) && in(at(1), 0x80, 0xBF) && in(at(2), 0x80, 0xBF) &&
                 in(at(3), 0x80, 0xBF))
            len = 4;
        else if (c == 0xF4 && in(at(1), 0x80, 0x8F) && in(at(2), 0x80, 0xBF) &&
                 in(at(3), 0x80, 0xBF))
            len = 4;
        else
            return false;
        i += len;
    }
    return true;
}

void check_fixed_point(const std::string &canon, bool exact) {
    idem::jcs::Options o;
    o.exact_numbers = exact;
    std::string again;
    try {
        again = idem::jcs::canonicalize_text(canon, o);
    } catch (const idem::Error &e) {
        std::fprintf(stderr, "canonical output rejected (%s): %s\n", e.what(), canon.c_str());
        std::abort();
    }
    if (again != canon) {
        std::fprintf(stderr, "not idempotent:\n%s\n%s\n", canon.c_str(), again.c_str());
        std::abort();
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    std::string_view text(reinterpret_cast<const char *>(data), size);
    const bool utf8 = well_formed_utf8(text);
    for (bool exact : {false, true}) {
        idem::jcs::Options o;
        o.exact_numbers = exact;
        std::string canon;
        try {
            canon = idem::jcs::canonicalize_text(text, o);
        } catch (const idem::Error &e) {
            // rejected input is fine (crashes, leaks and UB are not), with 22021 exactly when
            // the text is not UTF-8, whatever else is wrong with it
            if ((std::strcmp(e.sqlstate(), "22021") == 0) == utf8) {
                std::fprintf(stderr, "%s for %s UTF-8: %s\n", e.sqlstate(),
                             utf8 ? "well-formed" : "invalid", e.what());
                std::abort();
            }
            continue;
        }
        if (!utf8) {
            std::fprintf(stderr, "invalid UTF-8 accepted\n");
            std::abort();
        }
        check_fixed_point(canon, exact);
        // Filters never crash and never make valid output invalid.
        o.exclude = {{"a"}, {"0", "b"}};
        o.include = {{"a"}, {"b"}, {"1"}};
        try {
            std::string filtered = idem::jcs::canonicalize_text(text, o);
            check_fixed_point(filtered, exact);
        } catch (const idem::Error &) {
            std::fprintf(stderr, "filters rejected accepted input\n");
            std::abort();
        }
    }
    return 0;
}
