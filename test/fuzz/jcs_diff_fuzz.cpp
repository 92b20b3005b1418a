// libFuzzer target (differential): raw JSON text through the two-pass tape canonicaliser (the
// unfiltered path) and through the streaming writer (forced by an exclude filter that matches
// nothing), in both number modes. Invariants: both accept or reject alike, with the same
// SQLSTATE, message and detail, and accepted input gives the same canonical bytes.
#include "error.hpp"
#include "jcs.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace {

// The canonical text, or the error as "SQLSTATE message detail"; *ok tells which.
std::string canonical(std::string_view text, bool exact, bool streaming, bool *ok) {
    idem::jcs::Options o;
    o.exact_numbers = exact;
    if (streaming)
        o.exclude = {{"\xff"}}; // no member name can be this (invalid UTF-8)
    try {
        *ok = true;
        return idem::jcs::canonicalize_text(text, o);
    } catch (const idem::Error &e) {
        *ok = false;
        return std::string(e.sqlstate()) + " " + e.what() + " " + e.detail();
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    std::string_view text(reinterpret_cast<const char *>(data), size);
    for (bool exact : {false, true}) {
        bool tape_ok, stream_ok;
        std::string tape = canonical(text, exact, false, &tape_ok);
        std::string stream = canonical(text, exact, true, &stream_ok);
        if (tape_ok != stream_ok || tape != stream) {
            std::fprintf(stderr, "paths differ (exact=%d)\ntape:      %s\nstreaming: %s\n", exact,
                         tape.c_str(), stream.c_str());
            std::abort();
        }
    }
    return 0;
}
