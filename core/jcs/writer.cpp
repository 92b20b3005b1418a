// CanonicalWriter: a stream of events (begin_object, key, string, ...) to canonical text, with
// the include/exclude filters; each object's members are put in order when it closes.
#include "internal.hpp"

#include <algorithm>
#include <stdexcept>

#include "cpp_only.hpp" // last include: core/ never sees postgres.h

namespace idem::jcs {

using detail::append_quoted;

struct CanonicalWriter::Member {
    size_t key_off;
    size_t key_len;
    size_t start; // out_ offset of the escaped name (after any comma)
    size_t end;   // out_ offset after the value
    bool kept;
    bool key_in_out; // key_off is an offset in out_ (else in keys_)
};

struct CanonicalWriter::Frame {
    bool object = false;
    bool drop = false;    // this container is removed by a filter
    bool partial = false; // include filter: only children on include paths are kept
    size_t open_pos = 0;  // out_ offset after '{' or '['
    size_t value_start = 0;
    size_t members_begin = 0;
    size_t keys_begin = 0;
    uint32_t kept = 0;
    int64_t next_index = 0;
    std::vector<uint32_t> ex, in; // exclude/include paths matched so far and longer than here
};

CanonicalWriter::CanonicalWriter(Options opts) {
    reset(std::move(opts));
}
CanonicalWriter::~CanonicalWriter() = default;

// Each path element as an array index (-1 when it is not one).
static std::vector<std::vector<int64_t>> path_indices(const std::vector<Path> &paths) {
    std::vector<std::vector<int64_t>> r;
    r.reserve(paths.size());
    for (const Path &p : paths) {
        std::vector<int64_t> v;
        v.reserve(p.size());
        for (const std::string &el : p) {
            int64_t idx = -1;
            if (!el.empty() && el.size() <= 18 &&
                std::all_of(el.begin(), el.end(), [](char c) { return c >= '0' && c <= '9'; }))
                idx = std::stoll(el);
            v.push_back(idx);
        }
        r.push_back(std::move(v));
    }
    return r;
}

void CanonicalWriter::reset(Options opts) {
    for (const Path &p : opts.exclude)
        if (p.empty())
            throw Error(sqlstate::invalid_parameter_value, "an exclude path must not be empty",
                        "Excluding the empty path would remove the whole document.");
    opts_ = std::move(opts);
    ex_idx_ = path_indices(opts_.exclude);
    in_idx_ = path_indices(opts_.include);
    reset();
}

// Frees the buffers that the last document grew past what is kept for reuse (reset() does it
// too, when the next document starts); true if it freed any (the document is then gone).
bool CanonicalWriter::shrink() noexcept {
    constexpr size_t kKeep = size_t(1) << 20; // bytes
    bool freed = tape_ && tape_->shrink();
    if (out_.capacity() > kKeep) {
        out_.release();
        freed = true;
    }
    if (scratch_.capacity() > kKeep) {
        scratch_.release();
        freed = true;
    }
    if (keys_.capacity() > kKeep) {
        std::string().swap(keys_);
        freed = true;
    }
    if (members_.capacity() * sizeof(Member) > kKeep) {
        std::vector<Member>().swap(members_);
        freed = true;
    }
    if (frames_.capacity() * sizeof(Frame) > kKeep) {
        depth_ = 0;
        std::vector<Frame>().swap(frames_);
        freed = true;
    }
    if (freed)
        done_ = false;
    return freed;
}

void CanonicalWriter::reset() {
    filtering_ = !opts_.exclude.empty() || !opts_.include.empty();
    done_ = false;
    expect_key_ = false;
    depth_ = 0;
    ticks_ = 0;
    if (may_have_grown_)
        shrink(); // (keeps the buffers' capacity for reuse, but not after a huge document)
    may_have_grown_ = true;
    out_.clear();
    scratch_.clear();
    keys_.clear();
    if (tape_)
        tape_->clear();
    hashing_ = false;
    hashed_ = 0;
    out_.room(256); // never a null data pointer
    scratch_.room(256);
    members_.clear();
}

void CanonicalWriter::misuse(const char *what) const {
    throw std::logic_error(std::string("CanonicalWriter: ") + what);
}

void CanonicalWriter::tick() {
    if (++ticks_ >= 4096) {
        ticks_ = 0;
        if (opts_.interrupted != nullptr && opts_.interrupted())
            throw Interrupted();
    }
}

// Computes the filter state (pend_*) of the child `name` (object member) or `index` (array
// element) of parent, whose children have path length depth_.
void CanonicalWriter::child_filter(const Frame &parent, std::string_view name, int64_t index) {
    pend_drop_ = parent.drop;
    pend_partial_ = false;
    if (!filtering_)
        return;
    pend_ex_.clear();
    pend_in_.clear();
    const size_t k = depth_ - 1; // path element compared at this level
    const size_t len = depth_;   // path length of the child
    // Of the paths live (indices into paths) that matched down to the parent, appends those
    // that go on below this child to next; returns whether one of them ends at the child.
    auto descend = [&](const std::vector<Path> &paths, const std::vector<std::vector<int64_t>> &idx,
                       const std::vector<uint32_t> &live, std::vector<uint32_t> &next) {
        bool ends = false;
        for (uint32_t i : live) {
            if (!(parent.object ? paths[i][k] == name : idx[i][k] == index))
                continue;
            if (paths[i].size() == len)
                ends = true;
            else
                next.push_back(i);
        }
        return ends;
    };
    if (descend(opts_.exclude, ex_idx_, parent.ex, pend_ex_))
        pend_drop_ = true;
    if (parent.partial) {
        if (descend(opts_.include, in_idx_, parent.in, pend_in_))
            pend_partial_ = false;
        else if (!pend_in_.empty())
            pend_partial_ = true;
        else
            pend_drop_ = true;
    }
}

// Called before any value: handles the root, array elements and commas.
void CanonicalWriter::before_value() {
    tick();
    if (depth_ == 0) {
        if (done_)
            misuse("a second top-level value");
        pend_drop_ = false;
        pend_partial_ = false;
        pend_start_ = 0;
        if (filtering_) {
            pend_ex_.clear();
            pend_in_.clear();
            for (uint32_t i = 0; i < opts_.exclude.size(); i++)
                pend_ex_.push_back(i);
            bool whole = false;
            for (uint32_t i = 0; i < opts_.include.size(); i++) {
                if (opts_.include[i].empty())
                    whole = true;
                else
                    pend_in_.push_back(i);
            }
            pend_partial_ = !opts_.include.empty() && !whole;
        }
        return;
    }
    Frame &f = frames_[depth_ - 1];
    if (f.object) {
        if (expect_key_)
            misuse("a value where a member name is expected");
        return; // key() has prepared the member
    }
    pend_start_ = out_.size();
    if (f.kept > 0)
        out_.push_back(',');
    child_filter(f, {}, f.next_index++);
}

// Records that the current child value (written from out_ offset start) is complete.
void CanonicalWriter::child_done(bool kept, size_t start) {
    if (depth_ == 0) {
        done_ = true;
        return;
    }
    Frame &f = frames_[depth_ - 1];
    if (kept)
        f.kept++;
    else
        out_.resize_down(start);
    if (f.object) {
        Member &m = members_.back();
        m.kept = kept;
        m.end = out_.size();
        expect_key_ = true;
    }
}

void CanonicalWriter::push_frame(bool object) {
    if (depth_ >= opts_.max_depth)
        detail::too_deep(opts_.max_depth);
    if (frames_.size() == depth_)
        frames_.emplace_back();
    Frame &f = frames_[depth_];
    f.object = object;
    f.drop = pend_drop_;
    f.partial = pend_partial_;
    f.value_start = pend_start_;
    out_.push_back(object ? '{' : '[');
    f.open_pos = out_.size();
    f.members_begin = members_.size();
    f.keys_begin = keys_.size();
    f.kept = 0;
    f.next_index = 0;
    if (filtering_) {
        f.ex.swap(pend_ex_);
        f.in.swap(pend_in_);
    }
    depth_++;
    expect_key_ = object;
}

void CanonicalWriter::begin_object() {
    before_value();
    push_frame(true);
}

void CanonicalWriter::begin_array() {
    before_value();
    push_frame(false);
}

void CanonicalWriter::key(std::string_view name) {
    tick();
    if (depth_ == 0 || !frames_[depth_ - 1].object || !expect_key_)
        misuse("a member name outside an object");
    if (validate_utf8_)
        detail::check_utf8(name);
    Frame &f = frames_[depth_ - 1];
    pend_start_ = out_.size();
    if (f.kept > 0)
        out_.push_back(',');
    const size_t start = out_.size();
    const size_t quoted = append_quoted(out_, name);
    // Filled in place (a Member built on the stack and copied stalls on store forwarding).
    Member &m = members_.emplace_back();
    m.key_len = name.size();
    m.start = start;
    m.end = 0;
    m.kept = false;
    if (!filtering_ && quoted == name.size() + 2) {
        // Nothing was escaped: the name stays readable in out_ until end_object (only filters
        // cut bytes out of out_ before then).
        m.key_off = start + 1;
        m.key_in_out = true;
    } else {
        m.key_off = keys_.size();
        m.key_in_out = false;
        keys_.append(name.data(), name.size());
    }
    out_.push_back(':');
    child_filter(f, name, -1);
    expect_key_ = false;
}

// Puts the members of the object f (just written to out_) in order; 22P02 for duplicates.
void CanonicalWriter::order_members(const Frame &f) {
    Member *mb = members_.data() + f.members_begin;
    Member *me = members_.data() + members_.size();
    const char *kb = keys_.data();
    const char *ob = out_.data();
    auto name = [kb, ob](const Member &m) {
        return std::string_view((m.key_in_out ? ob : kb) + m.key_off, m.key_len);
    };
    bool ordered = true;
    for (Member *m = mb + 1; m < me; m++) {
        if (compare_utf16(name(m[-1]), name(*m)) >= 0) {
            ordered = false;
            break;
        }
    }
    if (ordered)
        return;
    std::sort(mb, me, [&](const Member &a, const Member &b) {
        return compare_utf16(name(a), name(b)) < 0;
    });
    for (Member *m = mb + 1; m < me; m++)
        if (name(m[-1]) == name(*m))
            detail::duplicate_name(name(*m));
    // Reordering copies the object once; nested unordered objects are copied once per level,
    // so poll the interrupt callback for big ones.
    if (out_.size() - f.open_pos > 65536 && opts_.interrupted != nullptr && opts_.interrupted())
        throw Interrupted();
    scratch_.clear();
    scratch_.append(out_.data() + f.open_pos, out_.size() - f.open_pos);
    out_.resize_down(f.open_pos);
    bool first = true;
    for (Member *m = mb; m < me; m++) {
        if (!m->kept)
            continue;
        if (!first)
            out_.push_back(',');
        first = false;
        out_.append(scratch_.data() + (m->start - f.open_pos), m->end - m->start);
    }
}

void CanonicalWriter::end_object() {
    tick();
    if (depth_ == 0 || !frames_[depth_ - 1].object || !expect_key_)
        misuse("end_object without a matching begin_object");
    Frame &f = frames_[depth_ - 1];
    if (members_.size() - f.members_begin > 1) // (0 or 1 members: nothing to order or compare)
        order_members(f);
    out_.push_back('}');
    members_.resize(f.members_begin);
    keys_.resize(f.keys_begin);
    bool kept = !f.drop && !(f.partial && f.kept == 0);
    size_t start = f.value_start;
    depth_--;
    expect_key_ = false;
    child_done(kept || depth_ == 0, start);
}

void CanonicalWriter::end_array() {
    tick();
    if (depth_ == 0 || frames_[depth_ - 1].object)
        misuse("end_array without a matching begin_array");
    Frame &f = frames_[depth_ - 1];
    out_.push_back(']');
    bool kept = !f.drop && !(f.partial && f.kept == 0);
    size_t start = f.value_start;
    depth_--;
    expect_key_ = false;
    child_done(kept || depth_ == 0, start);
}

// Scalars are kept unless a filter drops them; a scalar on an include path that continues
// deeper does not hold what the path names, so it is dropped (the root is always kept).
#define IDEM_SCALAR(write)                                                                         \
    do {                                                                                           \
        before_value();                                                                            \
        size_t start_ = pend_start_;                                                               \
        bool kept_ = depth_ == 0 || (!pend_drop_ && !pend_partial_);                               \
        write;                                                                                     \
        child_done(kept_, start_);                                                                 \
    } while (0)

void CanonicalWriter::string(std::string_view value) {
    if (validate_utf8_)
        detail::check_utf8(value);
    IDEM_SCALAR(append_quoted(out_, value));
}

void CanonicalWriter::number(std::string_view text) {
    IDEM_SCALAR(out_.set_end(
        write_number(text, opts_.exact_numbers, out_.room(number_bound(text.size())))));
}

void CanonicalWriter::boolean(bool value) {
    IDEM_SCALAR(value ? out_.append("true", 4) : out_.append("false", 5));
}

void CanonicalWriter::null() {
    IDEM_SCALAR(out_.append("null", 4));
}

#undef IDEM_SCALAR

std::string_view CanonicalWriter::result() const {
    if (!done_)
        misuse("result() before the document is complete");
    return out_.view();
}

// Makes sha_ ready for a new digest (no reset if it has been fed nothing since its last one).
void CanonicalWriter::fresh_sha() {
    if (!sha_)
        sha_ = std::make_unique<Sha256>();
    else if (!sha_fresh_)
        sha_->reset();
    sha_fresh_ = false;
}

// SHA-256 of the result, continuing a digest fingerprint_into started (one reused context).
Digest CanonicalWriter::digest() {
    std::string_view r = result();
    if (!hashing_) {
        fresh_sha();
        hashed_ = 0;
    }
    hashing_ = false;
    sha_->update(r.data() + hashed_, r.size() - hashed_);
    return sha_->finish();
}

} // namespace idem::jcs
