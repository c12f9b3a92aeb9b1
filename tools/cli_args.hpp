#pragma once
// Minimal `--option value` parsing and the main() shared by the command-line tools.

#include <charconv>
#include <cstdio>
#include <exception>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace cpx::tools {

struct UsageError : std::runtime_error { using std::runtime_error::runtime_error; };

/// Options `--name value` (every option takes a value) and positional arguments.
struct Args {
    std::map<std::string, std::string, std::less<>> options;
    std::vector<std::string> positional;

    Args(int argc, char** argv, const std::vector<std::string_view>& known) {
        for (int i = 1; i < argc; ++i) {
            const std::string_view a = argv[i];
            if (a.substr(0, 2) != "--") { positional.emplace_back(a); continue; }
            const std::string name(a.substr(2));
            bool ok = false;
            for (auto k : known) ok = ok || k == name;
            if (!ok) throw UsageError("unknown option --" + name);
            if (i + 1 >= argc) throw UsageError("option --" + name + " needs a value");
            options[name] = argv[++i];
        }
    }

    bool has(std::string_view name) const { return options.find(name) != options.end(); }

    std::string text(std::string_view name) const {
        const auto it = options.find(name);
        if (it == options.end()) throw UsageError("missing required option --" + std::string(name));
        return it->second;
    }

    /// A positive integer option no larger than `max`.
    std::uint64_t positive(std::string_view name, std::uint64_t max) const {
        const std::string s = text(name);
        std::uint64_t v = 0;
        const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec != std::errc() || end != s.data() + s.size() || v == 0 || v > max)
            throw UsageError("--" + std::string(name) + " must be an integer in [1, " + std::to_string(max) + "], got '" +
                             s + "'");
        return v;
    }
};

/// main() of a tool: --help or -h prints `usage` and exits 0; otherwise `run(argc, argv)`, where a
/// UsageError prints its message and the usage and any other error its message, both exiting 1.
template <class Run>
int tool_main(const char* name, const char* usage, int argc, char** argv, Run run) {
    for (int i = 1; i < argc; ++i)
        if (std::string_view(argv[i]) == "--help" || std::string_view(argv[i]) == "-h") {
            std::fputs(usage, stdout);
            return 0;
        }
    try {
        return run(argc, argv);
    } catch (const UsageError& e) {
        std::fprintf(stderr, "%s: error: %s\n%s", name, e.what(), usage);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: error: %s\n", name, e.what());
    }
    return 1;
}

}  // namespace cpx::tools
