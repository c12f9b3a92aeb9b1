#pragma once
// y (= | +=) x . B in bf16 arithmetic: x's fp32 rows rounded to bf16 once per
// call, B packed once at load (cpu/kernels/packed_panels.hpp), products summed in fp32,
// y fp32. This is what bf16 autocast does on other engines; its error is that
// of rounding both operands to 8 significant bits (docs/BF16.md).
//
// Levels, chosen at run time from cpu_features():
//   amx          AMX tiles (cpu/kernels/gemm_bf16_amx.hpp), where the CPU has AMX-BF16 and
//                the OS grants this process the tile state
//   avx512_bf16  vdpbf16ps micro-kernel (cpu/kernels/gemm_bf16_avx512.hpp)
//   widened      no bf16 instructions but AVX2 and FMA (or AVX-512F): x rounded to bf16
//                as above, then both operands widened exactly to fp32 and multiplied
//                with fp32 FMAs (the packed fp32 product, cpu/kernels/gemm_f32_packed.hpp,
//                on the same bf16 panels): the same products of the same bf16 values,
//                summed in fp32, at the machine's fp32 rate
//   none         neither: callers keep the fp32 path
// A level can be forced per call, so one process can compare every level it has.
//
// Blocking and threads: cpu/kernels/panel_gemm.hpp, with input blocks of 512 pairs.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string_view>

#include "cpx/core/error.hpp"
#include "cpx/cpu/runtime/aligned_buffer.hpp"
#include "cpx/cpu/runtime/compute.hpp"
#include "cpx/cpu/runtime/cpu_features.hpp"
#include "cpx/cpu/kernels/gemm_bf16_amx.hpp"
#include "cpx/cpu/kernels/gemm_bf16_avx512.hpp"
#include "cpx/cpu/kernels/gemm_f32_packed.hpp"
#include "cpx/cpu/kernels/packed_panels.hpp"
#include "cpx/cpu/kernels/panel_gemm.hpp"
#include "cpx/cpu/runtime/parallel.hpp"
#include "cpx/cpu/runtime/strided.hpp"
#include "cpx/cpu/runtime/workspace.hpp"

