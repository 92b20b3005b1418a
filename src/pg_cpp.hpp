// The boundary between C++ and PostgreSQL.
//
// Rules (see DEVELOPERS.md, "The C++ / PostgreSQL boundary"):
//  * Every SQL-callable function is defined with IDEM_PG_FUNCTION, which catches any C++
//    exception and raises the PostgreSQL error only after the catch block has been left.
//  * Inside a function body, PostgreSQL calls that can ereport(ERROR) (SPI, palloc, fmgr) run
//    only while no C++ object with a destructor is alive in that frame or any frame between it
//    and the entry point. Core work that builds std::string etc. runs in a separate function
//    that returns plain data (see copy_out / the core's C++ API) before control returns to
//    PostgreSQL calls.
#pragma once

extern "C" {
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
}

#include "error.hpp"

#include <cstring>
#include <exception>
#include <new>

namespace idem::pg {

// The state handed from the catch block to the ereport that follows it.
struct PendingError {
    int sqlerrcode = 0;
    bool interrupted = false;
    char message[512] = {0};
    char detail[512] = {0};
    char hint[512] = {0};
};

inline void copy_text(char *dst, size_t cap, const char *src) {
    size_t n = std::strlen(src);
    if (n >= cap)
        n = cap - 1;
    std::memcpy(dst, src, n);
    dst[n] = '\0';
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
        pe.sqlerrcode = sqlstate_code(e.sqlstate());
        copy_text(pe.message, sizeof pe.message, e.what());
        copy_text(pe.detail, sizeof pe.detail, e.detail().c_str());
        copy_text(pe.hint, sizeof pe.hint, e.hint().c_str());
    } catch (const idem::Interrupted &) {
        pe.interrupted = true;
        pe.sqlerrcode = ERRCODE_QUERY_CANCELED;
        copy_text(pe.message, sizeof pe.message, "canceling statement due to user request");
    } catch (const std::bad_alloc &) {
        pe.sqlerrcode = ERRCODE_OUT_OF_MEMORY;
        copy_text(pe.message, sizeof pe.message, "out of memory");
    } catch (const std::exception &e) {
        pe.sqlerrcode = ERRCODE_INTERNAL_ERROR;
        copy_text(pe.message, sizeof pe.message, e.what());
    } catch (...) {
        pe.sqlerrcode = ERRCODE_INTERNAL_ERROR;
        copy_text(pe.message, sizeof pe.message, "unknown C++ exception");
    }
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

// Calls impl(fcinfo); a C++ exception becomes a PostgreSQL error (pg_duckdb's InvokeCPPFunc
// pattern). PostgreSQL errors raised inside impl propagate by longjmp as usual.
template <Datum (*Impl)(FunctionCallInfo)> Datum invoke(FunctionCallInfo fcinfo) {
    PendingError pe;
    try {
        return Impl(fcinfo);
    } catch (...) {
        capture_current_exception(pe);
    }
    raise(pe);
}

// Runs fn() (C++ code that may throw and may own objects with destructors) and returns
// normally, or records the exception in pe and returns false. Use it to run core work from a
// function body; call raise(pe) afterwards, outside any C++ scope.
template <typename F> bool run_cpp(PendingError &pe, F &&fn) noexcept {
    try {
        fn();
        return true;
    } catch (...) {
        capture_current_exception(pe);
        return false;
    }
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
        return idem::pg::invoke<name##_impl>(fcinfo);                                              \
    }                                                                                              \
    }                                                                                              \
    static Datum name##_impl(PG_FUNCTION_ARGS)
