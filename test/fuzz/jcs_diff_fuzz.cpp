// libFuzzer target (differential): raw JSON text through the unfiltered path (the two-pass
// tape, with a new writer and with one writer kept across inputs) and through the streaming
// tokenizer and writer (forced by an exclude filter that matches nothing), in both number
// modes. Invariants: all accept or reject alike, with the same SQLSTATE, message and detail,
// and accepted input gives the same canonical bytes.
#include "error.hpp"
#include "jcs.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace {

enum Path { kTape, kStreaming, kReused };
const char *const kPathNames[] = {"tape", "streaming", "reused writer"};

// The canonical text, or the error as "SQLSTATE message detail"; *ok tells which. kReused:
// default options, through one writer kept across inputs (each mode its own), as the
// extension keeps one per backend.
std::string canonical(std::string_view text, bool exact, Path path, bool *ok) {
    if (path == kReused) {
        static idem::jcs::CanonicalWriter writers[2] = {
            idem::jcs::CanonicalWriter(idem::jcs::Options{}), idem::jcs::CanonicalWriter([] {
                idem::jcs::Options o;
                o.exact_numbers = true;
                return o;
            }())};
        idem::jcs::CanonicalWriter &w = writers[exact];
        try {
            *ok = true;
            idem::jcs::parse_into(text, w);
            return std::string(w.result());
        } catch (const idem::Error &e) {
            *ok = false;
            return std::string(e.sqlstate()) + " " + e.what() + " " + e.detail();
        }
    }
    idem::jcs::Options o;
    o.exact_numbers = exact;
    if (path == kStreaming)
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
        bool stream_ok;
        const std::string stream = canonical(text, exact, kStreaming, &stream_ok);
        for (Path path : {kTape, kReused}) {
            bool ok;
            const std::string got = canonical(text, exact, path, &ok);
            if (ok != stream_ok || got != stream) {
                std::fprintf(stderr, "paths differ (exact=%d)\n%s: %s\nstreaming: %s\n", exact,
                             kPathNames[path], got.c_str(), stream.c_str());
                std::abort();
            }
        }
    }
    return 0;
}
