// JSON numbers in their canonical form: ECMAScript Number::toString of the double (RFC 8785
// §3.2.2.3, strict mode), or the exact decimal in ECMAScript's layout (exact mode).
#include "internal.hpp"

#include <charconv>
#include <system_error>

#include "cpp_only.hpp" // last include: core/ never sees postgres.h

namespace idem::jcs {

namespace {

using detail::kMalformed;

// The parts of a JSON number in RFC 8259 syntax.
struct NumberParts {
    bool negative = false;
    std::string_view int_digits; // no leading zeros except a lone "0"
    std::string_view frac_digits;
    bool has_exp = false;
    bool exp_negative = false;
    std::string_view exp_digits;
};

[[noreturn]] void bad_number(std::string_view text) {
    std::string shown(text.substr(0, 64));
    throw Error(kMalformed, "invalid JSON number",
                "The text \"" + shown + "\" is not a JSON number.",
                "JSON numbers look like -12.5e3; NaN and Infinity are not JSON.");
}

NumberParts split_number(std::string_view t) {
    NumberParts n;
    size_t i = 0, len = t.size();
    auto digit = [&](size_t k) { return k < len && t[k] >= '0' && t[k] <= '9'; };
    // The digits from i on (at least one; a leading '0' stands alone when lone_zero).
    auto digits = [&](bool lone_zero) {
        const size_t s = i;
        if (!digit(i))
            bad_number(t);
        if (lone_zero && t[i] == '0')
            i++;
        else
            while (digit(i))
                i++;
        return t.substr(s, i - s);
    };
    if (i < len && t[i] == '-') {
        n.negative = true;
        i++;
    }
    n.int_digits = digits(true);
    if (i < len && t[i] == '.') {
        i++;
        n.frac_digits = digits(false);
    }
    if (i < len && (t[i] == 'e' || t[i] == 'E')) {
        n.has_exp = true;
        i++;
        if (i < len && (t[i] == '+' || t[i] == '-')) {
            n.exp_negative = t[i] == '-';
            i++;
        }
        n.exp_digits = digits(false);
    }
    if (i != len)
        bad_number(t);
    return n;
}

// Exponent digits as a number, saturating at 10^15 (far beyond any meaningful exponent).
int64_t exp_value(const NumberParts &n) {
    int64_t e = 0;
    for (char c : n.exp_digits) {
        e = e * 10 + (c - '0');
        if (e > 1000000000000000LL) {
            e = 1000000000000000LL;
            break;
        }
    }
    return n.exp_negative ? -e : e;
}

// ECMAScript Number::toString layout for significant digits d (k digits, no leading or
// trailing zeros) whose decimal point sits n digits from the left: value = 0.d * 10^n. Writes
// at o (room for k + 40 bytes when -10^13 < n < 10^13) and returns the end.
char *layout(char *o, bool negative, const char *d, size_t k, int64_t n) noexcept {
    if (negative)
        *o++ = '-';
    int64_t kk = static_cast<int64_t>(k);
    if (kk <= n && n <= 21) {
        std::memcpy(o, d, k);
        o += k;
        std::memset(o, '0', static_cast<size_t>(n - kk));
        o += n - kk;
    } else if (0 < n && n <= 21) {
        std::memcpy(o, d, static_cast<size_t>(n));
        o += n;
        *o++ = '.';
        std::memcpy(o, d + n, k - static_cast<size_t>(n));
        o += k - static_cast<size_t>(n);
    } else if (-6 < n && n <= 0) {
        *o++ = '0';
        *o++ = '.';
        std::memset(o, '0', static_cast<size_t>(-n));
        o += -n;
        std::memcpy(o, d, k);
        o += k;
    } else {
        *o++ = d[0];
        if (k > 1) {
            *o++ = '.';
            std::memcpy(o, d + 1, k - 1);
            o += k - 1;
        }
        int64_t e = n - 1;
        *o++ = 'e';
        *o++ = e < 0 ? '-' : '+';
        o = std::to_chars(o, o + 24, e < 0 ? -e : e).ptr;
    }
    return o;
}

// The significant digits of n (int_digits ++ frac_digits without leading and trailing zeros),
// as a range of the two parts, and the decimal point position relative to their start.
struct Significant {
    size_t count = 0; // 0 for a zero value
    int64_t point = 0;
};

Significant significant(const NumberParts &n) {
    std::string_view a = n.int_digits, b = n.frac_digits;
    size_t total = a.size() + b.size();
    auto at = [&](size_t i) { return i < a.size() ? a[i] : b[i - a.size()]; };
    size_t z = 0;
    while (z < total && at(z) == '0')
        z++;
    Significant r;
    if (z == total)
        return r;
    size_t e = total;
    while (at(e - 1) == '0')
        e--;
    r.count = e - z;
    r.point = static_cast<int64_t>(a.size()) + exp_value(n) - static_cast<int64_t>(z);
    return r;
}

// Copies the significant digits of n into d (which holds sig.count bytes).
void copy_significant(const NumberParts &n, char *d) {
    std::string_view a = n.int_digits, b = n.frac_digits;
    size_t total = a.size() + b.size(), k = 0;
    bool started = false;
    for (size_t i = 0; i < total; i++) {
        char c = i < a.size() ? a[i] : b[i - a.size()];
        if (c != '0')
            started = true;
        if (started)
            d[k++] = c;
    }
    while (k > 0 && d[k - 1] == '0')
        k--;
}

// ES layout of the exact decimal value: every significant digit kept.
char *format_significant(const NumberParts &n, const Significant &sig, char *o) {
    if (sig.count == 0) {
        *o++ = '0'; // 0, -0, 0.000e5 ...
        return o;
    }
    if (sig.point > 1000000000000LL || sig.point < -1000000000000LL)
        throw Error(sqlstate::numeric_value_out_of_range, "JSON number exponent out of range",
                    "Exponents beyond 10^12 are not supported.");
    char small[64];
    std::string big;
    char *d = small;
    if (n.int_digits.size() + n.frac_digits.size() > sizeof small) {
        big.resize(n.int_digits.size() + n.frac_digits.size());
        d = &big[0];
    }
    copy_significant(n, d);
    return layout(o, n.negative, d, sig.count, sig.point);
}

// Exact-mode canonical number: every significant digit kept, ES layout.
char *format_exact(const NumberParts &n, char *o) {
    return format_significant(n, significant(n), o);
}

char *format_strict(std::string_view text, const NumberParts &n, char *o) {
    // Integers of up to 15 digits are exact doubles that ECMAScript prints unchanged.
    if (n.frac_digits.empty() && !n.has_exp && n.int_digits.size() <= 15) {
        if (n.int_digits.size() == 1 && n.int_digits[0] == '0') {
            *o++ = '0'; // also -0
            return o;
        }
        std::memcpy(o, text.data(), text.size());
        return o + text.size();
    }
    // Fast path: a decimal with at most 15 significant digits in the normal double range. Two
    // such decimals never round to the same double (10^15 < 2^53), so the shortest decimal
    // that round-trips, which ECMAScript prints, is the decimal itself without its trailing
    // zeros: no binary conversion needed. (Subnormals have less precision: excluded.)
    Significant sig = significant(n);
    if (sig.count == 0) {
        *o++ = '0';
        return o;
    }
    if (sig.count <= 15 && sig.point - 1 >= -307 && sig.point - 1 <= 307)
        return format_significant(n, sig, o);
    double v = 0;
    auto r = std::from_chars(text.data(), text.data() + text.size(), v);
    if (r.ec == std::errc::result_out_of_range) {
        if (sig.point - 1 < 0) {
            *o++ = '0'; // underflows to (-)0 as in ECMAScript
            return o;
        }
        std::string shown(text.substr(0, 64));
        throw Error(sqlstate::numeric_value_out_of_range,
                    "JSON number is out of range for RFC 8785",
                    "The number " + shown + " exceeds the largest IEEE-754 double.",
                    "Use exact_numbers => true to fingerprint it exactly.");
    }
    if (r.ec != std::errc() || r.ptr != text.data() + text.size())
        bad_number(text);
    return write_double(v, o);
}

} // namespace

char *write_double(double v, char *o) {
    if (v == 0) {
        *o++ = '0';
        return o;
    }
    if (!(v - v == 0))
        throw Error(sqlstate::numeric_value_out_of_range, "NaN and Infinity are not JSON numbers");
    bool neg = v < 0;
    if (neg)
        v = -v;
    char buf[40];
    auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
    // buf = d[.ddd]e(+|-)xx
    char digits[24];
    size_t k = 0;
    const char *p = buf;
    digits[k++] = *p++;
    if (*p == '.') {
        p++;
        while (*p != 'e')
            digits[k++] = *p++;
    }
    p++; // 'e'
    bool eneg = *p == '-';
    p++;
    int e = 0;
    while (p < r.ptr)
        e = e * 10 + (*p++ - '0');
    if (eneg)
        e = -e;
    return layout(o, neg, digits, k, static_cast<int64_t>(e) + 1);
}

void format_double(double v, std::string &out) {
    char buf[64];
    char *e = write_double(v, buf);
    out.append(buf, static_cast<size_t>(e - buf));
}

char *write_number(std::string_view text, bool exact, char *out) {
    NumberParts n = split_number(text);
    return exact ? format_exact(n, out) : format_strict(text, n, out);
}

void format_number(std::string_view text, bool exact, std::string &out) {
    size_t old = out.size();
    out.resize(old + number_bound(text.size()));
    char *e = write_number(text, exact, &out[old]);
    out.resize(static_cast<size_t>(e - out.data()));
}

char *write_decimal(char *out, bool negative, const char *digits, size_t k,
                    int64_t point) noexcept {
    return layout(out, negative, digits, k, point);
}

} // namespace idem::jcs
