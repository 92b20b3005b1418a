// libFuzzer target: raw JSON text through the strict parser and canonical writer in both number
// modes. Invariants: only idem::Error escapes; accepted input gives well-formed canonical text
// that is a fixed point (re-canonicalising it returns it unchanged) and whose exact-mode form
// is also a fixed point.
#include "error.hpp"
#include "jcs.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace {

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
    for (bool exact : {false, true}) {
        idem::jcs::Options o;
        o.exact_numbers = exact;
        std::string canon;
        try {
            canon = idem::jcs::canonicalize_text(text, o);
        } catch (const idem::Error &) {
            continue; // rejected input is fine; crashes, leaks and UB are not
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
