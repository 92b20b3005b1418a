// Argument checks shared by the SQL-callable functions: NULL and absent arguments, intervals.
// The extension's own SQLSTATEs are in src/sqlstates.hpp.
#pragma once

#include "pg_cpp.hpp"

#include "lease.hpp"

extern "C" {
#include "datatype/timestamp.h"
#include "utils/timestamp.h"
}

namespace idem::pg {

// Raises 22004 when argument argno is NULL; hint, when given, says what to do instead.
inline void require_arg(FunctionCallInfo fcinfo, int argno, const char *name,
                        const char *hint = nullptr) {
    if (PG_ARGISNULL(argno))
        ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
                        errmsg("%s must not be null", name), hint ? errhint("%s", hint) : 0));
}

// True when argument argno is NULL or absent. A call has fewer arguments than the function
// declares when an older version's SQL declares fewer, or when a planner support function
// (idem_claim_support) dropped trailing arguments at their defaults.
inline bool arg_null(FunctionCallInfo fcinfo, int argno) {
    return argno >= PG_NARGS() || PG_ARGISNULL(argno);
}

// Microseconds of interval argument argno (a month counts 30 days, a day 24 hours, as
// PostgreSQL compares intervals), or default_seconds when it is NULL or absent; 22008 on overflow.
inline int64 interval_arg_usec(FunctionCallInfo fcinfo, int argno, int default_seconds) {
    if (arg_null(fcinfo, argno))
        return static_cast<int64>(default_seconds) * USECS_PER_SEC;
    const Interval *iv = PG_GETARG_INTERVAL_P(argno);
    int32 month = iv->month, day = iv->day;
    int64 time = iv->time;
    return call_cpp([&] { return idem::interval_usec(month, day, time); });
}

// The same with the default read from a setting (idem::settings::default_lease_s, ...) only when
// the argument is NULL: a call that passes the interval neither needs the setting nor fails while
// the setting holds an invalid value.
inline int64 interval_arg_usec(FunctionCallInfo fcinfo, int argno, int (*default_seconds)()) {
    return interval_arg_usec(fcinfo, argno, arg_null(fcinfo, argno) ? default_seconds() : 0);
}

} // namespace idem::pg
