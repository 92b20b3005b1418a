// Canonicalise + hash (RFC 8785 + SHA-256) against OpenSSL SHA-256 alone over the same
// canonical bytes, for representative 200 B, 1 KiB and 16 KiB request payloads.
//   taskset -c 0 build/jcs_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//       --benchmark_min_time=0.5                 (bench/RESULTS.md: results and how they were run)
// The ratio to report is bytes_per_second(BM_CanonicalizeAndHash) /
// bytes_per_second(BM_Sha256Only) at the same size (both count the canonical bytes), i.e.
// the time of SHA-256 alone (one reused EVP context) over the time of fingerprint_into;
// BM_RatioSideBySide measures the same ratio with the two alternating (counter "ratio").
#include "crypto.hpp"
#include "jcs.hpp"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <string>
#include <vector>

#include <time.h>

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

// The goal's measurement: fingerprint_into, which hashes while it writes the canonical text.
void BM_CanonicalizeAndHash(benchmark::State &state) {
    run_payload(state, [](const std::string &text, idem::jcs::CanonicalWriter &w) {
        idem::Digest d = idem::jcs::fingerprint_into(text, w);
        benchmark::DoNotOptimize(d);
    });
}

// Extra information: canonicalise, then hash the result (no overlap).
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

// Extra information (not part of the goal): the same documents already canonical (sorted, no
// whitespace, the decimal 1999.5 without its trailing zero).
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

// Extra information: idem::sha256, the one-shot call (a new EVP context each time).
void BM_Sha256OneShot(benchmark::State &state) {
    std::string canon = idem::jcs::canonicalize_text(payload(static_cast<size_t>(state.range(0))));
    for (auto _ : state) {
        idem::Digest d = idem::sha256(canon);
        benchmark::DoNotOptimize(d);
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * canon.size()));
}

// The goal's ratio measured side by side: blocks of fingerprint_into and of SHA-256 alone (as
// BM_Sha256Only) alternate, in ABBA order, so that a slow spell of this shared host falls on
// both; each pair of blocks gives one ratio (SHA-256 time / fingerprint_into time, thread CPU
// time). Counters: the median ratio and the median time per call of each side.
void BM_RatioSideBySide(benchmark::State &state) {
    const std::string text = payload(static_cast<size_t>(state.range(0)));
    const std::string canon = idem::jcs::canonicalize_text(text);
    idem::jcs::CanonicalWriter w;
    idem::Sha256 h;
    if (idem::jcs::fingerprint_into(text, w) != idem::sha256(canon))
        state.SkipWithError("fingerprint_into disagrees with SHA-256 of the canonical text");
    const int block = state.range(0) > 4096 ? 500 : 5000;
    auto cpu_ns = [] {
        timespec ts;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
    };
    // Thread CPU time per call of step over one block.
    auto time_block = [&](auto step) {
        const double t0 = cpu_ns();
        for (int i = 0; i < block; i++) {
            idem::Digest d = step();
            benchmark::DoNotOptimize(d);
        }
        return (cpu_ns() - t0) / block;
    };
    auto time_fp = [&] { return time_block([&] { return idem::jcs::fingerprint_into(text, w); }); };
    auto time_sha = [&] {
        return time_block([&] {
            h.reset();
            h.update(canon);
            return h.finish();
        });
    };
    std::vector<double> ratios, fps, shas;
    bool fp_first = true;
    for (auto _ : state) {
        double fp, sha;
        if (fp_first) {
            fp = time_fp();
            sha = time_sha();
        } else {
            sha = time_sha();
            fp = time_fp();
        }
        fp_first = !fp_first;
        ratios.push_back(sha / fp);
        fps.push_back(fp);
        shas.push_back(sha);
    }
    auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v.empty() ? 0.0 : v[v.size() / 2];
    };
    state.counters["ratio"] = median(ratios);
    state.counters["fingerprint_ns"] = median(fps);
    state.counters["sha256_ns"] = median(shas);
    state.counters["pairs"] = static_cast<double>(ratios.size());
}

} // namespace

BENCHMARK(BM_RatioSideBySide)->Arg(200)->Arg(1024)->Arg(16384)->MinTime(2.0);
BENCHMARK(BM_CanonicalizeAndHash)->Arg(200)->Arg(1024)->Arg(16384);
BENCHMARK(BM_CanonicalizeThenHash)->Arg(200)->Arg(1024)->Arg(16384);
BENCHMARK(BM_CanonicalizeOnly)->Arg(200)->Arg(1024)->Arg(16384);
BENCHMARK(BM_CanonicalizeOnly_AlreadyCanonical)->Arg(200)->Arg(1024)->Arg(16384);
BENCHMARK(BM_Sha256Only)->Arg(200)->Arg(1024)->Arg(16384);
BENCHMARK(BM_Sha256OneShot)->Arg(200)->Arg(1024)->Arg(16384);
BENCHMARK_MAIN();
