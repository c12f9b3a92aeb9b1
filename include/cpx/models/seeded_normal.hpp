#pragma once
// Reproducible random numbers for initialisation and sampling. The standard
// distributions are implementation-defined, so values are derived here from
// std::mt19937_64 (whose output the standard fixes): the same seed gives the
// same model and the same samples with every compiler and library.

#include <cmath>
#include <cstdint>
#include <random>
#include <string_view>

namespace cpx {

/// splitmix64 finaliser: decorrelates nearby seeds.
constexpr std::uint64_t mix_seed(std::uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/// FNV-1a hash of a name, so each named tensor gets its own stream.
constexpr std::uint64_t name_hash(std::string_view s) {
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
    return h;
}

/// Uniform doubles in (0, 1) and standard normals (Box-Muller) from mt19937_64.
class SeededRandom {
public:
    explicit SeededRandom(std::uint64_t seed) : gen_(mix_seed(seed)) {}
    SeededRandom(std::uint64_t seed, std::string_view stream) : gen_(mix_seed(seed ^ name_hash(stream))) {}

    /// Uniform in the open interval (0, 1), 53 random bits.
    double uniform() { return (static_cast<double>(gen_() >> 11) + 0.5) * 0x1p-53; }

    double normal() {
        if (has_spare_) {
            has_spare_ = false;
            return spare_;
        }
        const double r = std::sqrt(-2.0 * std::log(uniform()));
        const double a = 6.283185307179586 * uniform();
        spare_ = r * std::sin(a);
        has_spare_ = true;
        return r * std::cos(a);
    }

private:
    std::mt19937_64 gen_;
    double spare_ = 0.0;
    bool has_spare_ = false;
};

}  // namespace cpx
