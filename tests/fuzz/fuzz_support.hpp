#pragma once
// What the fuzz targets share: a scratch directory of their own (files are
// parsed through the same path API users call), and the invariant check that
// aborts, so libFuzzer records the input.

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <unistd.h>

namespace cpx_fuzz {

/// A directory private to this process, created once.
inline const std::filesystem::path& scratch() {
    static const std::filesystem::path dir = [] {
        const auto base = std::filesystem::exists("/dev/shm") ? std::filesystem::path("/dev/shm")
                                                              : std::filesystem::temp_directory_path();
        auto d = base / ("cpx_fuzz_" + std::to_string(::getpid()));
        std::filesystem::create_directories(d);
        return d;
    }();
    return dir;
}

inline std::filesystem::path write_file(const std::string& name, const std::uint8_t* data, std::size_t size) {
    const auto path = scratch() / name;
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    return path;
}

/// An invariant of a successful parse that does not hold: a bug, not bad input.
#define CPX_FUZZ_CHECK(cond)                                                              \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            std::fprintf(stderr, "invariant failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
            std::abort();                                                                 \
        }                                                                                 \
    } while (0)

}  // namespace cpx_fuzz
