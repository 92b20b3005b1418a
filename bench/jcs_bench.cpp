// Micro-benchmarks of the canonicaliser: canonicalise (+ hash) and SHA-256 alone over the same
// canonical bytes, for representative 200 B, 1 KiB and 16 KiB request payloads.
//   taskset -c 0 build/jcs_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//       --benchmark_min_time=0.5
// Information only: the speed goal is the SQL-level one (bench/fingerprint.sh, at least 1.0x
// sha256(jsonb::text)), and a code path that only wins here is not kept. (The former
// core goal, fingerprint_into at least 0.5x the speed of SHA-256 alone, is retired.)
#include "crypto.hpp"
#include "jcs.hpp"

#include <benchmark/benchmark.h>

#include <string>

namespace {

// A payment-like request with nested objects, an items array, numbers and strings, written
// with whitespace and keys out of order (as a client library might send it), about `target`
// bytes long.
std::string payload(size_t target) {
    std::string s = "{\n  \"currency\": \"EUR\", \"amount\": 1999.50, \"customer\": {\"name\": "
                    "\"Zo\\u00eb Example\", \"id\": \"cus_8QK2mX\", \"email\": "
                    "\"zoe@example.com\"},\n  \"metadata\": {\"order\": 12345, \"channel\": "
                    "\"web\"}, \"items\": [";
    int i = 0;
    while (s.size() + 120 < target) {
        if (i > 0)
            s += ", ";
        s += "{\"sku\": \"SKU-" + std::to_string(1000 + i) +
             "\", \"qty\": " + std::to_string(i % 7 + 1) +
             ", \"price\": " + std::to_string(i % 50) + ".25, \"name\": \"Item number " +
             std::to_string(i) + "\"}";
        i++;
    }
    s += "],\n  \"capture\": true, \"description\": null}";
    return s;
}

// Times step(text, writer) on the payload of state.range(0) bytes; throughput counts the
// canonical bytes.
template <class Step> void run_payload(benchmark::State &state, Step step) {
    std::string text = payload(static_cast<size_t>(state.range(0)));
    idem::jcs::CanonicalWriter w;
    idem::jcs::parse_into(text, w);
    size_t canon_size = w.result().size();
    for (auto _ : state)
        step(text, w);
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * canon_size));
    state.counters["input_bytes"] = static_cast<double>(text.size());
    state.counters["canonical_bytes"] = static_cast<double>(canon_size);
}

// fingerprint_into, which hashes while it writes the canonical text.
void BM_CanonicalizeAndHash(benchmark::State &state) {
    run_payload(state, [](const std::string &text, idem::jcs::CanonicalWriter &w) {
        idem::Digest d = idem::jcs::fingerprint_into(text, w);
        benchmark::DoNotOptimize(d);
    });
}

// Canonicalise, then hash the result (no overlap).
void BM_CanonicalizeThenHash(benchmark::State &state) {
    run_payload(state, [](const std::string &text, idem::jcs::CanonicalWriter &w) {
        idem::jcs::parse_into(text, w);
        idem::Digest d = w.digest();
        benchmark::DoNotOptimize(d);
    });
}

void BM_CanonicalizeOnly(benchmark::State &state) {
    run_payload(state, [](const std::string &text, idem::jcs::CanonicalWriter &w) {
        idem::jcs::parse_into(text, w);
        benchmark::DoNotOptimize(w.result().data());
    });
}

// The same documents already canonical (sorted, no whitespace, the decimal 1999.5 without
// its trailing zero).
void BM_CanonicalizeOnly_AlreadyCanonical(benchmark::State &state) {
    std::string text = idem::jcs::canonicalize_text(payload(static_cast<size_t>(state.range(0))));
    idem::jcs::CanonicalWriter w;
    for (auto _ : state) {
        idem::jcs::parse_into(text, w);
        benchmark::DoNotOptimize(w.result().data());
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}

// SHA-256 alone over the canonical bytes, with one reused context (as the writer's).
void BM_Sha256Only(benchmark::State &state) {
    std::string canon = idem::jcs::canonicalize_text(payload(static_cast<size_t>(state.range(0))));
    idem::Sha256 h;
    for (auto _ : state) {
        h.reset();
        h.update(canon);
        idem::Digest d = h.finish();
        benchmark::DoNotOptimize(d);
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * canon.size()));
}

// idem::sha256, the one-shot call (a new EVP context each time).
void BM_Sha256OneShot(benchmark::State &state) {
    std::string canon = idem::jcs::canonicalize_text(payload(static_cast<size_t>(state.range(0))));
    for (auto _ : state) {
        idem::Digest d = idem::sha256(canon);
        benchmark::DoNotOptimize(d);
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * canon.size()));
}

} // namespace

BENCHMARK(BM_CanonicalizeAndHash)->Arg(200)->Arg(1024)->Arg(16384);
BENCHMARK(BM_CanonicalizeThenHash)->Arg(200)->Arg(1024)->Arg(16384);
BENCHMARK(BM_CanonicalizeOnly)->Arg(200)->Arg(1024)->Arg(16384);
BENCHMARK(BM_CanonicalizeOnly_AlreadyCanonical)->Arg(200)->Arg(1024)->Arg(16384);
BENCHMARK(BM_Sha256Only)->Arg(200)->Arg(1024)->Arg(16384);
BENCHMARK(BM_Sha256OneShot)->Arg(200)->Arg(1024)->Arg(16384);
BENCHMARK_MAIN();
