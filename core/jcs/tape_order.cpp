// The tape's objects (pass 1, at each '}'): the member names sorted by UTF-16 code units
// (22P02 for duplicates), and the shape of small objects remembered so that the next object
// with the same names in the same sequence (arrays of objects of one shape) needs no sort.
#include "internal.hpp"

#include <algorithm>

#include "cpp_only.hpp" // last include: core/ never sees postgres.h

namespace idem::jcs::detail {

namespace {

using Name = TapeState::Name;

// The unescaped name of a member (see TapeState::names).
std::string_view member_name(const TapeState &t, const unsigned char *text, uint64_t ref) {
    uint32_t hi = static_cast<uint32_t>(ref >> 32);
    if (hi == 0) {
        const Tok &k = t.toks.b_[static_cast<uint32_t>(ref)];
        return std::string_view(reinterpret_cast<const char *>(text) + k.off + 1, k.len - 2);
    }
    uint32_t len;
    std::memcpy(&len, t.side.data() + hi, 4);
    return std::string_view(t.side.data() + hi + 4, len);
}

// Compares two member names whose keys are equal (a full comparison).
IDEM_NOINLINE int tied_compare(const TapeState &t, const unsigned char *text, uint64_t ra,
                               uint64_t rb) {
    return compare_utf16(member_name(t, text, ra), member_name(t, text, rb));
}

// 22P02 for the first of two adjacent equal names in the sorted names nb[perm[i]] (perm: null
// for nb[i]). Equal names end up adjacent, so the error names the first duplicate in sorted
// order, as the streaming writer does.
void check_duplicates(const TapeState &t, const unsigned char *text, const Name *nb,
                      const uint8_t *perm, size_t n) {
    for (size_t i = 1; i < n; i++) {
        const Name &a = nb[perm ? perm[i - 1] : i - 1], &b = nb[perm ? perm[i] : i];
        if (a.key != b.key)
            continue;
        const std::string_view name = member_name(t, text, b.ref);
        if (member_name(t, text, a.ref) == name)
            duplicate_name(name);
    }
}

// Insertion sort of the member indices of nb[0..n) (n <= kShapeMax) into perm by key; equal
// keys (rare: long common prefixes, duplicates) are ordered by tied_compare. (The keys are
// sorted beside the indices: no indirect loads.) Returns whether any keys were equal.
bool sort_indices(const TapeState &t, const unsigned char *text, const Name *nb, size_t n,
                  uint8_t *perm) {
    bool ties = false, duplicates = false;
    uint64_t ks[TapeState::kShapeMax];
    ks[0] = nb[0].key;
    perm[0] = 0;
    for (size_t i = 1; i < n; i++) {
        const uint64_t key = nb[i].key;
        size_t j = i;
        while (j > 0) {
            const uint64_t pk = ks[j - 1];
            if (pk < key)
                break;
            if (pk == key) {
                ties = true;
                const int c = tied_compare(t, text, nb[perm[j - 1]].ref, nb[i].ref);
                duplicates |= c == 0;
                if (c <= 0)
                    break;
            }
            ks[j] = pk;
            perm[j] = perm[j - 1];
            j--;
        }
        ks[j] = key;
        perm[j] = static_cast<uint8_t>(i);
    }
    if (duplicates)
        check_duplicates(t, text, nb, perm, n);
    return ties;
}

// Remembers the shape of the object just sorted (distinct keys nb[0..n), order perm): its keys
// and order and, for an array element, each member's name and what followed it up to its value
// as pass 1 read them (the chunks TapeLexer::shape compares).
void remember_shape(TapeState &t, const unsigned char *text, const Name *nb, size_t n,
                    const uint8_t *perm, bool in_array) {
    for (size_t i = 0; i < n; i++)
        t.shape_keys[i] = nb[i].key;
    if (in_array) { // (objects in arrays often repeat their names)
        for (size_t i = 0; i < n; i++) {
            const Tok &nk = t.toks.b_[static_cast<uint32_t>(nb[i].ref)];
            t.shape_clen[i] = 0;
            if ((nb[i].ref >> 32) != 0 || nk.kind != TapeState::InText)
                continue;
            // The name and what followed it up to its value, as key passed them.
            const unsigned char *const q = text + nk.off;
            const unsigned char *v = q + nk.len;
            if (*v != ':')
                while (json_ws(*v))
                    v++;
            v++;
            if (*v == ' ')
                v++;
            if (v - q <= 16) {
                std::memcpy(t.shape_chunk[i], q, 16); // (padded text)
                t.shape_clen[i] = static_cast<uint8_t>(v - q);
                t.shape_nlen[i] = static_cast<uint8_t>(nk.len);
            }
        }
        t.chunk_n = n;
    }
    std::memcpy(t.shape_order, perm, TapeState::kShapeMax);
    t.shape_n = n;
}

// The order perm of a small object's members nb[0..n) (2 <= n <= kShapeMax): the remembered
// one when its keys are the remembered shape's, else sorted (and remembered).
void small_order(TapeState &t, const unsigned char *text, const Name *nb, size_t n, bool in_array,
                 uint8_t *perm) {
    bool same = n == t.shape_n;
    for (size_t i = 0; i < n && same; i++)
        same = nb[i].key == t.shape_keys[i];
    if (same) {
        std::memcpy(perm, t.shape_order, TapeState::kShapeMax); // (a fixed size: no call)
        return;
    }
    const bool ties = sort_indices(t, text, nb, n, perm);
    t.shape_n = 0;
    t.chunk_n = 0;
    t.rec = TapeState::kNotObject;
    if (!ties) // (distinct keys: the order depends on them alone)
        remember_shape(t, text, nb, n, perm, in_array);
}

// Sorts nb[0..n) in place by key, equal keys by tied_compare (insertion sort up to 32 names).
void sort_names(const TapeState &t, const unsigned char *text, Name *nb, size_t n) {
    if (n > 32) {
        std::sort(nb, nb + n, [&](const Name &x, const Name &y) {
            if (x.key != y.key)
                return x.key < y.key;
            return compare_utf16(member_name(t, text, x.ref), member_name(t, text, y.ref)) < 0;
        });
        check_duplicates(t, text, nb, nullptr, n);
        return;
    }
    bool duplicates = false;
    for (size_t i = 1; i < n; i++) {
        const uint64_t key = nb[i].key, ref = nb[i].ref;
        size_t j = i;
        while (j > 0) {
            const uint64_t pk = nb[j - 1].key;
            if (pk < key)
                break;
            if (pk == key) {
                const int c = tied_compare(t, text, nb[j - 1].ref, ref);
                duplicates |= c == 0;
                if (c <= 0)
                    break;
            }
            nb[j].key = pk;
            nb[j].ref = nb[j - 1].ref;
            j--;
        }
        nb[j].key = key;
        nb[j].ref = ref;
    }
    if (duplicates)
        check_duplicates(t, text, nb, nullptr, n);
}

} // namespace

void close_object(TapeState &t, const unsigned char *text, uint32_t ot, uint32_t first,
                  uint32_t end, bool in_array) {
    Name *const nb = t.names.b_ + first;
    const size_t n = static_cast<size_t>(t.names.e_ - nb);
    Tok &k = t.toks.b_[ot];
    k.off = static_cast<uint32_t>(t.order.size());
    k.len = static_cast<uint32_t>(n);
    k.end = end;
    uint32_t *ord = t.order.e_; // (room: see tape_room)
    if (n >= 2 && n <= TapeState::kShapeMax) {
        uint8_t perm[TapeState::kShapeMax] = {};
        small_order(t, text, nb, n, in_array, perm);
        for (size_t i = 0; i < n; i++)
            ord[i] = static_cast<uint32_t>(nb[perm[i]].ref);
    } else {
        sort_names(t, text, nb, n);
        for (size_t i = 0; i < n; i++)
            ord[i] = static_cast<uint32_t>(nb[i].ref);
    }
    t.order.e_ = ord + n;
    t.names.e_ = nb;
}

} // namespace idem::jcs::detail
