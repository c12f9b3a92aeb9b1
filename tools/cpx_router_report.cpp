// cpx-router-report: how evenly each routing algorithm spreads a frequency
// table's token ids and frequency mass over the experts, side by side, so
// claims such as the paper's "1.0000x" or "round-robin leaves up to 38%
// imbalance" can be checked on any table.
//
//   cpx-router-report TABLE [--vocab V] [--experts N] [--algorithms a,b,...]

#include <cpx/io/frequency_table.hpp>
#include <cpx/router/balance_report.hpp>
#include <cpx/router/compute_routing.hpp>

#include <cmath>
#include <cstdio>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "cli_args.hpp"

namespace {

using cpx::router::RoutingAlgorithm;
using cpx::tools::UsageError;

constexpr const char* usage =
    "usage: cpx-router-report TABLE [--vocab V] [--experts N] [--algorithms greedy,balanced,modulo,contiguous]\n"
    "  TABLE: text (`count` or `id<TAB>count` per line) or .npy (int32/int64/float32/float64) counts.\n"
    "  --vocab defaults to the table's length, --experts to 4, --algorithms to all four.\n";

constexpr int column = 24;

std::string fixed(double v, int decimals) {
    if (std::isinf(v)) return "inf";
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
    return buf;
}

void row(const std::string& label, const std::vector<std::string>& cells) {
    std::printf("%-26s", label.c_str());
    for (const auto& c : cells) std::printf("%-*s", column, c.c_str());
    std::printf("\n");
}

int run(int argc, char** argv) {
    const cpx::tools::Args args(argc, argv, {"vocab", "experts", "algorithms"});
    if (args.positional.size() != 1) throw UsageError("expected exactly one frequency table file");
    std::optional<std::size_t> vocab;
    if (args.has("vocab")) vocab = args.positive("vocab", cpx::router::max_routing_vocab);
    const int experts = args.has("experts") ? static_cast<int>(args.positive("experts", 4096)) : 4;
    std::vector<RoutingAlgorithm> algorithms(cpx::router::all_routing_algorithms.begin(),
                                             cpx::router::all_routing_algorithms.end());
    if (args.has("algorithms")) {
        algorithms.clear();
        std::stringstream list(args.text("algorithms"));
        for (std::string item; std::getline(list, item, ',');) {
            const auto a = cpx::router::routing_algorithm_named(item);
            if (!a) throw UsageError("unknown algorithm '" + item + "'");
            algorithms.push_back(*a);
        }
        if (algorithms.empty()) throw UsageError("--algorithms lists no algorithm");
    }

    const std::string path = args.positional[0];
    const std::vector<std::uint64_t> counts = cpx::io::read_frequency_table(path, vocab);
    std::vector<cpx::router::BalanceReport> reports;
    for (const RoutingAlgorithm a : algorithms)
        reports.push_back(cpx::router::balance_report(counts, cpx::router::compute_routing(a, counts, experts), experts));

    const cpx::router::BalanceSummary& any = reports.front().summary;
    const double total = static_cast<double>(any.total_load);
    std::printf("frequency table: %s\n", path.c_str());
    std::printf("vocabulary %zu ids, %d experts, total count %llu, largest count %llu (%s%% of the total)\n\n",
                counts.size(), experts, static_cast<unsigned long long>(any.total_load),
                static_cast<unsigned long long>(any.largest_count),
                fixed(total > 0 ? 100.0 * static_cast<double>(any.largest_count) / total : 0.0, 2).c_str());

    std::vector<std::string> cells;
    for (const RoutingAlgorithm a : algorithms) cells.emplace_back(cpx::router::name_of(a));
    row("", cells);
    for (int e = 0; e < experts; ++e) {
        const auto ue = static_cast<std::size_t>(e);
        cells.clear();
        for (const auto& r : reports) cells.push_back(std::to_string(r.tokens[ue]) + " ids");
        row("expert " + std::to_string(e), cells);
        cells.clear();
        for (const auto& r : reports)
            cells.push_back(std::to_string(r.loads[ue]) + " (" +
                            fixed(total > 0 ? 100.0 * static_cast<double>(r.loads[ue]) / total : 0.0, 2) + "%)");
        row("  load (share)", cells);
    }
    std::printf("\n");
    const auto summary_row = [&](const std::string& label, auto cell) {
        cells.clear();
        for (const auto& r : reports) cells.push_back(cell(r.summary));
        row(label, cells);
    };
    using S = cpx::router::BalanceSummary;
    summary_row("max/min load ratio", [](const S& s) { return fixed(s.load_ratio(), 4) + "x"; });
    summary_row("max/mean load", [](const S& s) { return fixed(s.max_over_mean(), 4) + "x"; });
    summary_row("max-min load", [](const S& s) { return std::to_string(s.load_spread()); });
    summary_row("(max-min)/largest count", [](const S& s) {
        return s.largest_count ? fixed(static_cast<double>(s.load_spread()) / static_cast<double>(s.largest_count), 4)
                               : std::string("-");
    });
    summary_row("load bound (Thm 4.2)", [](const S& s) { return std::string(s.within_load_bound() ? "holds" : "violated"); });
    summary_row("ids per expert", [](const S& s) {
        return std::to_string(s.min_tokens) + ".." + std::to_string(s.max_tokens) +
               (s.counts_balanced() ? " floor/ceil" : " unequal");
    });
    return 0;
}

}  // namespace

int main(int argc, char** argv) { return cpx::tools::tool_main("cpx-router-report", usage, argc, argv, run); }
