// The demos' result table (demo/payment_demo.cpp, demo/purchase_demo.cpp): one row per scenario
// or check, printed as | scenario | expected | observed | result |.
#pragma once

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

namespace demo {

// The result table: scenario | expected | observed | result.
struct Row {
    std::string scenario, expected, observed;
    bool pass;
};
inline void print_table(const std::vector<Row> &rows) {
    size_t w[3] = {8, 8, 8};
    for (const auto &r : rows) {
        w[0] = std::max(w[0], r.scenario.size());
        w[1] = std::max(w[1], r.expected.size());
        w[2] = std::max(w[2], r.observed.size());
    }
    auto line = [&](const std::string &a, const std::string &b, const std::string &c,
                    const std::string &d) {
        std::printf("| %-*s | %-*s | %-*s | %-6s |\n", int(w[0]), a.c_str(), int(w[1]), b.c_str(),
                    int(w[2]), c.c_str(), d.c_str());
    };
    std::printf("\n");
    line("scenario", "expected", "observed", "result");
    std::printf("|%s|%s|%s|--------|\n", std::string(w[0] + 2, '-').c_str(),
                std::string(w[1] + 2, '-').c_str(), std::string(w[2] + 2, '-').c_str());
    for (const auto &r : rows)
        line(r.scenario, r.expected, r.observed, r.pass ? "PASS" : "FAIL");
    std::fflush(stdout);
}

} // namespace demo