namespace cpx::cpu {

enum class Bf16Level : std::uint8_t { none, widened, avx512_bf16, amx };

constexpr std::string_view bf16_level_name(Bf16Level l) {
    switch (l) {
        case Bf16Level::amx: return "amx";
        case Bf16Level::avx512_bf16: return "avx512_bf16";
        case Bf16Level::widened: return "widened";
        default: return "none";
    }
}

/// Whether this machine (CPU and OS) can run `level`.
inline bool bf16_level_available(Bf16Level level) {
    switch (level) {
        case Bf16Level::none: return true;
        case Bf16Level::widened: return gemm_f32_packed_available();
#ifdef CPX_HAVE_GEMM_BF16_AVX512
        case Bf16Level::avx512_bf16: return cpu_features().avx512_bf16;
#endif
#ifdef CPX_HAVE_GEMM_BF16_AMX
        // Its input tails run on vdpbf16ps (gemm_bf16_amx.hpp).
        case Bf16Level::amx: return cpu_features().amx_permitted && cpu_features().avx512_bf16;
#endif
        default: return false;
    }
}

/// The fastest bf16 level this machine has (none: use fp32 arithmetic).
inline Bf16Level best_bf16_level() {
    for (Bf16Level l : {Bf16Level::amx, Bf16Level::avx512_bf16, Bf16Level::widened})
        if (bf16_level_available(l)) return l;
    return Bf16Level::none;
}

/// x rounded to bf16, reused across calls so that steady-state calls allocate nothing: as bf16
/// for the bf16 instructions, as the same values in fp32 for the widened level.
class Bf16Scratch {
public:
    std::uint16_t* rows(index_t m, index_t ld) { return grow(buffer_, static_cast<std::size_t>(m * ld)); }
    float* widened_rows(index_t m, index_t ld) { return grow(widened_, static_cast<std::size_t>(m * ld)); }
    std::size_t bytes() const { return buffer_.size() * sizeof(std::uint16_t) + widened_.size() * sizeof(float); }
    /// Grows to at least `other`'s capacity.
    void reserve_like(const Bf16Scratch& other) {
        grow(buffer_, other.buffer_.size());
        grow(widened_, other.widened_.size());
    }

private:
    AlignedVector<std::uint16_t> buffer_;
    AlignedVector<float> widened_;
};

namespace gemm_bf16_detail {
/// Input pairs per block (panel_gemm.hpp): a panel's block is 64 columns x 2 x 512 x 2 bytes =
/// 128 KiB, read from L2. Against L1-sized blocks (128 pairs), which loaded and stored each
/// tile's accumulators four times as often, whole-model prefill took 0-9% less time (Zen 5,
/// alternated binaries).
inline constexpr index_t block_pairs = 512;
#ifdef CPX_HAVE_GEMM_BF16_AMX
static_assert(block_pairs % amx::chunk_pairs == 0, "AMX tiles take whole chunks of every block but the last");
#endif
}  // namespace gemm_bf16_detail

#ifdef CPX_HAVE_GEMM_BF16_AVX512
namespace gemm_bf16_detail {
/// Whether an m-row product at the AMX level runs on the tiles: products of at most
/// amx::vector_max_rows rows (decode) take the vdpbf16ps micro-kernel instead, and their inputs
/// are rounded and padded for it.
inline bool on_amx_tiles(bool amx, [[maybe_unused]] index_t m) {
#ifdef CPX_HAVE_GEMM_BF16_AMX
    return amx && m > cpx::cpu::amx::vector_max_rows;
#else
    return amx;  // tile_rows_of refuses it
#endif
}

/// Rows of A per tile of the level's kernel; A is read in whole tiles (AMX loads 16-row tiles).
inline int tile_rows_of(bool amx) {
#ifdef CPX_HAVE_GEMM_BF16_AMX
    return amx ? cpx::cpu::amx::tile_rows : avx512_bf16::tile_rows;
#else
    if (amx) throw InputError("gemm_bf16: this build has no AMX kernel");
    return avx512_bf16::tile_rows;
#endif
}

/// Rows of A an m-row product reads (`amx`: on the tiles, on_amx_tiles): m up to whole tiles of
/// the kernel that runs it, the micro-kernel's 6 rows, one 16-row A tile for up to 16 rows (AMX's
/// tile_16x64), else 32-row tiles.
inline index_t padded_rows(index_t m, bool amx) {
#ifdef CPX_HAVE_GEMM_BF16_AMX
    if (amx && m <= cpx::cpu::amx::half_tile_rows) return cpx::cpu::amx::half_tile_rows;
#endif
    const index_t tile = tile_rows_of(amx);
    return (m + tile - 1) / tile * tile;
}

/// Thread t of `team`'s share of y (=|+=) a . B: a holds the inputs rounded to bf16, rows lda
/// values apart, m rows up to whole tiles (the rows past m zero).
template <class AmxIsa>
void tiles(int t, int team, const std::uint16_t* a, index_t lda, index_t m, PackedPanelsView<bf16> b,
           const StridedMatrix<float>& y, bool accumulate, [[maybe_unused]] bool amx,
           RangeClaims& claims) {
    namespace k = avx512_bf16;
    const index_t n = b.outputs(), pairs = b.groups(), panels = b.panels();
    const auto cols_of = [&](index_t p) { return std::min(packed_panel_cols, n - p * packed_panel_cols); };
#ifdef CPX_HAVE_GEMM_BF16_AMX
    if (amx) {
        static constexpr cpx::cpu::amx::TileConfig config = cpx::cpu::amx::full_tiles();
        AmxIsa::configure(config);
        panel_gemm::thread_share(t, team, m, panels, pairs, block_pairs, cpx::cpu::amx::tile_rows, claims,
                                 [&](index_t r, int rows_n, index_t p, index_t g, index_t gn, bool first_block,
                                     const panel_gemm::Lookahead&) {
                                     cpx::cpu::amx::tile_rows_n<AmxIsa>(
                                         rows_n, a + r * lda + 2 * g, lda, b.panel(p, g), PanelStrides::of(b, g), gn,
                                         y.row(r) + p * packed_panel_cols, y.ld, cols_of(p),
                                         accumulate || !first_block);
                                 },
                                 std::numeric_limits<index_t>::max(), cpx::cpu::amx::row_tile_panels);
        AmxIsa::release();
        return;
    }
#endif
    panel_gemm::thread_share(t, team, m, panels, pairs, block_pairs, k::tile_rows, claims,
                             [&](index_t r, int rows_n, index_t p, index_t g, index_t gn, bool first_block,
                                 const panel_gemm::Lookahead& next) {
                                 k::tile_rows_n(rows_n, a + r * lda + 2 * g, lda, b.panel(p, g),
                                                PanelStrides::of(b, g), gn,
                                                y.row(r) + p * packed_panel_cols, y.ld, cols_of(p),
                                                accumulate || !first_block, avx512_tile::Prefetcher(b, next, gn));
                             });
}

/// The product of gemm_bf16 (shapes checked, m, n, pairs > 0) on AMX tiles (`amx`, issued by
/// `AmxIsa`: amx::Hardware, or the tests' model of the tile registers) or on the
/// AVX512_BF16 micro-kernel.
template <class AmxIsa>
void product(const StridedMatrix<const float>& x, PackedPanelsView<bf16> b, const StridedMatrix<float>& y,
             bool accumulate, Bf16Scratch& scratch, bool amx, int max_team) {
    namespace k = avx512_bf16;
    const index_t m = x.rows, n = b.outputs(), pairs = b.groups();
    amx = on_amx_tiles(amx, m);
    const index_t lda = (2 * pairs + 31) / 32 * 32;  // rows start on cache lines
    const index_t rows = padded_rows(m, amx);  // the kernels read whole tiles of A
    std::uint16_t* a = scratch.rows(rows, lda);
    const int threads = std::min(max_team > 0 ? max_team : max_threads(), panel_gemm::threads_for(m, n, 2 * pairs));
    RangeClaims claims(b.panels(), threads);
    parallel_team(threads, [&](int t, int team) {
        for_share(rows, t, team, [&](index_t r) {
            if (r >= m) {
                std::fill_n(a + r * lda, lda, std::uint16_t{0});
                return;
            }
            k::round_to_bf16(x.row(r), x.cols, a + r * lda);
            if (x.cols % 2) a[r * lda + x.cols] = 0;  // the pad input meets B's zero row: keep it finite
        });
        team_barrier(team);
        tiles<AmxIsa>(t, team, a, lda, m, b, y, accumulate, amx, claims);
    });
}

/// gemm_bf16_rounded's product (arguments checked, m, n, pairs > 0).
template <class AmxIsa>
void product_rounded(const std::uint16_t* a, index_t lda, index_t m, PackedPanelsView<bf16> b,
                     const StridedMatrix<float>& y, bool accumulate, bool amx, int max_team) {
    amx = on_amx_tiles(amx, m);
    const int threads =
        std::min(max_team > 0 ? max_team : max_threads(), panel_gemm::threads_for(m, b.outputs(), 2 * b.groups()));
    RangeClaims claims(b.panels(), threads);
    parallel_team(threads, [&](int t, int team) { tiles<AmxIsa>(t, team, a, lda, m, b, y, accumulate, amx, claims); });
}
}  // namespace gemm_bf16_detail
#endif

namespace gemm_bf16_detail {
#ifdef CPX_HAVE_GEMM_BF16_AVX512
/// What issues gemm_bf16's AMX tile instructions: the hardware where the compiler has them.
#ifdef CPX_HAVE_GEMM_BF16_AMX
using HardwareAmx = amx::Hardware;
#else
using HardwareAmx = void;
#endif
#endif

/// The widened level's product (shapes checked, m, n, pairs > 0): x's rows rounded to bf16
/// values (kept in fp32, where an odd K's pad input simply does not exist), then the packed
/// fp32 product on B's bf16 panels, which widens each value exactly.
inline void widened_product(const StridedMatrix<const float>& x, PackedPanelsView<bf16> b,
                            const StridedMatrix<float>& y, bool accumulate, Bf16Scratch& scratch, int max_team) {
    const index_t m = x.rows, k = x.cols;
    const index_t ld = (k + 15) / 16 * 16;  // rows start on cache lines
    float* a = scratch.widened_rows(m, ld);
    const int threads = std::min(max_team > 0 ? max_team : max_threads(), panel_gemm::threads_for(m, b.outputs(), k));
    parallel_for(m, threads > 1, [&](index_t r) {
        const float* in = x.row(r);
        float* out = a + r * ld;
        for (index_t c = 0; c < k; ++c) out[c] = rounded_to<bf16>(in[c]);
    });
    gemm_f32_packed(StridedMatrix<const float>{a, m, k, ld}, b, y, accumulate, max_team);
}
}  // namespace gemm_bf16_detail

/// y (=|+=) x . B (accumulate: add to y). x [M, K] fp32, B packed [K, N], y [M, N] fp32;
/// x and y may be strided. `max_team`: at most this many threads (0: as many as pay; 1 from
/// inside a parallel region). Every level reads B in either layout (bf16_panel_layout). Throws
/// ShapeError on mismatched shapes and InputError when `level` is none or not available on this
/// machine.
inline void gemm_bf16(const StridedMatrix<const float>& x, PackedPanelsView<bf16> b, const StridedMatrix<float>& y,
                      bool accumulate, Bf16Scratch& scratch, Bf16Level level = best_bf16_level(), int max_team = 0) {
    require<ShapeError>(x.cols == b.inputs(), "gemm_bf16: input rows have ", x.cols, " features, the weight expects ",
                        b.inputs());
    require<ShapeError>(y.rows == x.rows && y.cols == b.outputs(), "gemm_bf16: output is [", y.rows, ", ", y.cols,
                        "], expected [", x.rows, ", ", b.outputs(), "]");
    require<InputError>(level != Bf16Level::none && bf16_level_available(level), "gemm_bf16: level ",
                        bf16_level_name(level), " is not available on this machine (",
                        cpu_features().summary(), ")");
    const index_t m = x.rows, n = b.outputs(), pairs = b.groups();
    if (m == 0 || n == 0) return;
    if (pairs == 0) {  // K = 0: the product is zero
        if (!accumulate)
            for (index_t r = 0; r < m; ++r) std::fill(y.row(r), y.row(r) + n, 0.0f);
        return;
    }
    if (level == Bf16Level::widened) return gemm_bf16_detail::widened_product(x, b, y, accumulate, scratch, max_team);
#ifdef CPX_HAVE_GEMM_BF16_AVX512
    gemm_bf16_detail::product<gemm_bf16_detail::HardwareAmx>(x, b, y, accumulate, scratch, level == Bf16Level::amx,
                                                             max_team);
#else
    (void)scratch;
    (void)max_team;
#endif
}

/// Rows of rounded inputs that gemm_bf16_rounded reads for an m-row product at `level`
/// (avx512_bf16 or amx): m up to whole tiles of the kernel that runs it (6, 16 or 32 rows).
inline index_t bf16_rounded_rows([[maybe_unused]] index_t m, [[maybe_unused]] Bf16Level level) {
#ifdef CPX_HAVE_GEMM_BF16_AVX512
    return gemm_bf16_detail::padded_rows(m, gemm_bf16_detail::on_amx_tiles(level == Bf16Level::amx, m));
#else
    throw InputError("gemm_bf16_rounded: this build has no bf16 kernel");
#endif
}

/// gemm_bf16 for inputs the caller has already rounded to bf16 (attention's softmax writes its
/// probabilities so, sparing the product a pass over them): y (=|+=) a . B with a the bf16 bits
/// of x, bf16_rounded_rows(m, level) rows lda values apart. Rows past m must be zero, as must
/// the pad input (column K) of an odd K; lda even, at least 2 * B.groups(). `level`: avx512_bf16
/// or amx, available on this machine (the widened level has no bf16 inputs).
inline void gemm_bf16_rounded(const std::uint16_t* a, index_t lda, index_t m, PackedPanelsView<bf16> b,
                              const StridedMatrix<float>& y, bool accumulate, Bf16Level level,
                              [[maybe_unused]] int max_team = 0) {
    require<InputError>((level == Bf16Level::avx512_bf16 || level == Bf16Level::amx) && bf16_level_available(level),
                        "gemm_bf16_rounded: level ", bf16_level_name(level),
                        " has no bf16 inputs or is not available on this machine (", cpu_features().summary(), ")");
    require<ShapeError>(lda % 2 == 0 && lda >= 2 * b.groups(), "gemm_bf16_rounded: rows ", lda,
                        " values apart cannot hold ", b.inputs(), " inputs in pairs");
    require<ShapeError>(m >= 0 && y.rows == m && y.cols == b.outputs(), "gemm_bf16_rounded: output is [", y.rows,
                        ", ", y.cols, "], expected [", m, ", ", b.outputs(), "]");
    if (m == 0 || b.outputs() == 0) return;
    if (b.groups() == 0) {
        if (!accumulate)
            for (index_t r = 0; r < m; ++r) std::fill(y.row(r), y.row(r) + y.cols, 0.0f);
        return;
    }
#ifdef CPX_HAVE_GEMM_BF16_AVX512
    gemm_bf16_detail::product_rounded<gemm_bf16_detail::HardwareAmx>(a, lda, m, b, y, accumulate,
                                                                     level == Bf16Level::amx, max_team);
#else
    (void)a;
#endif
}

}  // namespace cpx::cpu

