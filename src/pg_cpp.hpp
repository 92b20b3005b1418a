// The boundary between C++ and PostgreSQL.
//
// Rules (see docs/internals.md, "The C++ / PostgreSQL boundary"):
//  * Every SQL-callable function is defined with IDEM_PG_FUNCTION, which catches any C++
//    exception and raises the PostgreSQL error only after the catch block has been left, and
//    checks that the body left PostgreSQL's error stacks (PG_exception_stack, the innermost
//    PG_TRY, and error_context_stack) as it found them.
//  * Every call into the core (core/) runs inside run_cpp or call_cpp, or, when it cannot
//    throw, inside IDEM_NOTHROW, which the compiler checks (noexcept). test/boundary-lint fails
//    on a core call in src/ that is outside all three.
//  * Inside a function body, PostgreSQL calls that can ereport(ERROR) (SPI, palloc, fmgr) run
//    only while no C++ object with a destructor is alive in that frame or any frame between it
//    and the entry point. Core work that builds std::string etc. runs inside run_cpp's function
//    and leaves plain data behind (call_cpp insists on a trivially destructible result;
//    copy_bytea copies bytes into a bytea) before control returns to PostgreSQL calls.
#pragma once

extern "C" {
#include "postgres.h"

// The varlena macros (VARDATA, SET_VARSIZE, ...; copy_bytea) are in varatt.h from PostgreSQL 16
// on, which 18's postgres.h no longer includes; 15 has no varatt.h.
#if __has_include("varatt.h")
#include "varatt.h"
#endif
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
}

#include "error.hpp"

#include <cstring>
#include <exception>
#include <new>
#include <type_traits>

namespace idem::pg {

namespace detail {
template <bool CannotThrow> constexpr void require_noexcept() noexcept {
    static_assert(CannotThrow, "IDEM_NOTHROW: this call can throw; run it with call_cpp");
}
} // namespace detail

} // namespace idem::pg

// Evaluates a core call that the compiler proves cannot throw (noexcept), without run_cpp; the
// expression must not call PostgreSQL either (its functions are not noexcept).
#define IDEM_NOTHROW(...)                                                                          \
    (::idem::pg::detail::require_noexcept<noexcept(__VA_ARGS__)>(), (__VA_ARGS__))

namespace idem::pg {

// The state handed from the catch block to the ereport that follows it. Only the first byte of
// each text is set here: every boundary crossing makes one (invoke, each call_cpp), and zeroing
// the 1.5 kB on each was about 1,000 instructions of a replay. The texts are written
// with copy_text, which terminates them.
struct PendingError {
    int sqlerrcode;
    bool interrupted;
    char message[512];
    char detail[512];
    char hint[512];

