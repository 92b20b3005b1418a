// Which text takes which path (the table in jcs.hpp), and the entry points: parse_into,
// fingerprint_into, canonicalize_text, fingerprint_text.
#include "internal.hpp"

#include "cpp_only.hpp" // last include: core/ never sees postgres.h

namespace idem::jcs {

namespace {

// The longest text the tape takes. Its 32-bit offsets would cover texts up to 64 MiB
// (canonical numbers in the side buffer can be ~20x their text), and it takes up to 16 bytes
// per token; bigger texts go through the streaming tokenizer, which needs far less memory.
constexpr size_t kTapeMax = size_t(16) << 20;

} // namespace

// The tape's two passes over text (reset() has run): pass 1 into tokens, pass 2 writing out_
// (hash: feeding sha_ what is written as it goes).
void CanonicalWriter::parse_tape(std::string_view text, bool hash) {
    if (!tape_)
        tape_ = std::make_unique<detail::TapeState>();
    detail::TapeState &t = *tape_; // (cleared by reset())
    text = t.pad(text);
    detail::Reader r(text);
    detail::tape_pass1(r, t, opts_);
    char *o = out_.room(text.size() + t.side.size() + 2 * t.toks.size() + 64);
    detail::HashFeed feed;
    if (hash && text.size() >= 512) { // (smaller texts: nothing to gain, measured)
        fresh_sha();
        hashing_ = true;
        feed.sha = sha_.get();
        feed.o0 = o;
        feed.at = o + detail::HashFeed::kRun;
    }
    out_.set_end(detail::write_tape(t, text.data(), o, feed));
    hashed_ = feed.hashed;
    done_ = true;
}

// Resets and parses text through the tape (hash: feeding sha_ while writing) or the streaming
// tokenizer and the event writer.
//
// A text that is not well-formed UTF-8 cannot be read as JSON at all: whatever else is wrong
// with it, its error is 22021 naming its first invalid sequence, on every path. Both
// tokenizers check the bytes of strings as they read them, and any other byte >= 0x80 stops
// them with a grammar error; a text that fails for any reason is therefore checked whole
// before its error is raised (only then: a text that parses is UTF-8).
void CanonicalWriter::parse(std::string_view text, bool hash) {
    reset();
    try {
        if (!filtering_ && text.size() <= kTapeMax) {
            parse_tape(text, hash);
            // A text of at most 4 KiB grows no buffer near what shrink() keeps (1 MiB, 64 Ki
            // tokens): the tape takes at most a token per byte, canonical numbers up to ~5
            // bytes per byte of text (1e20: 21 digits), shape records 136 bytes per object.
            may_have_grown_ = text.size() > 4096;
            return;
        }
        detail::parse_streaming(text, *this);
    } catch (const Error &) {
        done_ = false; // (the value may be complete before the error: text after it)
        detail::check_text_utf8(text);
        throw;
    } catch (...) {
        done_ = false;
        throw;
    }
}

// Canonicalises text into w (see jcs.hpp).
void parse_into(std::string_view text, CanonicalWriter &w) {
    w.parse(text, false);
}

// Canonicalises text into w and returns its SHA-256, hashing while writing (see jcs.hpp).
Digest fingerprint_into(std::string_view text, CanonicalWriter &w) {
    // The digest is started first: its set-up (OpenSSL frees and allocates the context's
    // state) does not wait for the canonical text (bench/RESULTS.md: faster than after it).
    w.fresh_sha();
    w.sha_fresh_ = true;
    w.parse(text, true);
    return w.digest();
}

std::string canonicalize_text(std::string_view text, const Options &opts) {
    CanonicalWriter w(opts);
    parse_into(text, w);
    return std::string(w.result());
}

Digest fingerprint_text(std::string_view text, const Options &opts) {
    CanonicalWriter w(opts);
    return fingerprint_into(text, w);
}

} // namespace idem::jcs