// The AVX512_BF16/AMX product on the hardware, declared extern with CPX_EXTERN_KERNELS and defined
// by cpu/kernel_instances.hpp, as CPX_LINEAR_INSTANCES in cpu/kernels/linear.hpp.
#ifdef CPX_HAVE_GEMM_BF16_AVX512
#define CPX_GEMM_BF16_INSTANCES(extern_)                                                                        \
    extern_ template void cpx::cpu::gemm_bf16_detail::product<cpx::cpu::gemm_bf16_detail::HardwareAmx>(         \
        const cpx::StridedMatrix<const float>&, cpx::cpu::PackedPanelsView<cpx::bf16>,                          \
        const cpx::StridedMatrix<float>&, bool, cpx::cpu::Bf16Scratch&, bool, int);                             \
    extern_ template void cpx::cpu::gemm_bf16_detail::product_rounded<cpx::cpu::gemm_bf16_detail::HardwareAmx>( \
        const std::uint16_t*, cpx::index_t, cpx::index_t, cpx::cpu::PackedPanelsView<cpx::bf16>,                \
        const cpx::StridedMatrix<float>&, bool, bool, int);
#else
#define CPX_GEMM_BF16_INSTANCES(extern_)
#endif
#ifdef CPX_EXTERN_KERNELS
CPX_GEMM_BF16_INSTANCES(extern)
#endif
