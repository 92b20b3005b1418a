#!/usr/bin/env bash
# SQL benchmark: idempotency.idem_fingerprint(jsonb) against sha256(convert_to(jsonb::text, 'UTF8')) over the
# same 20,000 rows of ~1 KiB, alternating, REPS repetitions each; prints per-run times, the
# medians and the ratio (baseline time / idem_fingerprint time; > 1 means faster than baseline).
# The text overload against its own baseline: idempotency.idem_fingerprint(t) on the stored request text
# against sha256(convert_to(t::jsonb::text, 'UTF8')), the normalisation a user would otherwise
# write for a text body (goal >= 1.0 too). Also timed, for information: exact_numbers, the text
# overload on j::text (pays the same cast as the jsonb baseline, plus the parse), and a no-op
# exclude filter (the iterator path that filtered calls take).
# Usage (from the project root, extension installed):
#   eval "$(test/pgcluster start)" && bench/fingerprint.sh [REPS]
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-7}
DB=fp_bench
psql -X -q -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB" postgres
trap 'psql -X -q -c "DROP DATABASE IF EXISTS $DB" postgres' EXIT
psql -X -q -d $DB -c "CREATE EXTENSION idempotency"
psql -X -q -d $DB -f bench/fingerprint.sql
# Each query aggregates so that result transfer is not measured; both read the same rows.
Q_OURS="SELECT count(idempotency.idem_fingerprint(j)) FROM fp_bench"
Q_BASE="SELECT count(sha256(convert_to(j::text, 'UTF8'))) FROM fp_bench"
Q_EXACT="SELECT count(idempotency.idem_fingerprint(j, exact_numbers => true)) FROM fp_bench"
Q_TEXT="SELECT count(idempotency.idem_fingerprint(j::text)) FROM fp_bench"
Q_TSTORED="SELECT count(idempotency.idem_fingerprint(t)) FROM fp_bench"
Q_TBASE="SELECT count(sha256(convert_to(t::jsonb::text, 'UTF8'))) FROM fp_bench"
# An exclude path that matches nothing: same fingerprints, but the iterator path that filters use.
Q_FILT="SELECT count(idempotency.idem_fingerprint(j, exclude => '{no_such_member}')) FROM fp_bench"
time_ms() { # query -> milliseconds (server-side, psql \timing)
    psql -X -q -d $DB -c '\timing on' -c "SET max_parallel_workers_per_gather = 0" -c "$1" |
        sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | tail -n 1
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
time_ms "$Q_OURS" >/dev/null; time_ms "$Q_BASE" >/dev/null # warm-up (cache, library load)
ours=() base=() exact=() text=() filt=() tstored=() tbase=()
for ((r = 1; r <= REPS; r++)); do
    ours+=("$(time_ms "$Q_OURS")")
    base+=("$(time_ms "$Q_BASE")")
    exact+=("$(time_ms "$Q_EXACT")")
    text+=("$(time_ms "$Q_TEXT")")
    filt+=("$(time_ms "$Q_FILT")")
    tstored+=("$(time_ms "$Q_TSTORED")")
    tbase+=("$(time_ms "$Q_TBASE")")
done
m_ours=$(printf '%s\n' "${ours[@]}" | median)
m_base=$(printf '%s\n' "${base[@]}" | median)
m_exact=$(printf '%s\n' "${exact[@]}" | median)
m_text=$(printf '%s\n' "${text[@]}" | median)
m_filt=$(printf '%s\n' "${filt[@]}" | median)
m_tstored=$(printf '%s\n' "${tstored[@]}" | median)
m_tbase=$(printf '%s\n' "${tbase[@]}" | median)
echo "idempotency.idem_fingerprint(j) ms:                     ${ours[*]}"
echo "sha256(convert_to(j::text,'UTF8')) ms:      ${base[*]}"
echo "idempotency.idem_fingerprint(j, exact_numbers) ms:      ${exact[*]}"
echo "idempotency.idem_fingerprint(j::text) ms:               ${text[*]}"
echo "idempotency.idem_fingerprint(j, exclude => nothing) ms: ${filt[*]}"
echo "idempotency.idem_fingerprint(t) ms:                     ${tstored[*]}"
echo "sha256(convert_to(t::jsonb::text,'UTF8')) ms: ${tbase[*]}"
echo "median ms: ours $m_ours, baseline $m_base, exact $m_exact, text-input $m_text, filtered $m_filt"
awk -v o="$m_ours" -v b="$m_base" -v e="$m_exact" -v t="$m_text" -v f="$m_filt" \
    'BEGIN {printf "ratio baseline/ours = %.2f (goal >= 1.0); baseline/exact = %.2f; baseline/text-input = %.2f; baseline/filtered = %.2f\n", b / o, b / e, b / t, b / f}'
awk -v s="$m_tstored" -v b="$m_tbase" \
    'BEGIN {printf "text overload: ratio sha256(t::jsonb::text)/idem_fingerprint(t) = %.2f (goal >= 1.0)\n", b / s}'
