// What src/http_contract.cpp asks of src/http_answer.cpp: the answer of a claim's result row and
// the headers of a problem answer, as Datums.
#pragma once

#include "pg_cpp.hpp"

namespace idem::pg::http_answer {

// The answer (status, headers, body: values and nulls, 3 each) of idem_claim's result row
// (claim and claim_nulls, idem_claim_result's columns in order), as idem_http_answer(claim).
void claim_answer(const Datum *claim, const bool *claim_nulls, Datum *values, bool *nulls);

// The headers of a problem answer: Content-Type: application/problem+json, and Retry-After
// (retry_after seconds) when has_retry_after.
Datum problem_headers(bool has_retry_after, int64 retry_after);

} // namespace idem::pg::http_answer
