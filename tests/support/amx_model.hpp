#pragma once
// A software model of the AMX tile registers and of the instructions the bf16
// product's AMX kernel issues (cpu/kernels/gemm_bf16_amx.hpp), written from their
// architectural definitions, so the kernel runs and is checked on machines
// without AMX. It reads and writes memory exactly where the instructions would
// (rows x bytes-per-row of the configured shape, `stride` bytes apart), which
// lets AddressSanitizer check the kernel's addressing, and it refuses what the
// hardware would fault on: an unconfigured or mis-shaped tile, a product of
// tiles whose shapes do not chain.
//
// TDPBF16PS: C[m][n] += A[m][2k] B[k][2n] + A[m][2k+1] B[k][2n+1] for every pair
// k, as two fp32 additions in that order (each bf16 x bf16 product is exact in
// fp32), bf16 inputs below 2^-126 read as zero and fp32 results below 2^-126
// written as zero (the instruction's DAZ and FTZ), rounding to nearest even.
#include <cpx/cpu/kernels/gemm_bf16_amx.hpp>

#ifdef CPX_HAVE_GEMM_BF16_AMX
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>

namespace cpx::testing {

struct AmxModel {
    struct State {
        cpu::amx::TileConfig config;
        bool configured = false;
        alignas(64) std::uint8_t tile[8][16][64] = {};
        long products = 0;  ///< tile products issued on this thread since configure()
    };
    static State& state() {
        thread_local State s;
        return s;
    }
    static void check(bool ok, const char* what) {
        if (!ok) throw std::logic_error(std::string("AMX model: ") + what);
    }
    static void configure(const cpu::amx::TileConfig& c) {
        State& s = state();
        check(c.palette == 1, "palette must be 1");
        for (int t = 0; t < 8; ++t) check(c.rows[t] <= 16 && c.colsb[t] <= 64 && c.colsb[t] % 4 == 0, "bad tile shape");
        s.config = c;
        s.configured = true;
        s.products = 0;
        std::memset(s.tile, 0, sizeof s.tile);  // LDTILECFG zeroes the tiles
    }
    static void release() { state().configured = false; }
    static std::uint8_t (&configured_tile(int t, int& rows, int& bytes))[16][64] {
        State& s = state();
        check(s.configured, "tile instruction before LDTILECFG");
        rows = s.config.rows[t], bytes = s.config.colsb[t];
        check(rows > 0 && bytes > 0, "tile not configured");
        return s.tile[t];
    }
    template <int T>
    static void zero() {
        int rows, bytes;
        std::memset(configured_tile(T, rows, bytes), 0, 16 * 64);
    }
    template <int T>
    static void load(const void* p, index_t stride) {
        int rows, bytes;
        auto& t = configured_tile(T, rows, bytes);
        std::memset(t, 0, sizeof t);
        for (int r = 0; r < rows; ++r) std::memcpy(t[r], static_cast<const std::uint8_t*>(p) + r * stride, bytes);
    }
    /// TILELOADDT1: load() with a caching hint, the same result.
    template <int T>
    static void load_stream(const void* p, index_t stride) {
        load<T>(p, stride);
    }
    template <int T>
    static void store(void* p, index_t stride) {
        int rows, bytes;
        auto& t = configured_tile(T, rows, bytes);
        for (int r = 0; r < rows; ++r) std::memcpy(static_cast<std::uint8_t*>(p) + r * stride, t[r], bytes);
    }
    template <int C, int A, int B>
    static void dot() {
        int c_rows, c_bytes, a_rows, a_bytes, b_rows, b_bytes;
        auto& c = configured_tile(C, c_rows, c_bytes);
        const auto& a = configured_tile(A, a_rows, a_bytes);
        const auto& b = configured_tile(B, b_rows, b_bytes);
        check(c_rows == a_rows && a_bytes / 4 == b_rows && c_bytes == b_bytes, "tile shapes do not chain");
        for (int m = 0; m < c_rows; ++m)
            for (int n = 0; n < c_bytes / 4; ++n) {
                float acc = read<float>(c[m], n);
                for (int k = 0; k < a_bytes / 4; ++k)
                    for (int e = 0; e < 2; ++e)
                        acc = flush(acc + widen(read<std::uint16_t>(a[m], 2 * k + e)) *
                                              widen(read<std::uint16_t>(b[k], 2 * n + e)));
                std::memcpy(c[m] + 4 * n, &acc, 4);
            }
        ++state().products;
    }

private:
    template <class T>
    static T read(const std::uint8_t* row, int i) {
        T v;
        std::memcpy(&v, row + i * static_cast<int>(sizeof(T)), sizeof(T));
        return v;
    }
    static float widen(std::uint16_t h) {
        if ((h & 0x7f80u) == 0) h &= 0x8000u;  // DAZ
        const std::uint32_t bits = std::uint32_t{h} << 16;
        float f;
        std::memcpy(&f, &bits, 4);
        return f;
    }
    static float flush(float f) { return std::fpclassify(f) == FP_SUBNORMAL ? std::copysign(0.0f, f) : f; }
};

}  // namespace cpx::testing
#endif
