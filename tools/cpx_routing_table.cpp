// Build-time generator behind the CMake function cpx_add_routing_table: reads
// a frequency table, computes the routing with the library's constexpr
// routers and writes
//   <header>: the finished token -> expert table as a compile-time constant
//             (with --top-k K > 1 also the [K, V] routes: route r = (primary + r) mod n,
//             K distinct experts per token, every route as balanced as the primary);
//   <check>:  a translation unit of static_asserts that recompute the balance
//             figures over that table with the same constexpr report code
//             (every id routed, the algorithm's guarantees, the REQUIREd
//             bounds), so a violating table fails the build with a message.
// Computing the routing here rather than in the compiler keeps a V = 100000
// build to seconds (see docs/ROUTER.md for measurements).

#include <cpx/io/frequency_table.hpp>
#include <cpx/router/balance_report.hpp>
#include <cpx/router/compute_routing.hpp>
#include <cpx/router/top_k_routing.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli_args.hpp"

namespace {

using cpx::router::RoutingAlgorithm;
using cpx::tools::UsageError;

constexpr const char* usage =
    "usage: cpx-routing-table --vocab V --experts N --algorithm greedy|balanced|modulo|contiguous\n"
    "         --name IDENT --namespace NS --header OUT.hpp --check OUT.cpp\n"
    "         [--table FILE] [--require count_balance,load_bound] [--max-load-ratio X] [--top-k K]\n"
    "         [--list OUT.txt]\n"
    "  --table is required for greedy and balanced (text or .npy frequency table).\n"
    "  --list also writes the primary table as text, the expert of token id k on line k + 1\n"
    "  (for tools outside C++, e.g. a training script that must route as the build does).\n";

bool is_identifier(std::string_view s) {
    if (s.empty() || (s[0] >= '0' && s[0] <= '9')) return false;
    for (char c : s)
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return false;
    return true;
}

bool is_namespace(std::string_view s) {
    std::size_t start = 0;
    while (true) {
        const std::size_t sep = s.find("::", start);
        if (!is_identifier(s.substr(start, sep == std::string_view::npos ? sep : sep - start))) return false;
        if (sep == std::string_view::npos) return true;
        start = sep + 2;
    }
}

/// Text safe inside a C++ string literal.
std::string escaped(std::string_view s) {
    std::string out;
    for (char c : s) {
        if (c == '\\' || c == '"') out.push_back('\\');
        out.push_back(c);
    }
    return out;
}

template <class T>
void write_list(std::ostream& out, const std::vector<T>& values) {
    for (std::size_t i = 0; i < values.size(); ++i) {
        out << values[i] << ',';
        if (i % 32 == 31 || i + 1 == values.size()) out << '\n';
    }
}

void write_file(const std::filesystem::path& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    if (!out) throw cpx::Error(path.string() + ": cannot write");
}

int run(int argc, char** argv) {
    const cpx::tools::Args args(argc, argv, {"table", "vocab", "experts", "algorithm", "name", "namespace", "header",
                                             "check", "require", "max-load-ratio", "top-k", "list"});
    if (!args.positional.empty()) throw UsageError("unexpected argument '" + args.positional[0] + "'");
    const std::size_t vocab = args.positive("vocab", cpx::router::max_routing_vocab);
    const int experts = static_cast<int>(args.positive("experts", 1 << 20));
    const std::string algorithm_name = args.text("algorithm");
    const auto algorithm = cpx::router::routing_algorithm_named(algorithm_name);
    if (!algorithm) throw UsageError("unknown --algorithm '" + algorithm_name + "'");
    const std::string name = args.text("name"), ns = args.text("namespace");
    if (!is_identifier(name)) throw UsageError("--name '" + name + "' is not a C++ identifier");
    if (!is_namespace(ns)) throw UsageError("--namespace '" + ns + "' is not a C++ namespace name");
    const std::filesystem::path header = args.text("header"), check = args.text("check");
    const int top_k = args.has("top-k") ? static_cast<int>(args.positive("top-k", 1 << 20)) : 1;
    if (top_k > experts)
        throw UsageError("--top-k " + std::to_string(top_k) + " exceeds --experts " + std::to_string(experts) +
                         " (a token's routes are distinct experts)");

    bool require_counts = cpx::router::guarantees_count_balance(*algorithm);
    bool require_bound = cpx::router::guarantees_load_bound(*algorithm);
    if (args.has("require")) {
        std::stringstream list(args.text("require"));
        for (std::string item; std::getline(list, item, ',');) {
            if (item == "count_balance") require_counts = true;
            else if (item == "load_bound") require_bound = true;
            else if (!item.empty()) throw UsageError("--require knows count_balance and load_bound, not '" + item + "'");
        }
    }
    std::string max_ratio;
    if (args.has("max-load-ratio")) {
        max_ratio = args.text("max-load-ratio");
        std::size_t used = 0;
        double r = 0;
        try { r = std::stod(max_ratio, &used); } catch (const std::exception&) { used = 0; }
        if (used != max_ratio.size() || !std::isfinite(r) || !(r >= 1.0)) throw UsageError("--max-load-ratio must be a number >= 1, got '" + max_ratio + "'");
    }

    std::vector<std::uint64_t> counts(vocab, 0);
    std::string source = "no frequency table";
    if (args.has("table")) {
        const std::filesystem::path table = args.text("table");
        counts = cpx::io::read_frequency_table(table, vocab);
        source = table.filename().string();
    } else if (cpx::router::uses_frequencies(*algorithm) || require_bound || !max_ratio.empty()) {
        throw UsageError("--table is required for " + algorithm_name + " routing and for load requirements");
    }

    const std::vector<std::int32_t> table = cpx::router::compute_routing(*algorithm, counts, experts);
    const cpx::router::BalanceSummary s = cpx::router::balance_summary(counts, table, experts);
    const std::vector<std::int32_t> routes = cpx::router::cyclic_routes(table, top_k, experts);
    const std::string qualified = ns + "::" + name;
    const std::string what = "routing table " + qualified + " (" + algorithm_name + ", " + escaped(source) + ")";

    std::ostringstream h;
    h << "// Generated by cpx-routing-table (cpx_add_routing_table) from " << source << ". Do not edit.\n"
      << "// " << algorithm_name << " routing of " << vocab << " token ids over " << experts << " experts.\n"
      << "#pragma once\n#include <array>\n#include <cstdint>\n#include <string_view>\n"
      << "#include <cpx/router/routing_algorithm.hpp>\n#include <cpx/router/token_routing.hpp>\n"
      << "#include <cpx/router/top_k_routing.hpp>\n\n"
      << "namespace " << ns << " {\n\n"
      << "struct " << name << " {\n"
      << "    static constexpr std::size_t vocab = " << vocab << ";\n"
      << "    static constexpr int experts = " << experts << ";\n"
      << "    static constexpr cpx::router::RoutingAlgorithm algorithm = cpx::router::RoutingAlgorithm::"
      << algorithm_name << ";\n"
      << "    static constexpr std::string_view source = \"" << escaped(source) << "\";\n"
      << "    static constexpr std::array<std::int32_t, vocab> token_to_expert{\n";
    write_list(h, table);
    h << "    };\n"
      << "    /// The primary route as a single table.\n"
      << "    static cpx::TokenRouting routing() { return cpx::TokenRouting(token_to_expert, experts); }\n"
      << "    /// Routes per token; route r of token t is (token_to_expert[t] + r) mod experts.\n"
      << "    static constexpr int top_k = " << top_k << ";\n";
    if (top_k > 1) {
        h << "    /// [top_k, vocab]: route r of token t at r * vocab + t.\n"
          << "    static constexpr std::array<std::int32_t, top_k * vocab> routes{\n";
        write_list(h, routes);
        h << "    };\n"
          << "    /// The [top_k, vocab] table as the view the token-routed layer takes.\n"
          << "    static cpx::TopKRouting top_k_routing() { return cpx::TopKRouting(routes, top_k, experts); }\n";
    } else {
        h << "    /// The table as the view the token-routed layer takes.\n"
          << "    static cpx::TopKRouting top_k_routing() { return cpx::TopKRouting(routing()); }\n";
    }
    h << "};\n\n}  // namespace " << ns << "\n";

    std::ostringstream c;
    c << "// Generated by cpx-routing-table: compile-time checks of " << qualified << ". Do not edit.\n"
      << "#include \"" << header.filename().string() << "\"\n"
      << "#include <array>\n#include <cstdint>\n#include <span>\n#include <cpx/router/balance_report.hpp>\n"
      << "#include <cpx/router/top_k_routing.hpp>\n\n"
      << "namespace {\n";
    if (args.has("table")) {
        c << "constexpr std::array<std::uint64_t, " << vocab << "> cpx_counts{\n";
        write_list(c, counts);
        c << "};\n";
    } else {
        c << "constexpr std::array<std::uint64_t, " << vocab << "> cpx_counts{};  // no table: all zero\n";
    }
    c << "constexpr cpx::router::BalanceSummary cpx_summary =\n"
      << "    cpx::router::balance_summary(cpx_counts, " << qualified << "::token_to_expert, " << qualified
      << "::experts);\n"
      << "static_assert(cpx_summary.unrouted == 0, \"" << what
      << ": some token ids have no expert in [0, experts)\");\n";
    if (require_counts)
        c << "static_assert(cpx_summary.counts_balanced(), \"" << what
          << ": expert token counts are not all floor(V/n) or ceil(V/n)\");\n";
    if (require_bound)
        c << "static_assert(cpx_summary.within_load_bound(), \"" << what
          << ": expert loads differ by more than the largest single count (Theorem 4.2 bound)\");\n";
    if (!max_ratio.empty())
        c << "static_assert(cpx_summary.load_ratio() <= " << max_ratio << ", \"" << what
          << ": max/min expert load ratio exceeds " << max_ratio << "\");\n";
    // Every further route, checked like the primary, and the routes of a token distinct.
    for (int r = 1; r < top_k; ++r) {
        const std::string route = "cpx_route" + std::to_string(r);
        const std::string rwhat = what + " route " + std::to_string(r);
        c << "constexpr cpx::router::BalanceSummary " << route << " = cpx::router::balance_summary(cpx_counts, "
          << "std::span<const std::int32_t>(" << qualified << "::routes).subspan(" << r << " * " << qualified
          << "::vocab, " << qualified << "::vocab), " << qualified << "::experts);\n"
          << "static_assert(" << route << ".unrouted == 0, \"" << rwhat << ": some token ids have no expert\");\n";
        if (require_counts)
            c << "static_assert(" << route << ".counts_balanced(), \"" << rwhat << ": expert token counts unbalanced\");\n";
        if (require_bound)
            c << "static_assert(" << route << ".within_load_bound(), \"" << rwhat
              << ": loads differ by more than the largest single count\");\n";
        if (!max_ratio.empty())
            c << "static_assert(" << route << ".load_ratio() <= " << max_ratio << ", \"" << rwhat
              << ": max/min expert load ratio exceeds " << max_ratio << "\");\n";
    }
    if (top_k > 1)
        c << "static_assert(cpx::router::tokens_with_repeated_routes(" << qualified << "::routes, " << qualified
          << "::top_k) == 0, \"" << what << ": a token's routes are not distinct experts\");\n";
    c << "}  // namespace\n";

    write_file(header, h.str());
    write_file(check, c.str());
    if (args.has("list")) {
        std::ostringstream l;
        for (const std::int32_t e : table) l << e << '\n';
        write_file(args.text("list"), l.str());
    }
    // Token ids per expert is the table's shape; the loads weigh each id by its
    // count in the frequency table (expected tokens per expert on that text).
    std::printf("cpx-routing-table: %s (%s): %zu token ids onto %d experts, %zu..%zu ids per expert; "
                "expected token load per expert: max/min %.4fx, heaviest - lightest %llu "
                "(the bound is the largest single id's count, %llu)\n",
                qualified.c_str(), algorithm_name.c_str(), table.size(), experts, s.min_tokens, s.max_tokens,
                s.load_ratio(), static_cast<unsigned long long>(s.load_spread()),
                static_cast<unsigned long long>(s.largest_count));
    const auto reports = cpx::router::route_balance_reports(counts, routes, top_k, experts);
    for (int r = 1; r < top_k; ++r)
        std::printf("cpx-routing-table: route %d (primary + %d mod %d): %zu..%zu ids per expert, load max/min %.4fx\n",
                    r, r, experts, reports[r].summary.min_tokens, reports[r].summary.max_tokens,
                    reports[r].summary.load_ratio());
    return 0;
}

}  // namespace

int main(int argc, char** argv) { return cpx::tools::tool_main("cpx-routing-table", usage, argc, argv, run); }