    PendingError() noexcept : sqlerrcode(0), interrupted(false) {
        message[0] = detail[0] = hint[0] = '\0';
    }
};

inline void copy_text(char *dst, size_t cap, const char *src) {
    size_t n = std::strlen(src);
    if (n >= cap)
        n = cap - 1;
    std::memcpy(dst, src, n);
    dst[n] = '\0';
}

inline void append_text(char *dst, size_t cap, const char *src) {
    size_t used = std::strlen(dst);
    copy_text(dst + used, cap - used, src);
}

// Turns a five-character SQLSTATE into PostgreSQL's packed code.
inline int sqlstate_code(const char *s) {
    return MAKE_SQLSTATE(s[0], s[1], s[2], s[3], s[4]);
}

// Records the exception currently being handled into pe (called only inside a catch block).
inline void capture_current_exception(PendingError &pe) noexcept {
    try {
        throw;
    } catch (const idem::Error &e) {
        pe.sqlerrcode = sqlstate_code(IDEM_NOTHROW(e.sqlstate()));
        copy_text(pe.message, sizeof pe.message, IDEM_NOTHROW(e.what()));
        copy_text(pe.detail, sizeof pe.detail, IDEM_NOTHROW(e.detail().c_str()));
        copy_text(pe.hint, sizeof pe.hint, IDEM_NOTHROW(e.hint().c_str()));
    } catch (const idem::Interrupted &) {
        pe.interrupted = true;
        pe.sqlerrcode = ERRCODE_QUERY_CANCELED;
        copy_text(pe.message, sizeof pe.message, "canceling statement due to user request");
    } catch (const std::bad_alloc &) {
        pe.sqlerrcode = ERRCODE_OUT_OF_MEMORY;
        copy_text(pe.message, sizeof pe.message, "out of memory");
    } catch (const std::exception &e) {
        pe.sqlerrcode = ERRCODE_INTERNAL_ERROR;
        copy_text(pe.message, sizeof pe.message, IDEM_NOTHROW(e.what()));
    } catch (...) {
        pe.sqlerrcode = ERRCODE_INTERNAL_ERROR;
        copy_text(pe.message, sizeof pe.message, "unknown C++ exception");
    }
}

// PostgreSQL's error-handling stacks: the jump buffer of the innermost PG_TRY and the error
// context callbacks. PG_TRY / PG_END_TRY and a callback's push / pop restore them; a C++
// exception (or a return) that leaves such a block skips that, and the next ereport(ERROR)
// would jump into a frame that no longer exists (pg_duckdb checks the same in InvokeCPPFunc).
struct ErrorStacks {
    sigjmp_buf *exception_stack;
    ErrorContextCallback *context_stack;
};

inline ErrorStacks error_stacks() noexcept {
    return {PG_exception_stack, error_context_stack};
}

// True when the stacks are as saved. Otherwise restores them and replaces pe by an internal
// error that names where it happened (the original error, if any, becomes its detail).
inline bool stacks_intact(const ErrorStacks &saved, PendingError &pe, const char *where) noexcept {
    if (PG_exception_stack == saved.exception_stack && error_context_stack == saved.context_stack)
        return true;
    const char *which = PG_exception_stack != saved.exception_stack
                            ? (error_context_stack != saved.context_stack
                                   ? "PG_exception_stack and error_context_stack"
                                   : "PG_exception_stack")
                            : "error_context_stack";
    PG_exception_stack = saved.exception_stack;
    error_context_stack = saved.context_stack;
    // the C++ error, if there was one, becomes the detail (only the texts' written bytes are
    // read: the rest of each buffer is left unset)
    if (pe.sqlerrcode != 0)
        copy_text(pe.detail, sizeof pe.detail, pe.message);
    else
        pe.detail[0] = '\0';
    pe.hint[0] = '\0';
    pe.interrupted = false;
    pe.sqlerrcode = ERRCODE_INTERNAL_ERROR;
    copy_text(pe.message, sizeof pe.message, where);
    append_text(pe.message, sizeof pe.message, " left ");
    append_text(pe.message, sizeof pe.message, which);
    append_text(pe.message, sizeof pe.message,
                " changed: a C++ exception or return skipped the end of a PG_TRY block or the "
                "pop of an error context callback");
    return false;
}

// Raises the recorded error; called after the catch block is left.
[[noreturn]] inline void raise(const PendingError &pe) {
    if (pe.interrupted) {
        CHECK_FOR_INTERRUPTS(); // raises the real cancel / statement_timeout error
    }
    ereport(ERROR, (errcode(pe.sqlerrcode), errmsg_internal("%s", pe.message),
                    pe.detail[0] ? errdetail_internal("%s", pe.detail) : 0,
                    pe.hint[0] ? errhint("%s", pe.hint) : 0));
    pg_unreachable();
}

// Calls fn() from a callback PostgreSQL makes into the extension (an fmgr entry point, a custom
// scan's or a planner hook's method): a C++ exception becomes a PostgreSQL error (pg_duckdb's
// InvokeCPPFunc pattern), and a body that leaves the error stacks changed raises an internal
// error after restoring them. PostgreSQL errors raised inside fn propagate by longjmp as usual.
// fn returns plain data (or nothing).
template <typename F> auto guard(const char *name, F &&fn) -> decltype(fn()) {
    const ErrorStacks entry = error_stacks();
    PendingError pe;
    try {
        if constexpr (std::is_void_v<decltype(fn())>) {
            fn();
            if (stacks_intact(entry, pe, name))
                return;
        } else {
            auto result = fn();
            if (stacks_intact(entry, pe, name))
                return result;
        }
    } catch (...) {
        capture_current_exception(pe);
        stacks_intact(entry, pe, name);
    }
    raise(pe);
}

// The guard of an SQL-callable function's body impl(fcinfo) (IDEM_PG_FUNCTION).
template <Datum (*Impl)(FunctionCallInfo)> Datum invoke(FunctionCallInfo fcinfo, const char *name) {
    return guard(name, [fcinfo] { return Impl(fcinfo); });
}

// Runs fn() (C++ code that may throw and may own objects with destructors, but calls no
// PostgreSQL function) and returns true, or records the exception in pe and returns false. Use
// it to run core work from a function body; call raise(pe) afterwards, outside any C++ scope.
template <typename F> bool run_cpp(PendingError &pe, F &&fn) noexcept {
    const ErrorStacks entry = error_stacks();
    try {
        fn();
    } catch (...) {
        capture_current_exception(pe);
        stacks_intact(entry, pe, "core work in run_cpp");
        return false;
    }
    return stacks_intact(entry, pe, "core work in run_cpp");
}

// Runs fn() through run_cpp and returns its result, or raises its error. The result and fn
// must be plain data (trivially destructible): they are still in this frame when the error
// is raised.
template <typename F> auto call_cpp(F &&fn) {
    using Result = decltype(fn());
    static_assert(std::is_trivially_destructible_v<std::remove_reference_t<F>>,
                  "call_cpp: capture by reference");
    PendingError pe;
    if constexpr (std::is_void_v<Result>) {
        if (!run_cpp(pe, fn))
            raise(pe);
    } else {
        static_assert(std::is_trivially_destructible_v<Result>,
                      "call_cpp returns plain data only; copy anything else inside run_cpp");
        Result r{};
        if (!run_cpp(pe, [&] { r = fn(); }))
            raise(pe);
        return r;
    }
}

// A new bytea holding a copy of len bytes (a core result such as a digest).
inline bytea *copy_bytea(const void *data, size_t len) {
    bytea *r = static_cast<bytea *>(palloc(VARHDRSZ + len));
    SET_VARSIZE(r, VARHDRSZ + len);
    std::memcpy(VARDATA(r), data, len);
    return r;
}

// True when a query cancel or termination is pending: core loops poll this and throw
// idem::Interrupted so that the error is raised by CHECK_FOR_INTERRUPTS() outside C++ frames.
inline bool interrupt_pending() noexcept {
    return InterruptPending;
}

} // namespace idem::pg

// Defines the SQL-callable C function `name` whose body follows, wrapped in idem::pg::invoke.
#define IDEM_PG_FUNCTION(name)                                                                     \
    static Datum name##_impl(PG_FUNCTION_ARGS);                                                    \
    extern "C" {                                                                                   \
    PG_FUNCTION_INFO_V1(name);                                                                     \
    Datum name(PG_FUNCTION_ARGS) {                                                                 \
        return idem::pg::invoke<name##_impl>(fcinfo, #name);                                       \
    }                                                                                              \
    }                                                                                              \
    static Datum name##_impl(PG_FUNCTION_ARGS)
