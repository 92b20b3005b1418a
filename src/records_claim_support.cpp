// idem_claim_support: the planner support function of idem_claim.
//
// PostgreSQL fills a call's omitted arguments with their defaults at planning, and the executor
// then prepares and evaluates one expression per argument on every execution of the plan.
// `SELECT ... FROM idem_claim('s', 'k', fp)` thus carries three constant defaults (lease, ttl,
// wait), about 2,000 instructions a call (a replay is only 1.1 x the bare SELECT's).
// At planning this support function drops the trailing arguments that are at their defaults, and
// idem_claim treats an absent argument as NULL (arguments.hpp's arg_null), which for each of them
// means the declared default: fingerprint, lease and ttl DEFAULT NULL, wait DEFAULT true (NULL
// waits, too). test/regress/sql/records.sql checks the declared defaults and the calls' shapes.
#include "pg_cpp.hpp"

extern "C" {
#include "nodes/makefuncs.h"
#include "nodes/pg_list.h"
#include "nodes/primnodes.h"
#include "nodes/supportnodes.h"
}

namespace {

// idem_claim(scope, key, fingerprint, lease, ttl, wait): the arguments from here on have defaults.
constexpr int FIRST_DEFAULTED = 2;
constexpr int WAIT = 5;

// True when argument argno of idem_claim is a constant idem_claim treats as its default.
bool at_default(Node *arg, int argno) {
    if (!IsA(arg, Const))
        return false;
    const Const *c = castNode(Const, arg);
    if (c->constisnull)
        return true;
    return argno == WAIT && DatumGetBool(c->constvalue);
}

} // namespace

// idem_claim_support(internal): SupportRequestSimplify drops the trailing defaulted arguments.
IDEM_PG_FUNCTION(idem_claim_support) {
    Node *raw = reinterpret_cast<Node *>(PG_GETARG_POINTER(0));
    if (!IsA(raw, SupportRequestSimplify))
        PG_RETURN_POINTER(nullptr);
    FuncExpr *call = castNode(SupportRequestSimplify, raw)->fcall;
    int n = list_length(call->args);
    int keep = n;
    while (keep > FIRST_DEFAULTED &&
           at_default(static_cast<Node *>(list_nth(call->args, keep - 1)), keep - 1))
        keep--;
    if (keep == n)
        PG_RETURN_POINTER(nullptr);
    FuncExpr *shorter =
        makeFuncExpr(call->funcid, call->funcresulttype, list_truncate(list_copy(call->args), keep),
                     call->funccollid, call->inputcollid, call->funcformat);
    shorter->funcretset = call->funcretset;
    shorter->funcvariadic = call->funcvariadic;
    shorter->location = call->location;
    PG_RETURN_POINTER(shorter);
}
