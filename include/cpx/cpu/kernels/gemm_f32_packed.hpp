#pragma once
// y (= | +=) x . B in fp32 with B packed once at load into fp32 panels
// (cpu/kernels/packed_panels.hpp) and a register-blocked micro-kernel, AVX-512
// (cpu/kernels/gemm_f32_avx512.hpp) or AVX2 (cpu/kernels/gemm_f32_avx2.hpp) as
// vector_isa() allows: the product Eigen's GEMM computes, without Eigen's per-call
// packing of B and with the register tile written for the machine. Summation
// order differs from Eigen's, so results agree to fp32 rounding, not bit for bit.
// Blocking and threads: cpu/kernels/panel_gemm.hpp, with input blocks of 1024 values.
//
// B may also be bf16 panels of a weight stored in bf16 (Compute::fp32_packed on bf16
// weights): widened exactly in the kernel, the same fp32 product of the same values
// from half the bytes.
//
// Needs AVX2 and FMA at least at run time; elsewhere callers keep Eigen
// (gemm_f32_packed_available() says which).

#include <algorithm>
#include <limits>
#include <type_traits>
#include <utility>

#include "cpx/core/error.hpp"
#include "cpx/cpu/runtime/cpu_features.hpp"
#include "cpx/cpu/kernels/gemm_f32_avx2.hpp"
#include "cpx/cpu/kernels/gemm_f32_avx512.hpp"
#include "cpx/cpu/kernels/packed_panels.hpp"
#include "cpx/cpu/kernels/panel_gemm.hpp"
#include "cpx/cpu/runtime/parallel.hpp"
#include "cpx/cpu/runtime/strided.hpp"
#include "cpx/cpu/runtime/vector_isa.hpp"

namespace cpx::cpu {

namespace gemm_f32_detail {
/// Inputs per block (panel_gemm.hpp): a panel's block is 64 columns x 1024 x 4 bytes = 256 KiB,
/// read from L2 (four loads per 24 FMAs, which L2 sustains). Against L1-sized blocks (128
/// inputs), which loaded and stored each tile's accumulators eight times as often, whole-model
/// prefill took 4-11% less time on one thread (Zen 5, alternated binaries). The AVX2 tile
/// (Zen 3) ran no faster with blocks of 256 or 512 inputs.
inline constexpr index_t block_depth = 1024;
static_assert(block_depth == strip_block_inputs, "a block of PanelLayout::strips is one input block of the product");
}  // namespace gemm_f32_detail

#if defined(CPX_HAVE_GEMM_F32_AVX512) && defined(CPX_HAVE_GEMM_F32_AVX2)
#define CPX_HAVE_GEMM_F32_PACKED 1
#endif

/// Whether this machine can run gemm_f32_packed (AVX2 and FMA, or AVX-512).
inline bool gemm_f32_packed_available() {
#ifdef CPX_HAVE_GEMM_F32_PACKED
    return cpu_features().avx512f || cpu_features().avx2;
#else
    return false;
#endif
}

namespace gemm_f32_detail {
#ifdef CPX_HAVE_GEMM_F32_PACKED
/// The two micro-kernels behind one interface. `passes(rows)`: how many times a tile of that
/// many rows walks its input steps (the AVX2 tile once per column strip), over which its
/// prefetches spread; `single_tile_ahead`: panel_gemm::thread_share's argument of that name.
/// Each reads panel p of b from input group g; the AVX-512 kernel rows only, the AVX2 one both layouts.
struct Avx512Kernel {
    static constexpr int tile_rows = avx512_f32::tile_rows;
    static constexpr index_t passes(int) { return 1; }
    static constexpr index_t single_tile_ahead = std::numeric_limits<index_t>::max();
    template <class T, class... A>
    static void tile_rows_n(int rows, const float* a, index_t lda, PackedPanelsView<T> b, index_t p, index_t g,
                            A&&... rest) {
        avx512_f32::tile_rows_n(rows, a, lda, b.panel(p, g), std::forward<A>(rest)...);
    }
    template <class T, class... A>
    static void tile_bf16_rows_n(int rows, const float* a, index_t lda, PackedPanelsView<T> b, index_t p, index_t g,
                                 A&&... rest) {
        avx512_f32::tile_bf16_rows_n(rows, a, lda, b.panel(p, g), std::forward<A>(rest)...);
    }
};
struct Avx2Kernel {
    static constexpr int tile_rows = avx2_f32::tile_rows;
    static constexpr index_t passes(int rows) { return avx2_f32::passes(rows); }
    static constexpr index_t single_tile_ahead = avx2_f32::single_tile_ahead;
    template <class T, class... A>
    static void tile_rows_n(int rows, const float* a, index_t lda, PackedPanelsView<T> b, index_t p, index_t g,
                            A&&... rest) {
        avx2_f32::tile_rows_n(rows, a, lda, b.panel(p, g), PanelStrides::of(b, g), std::forward<A>(rest)...);
    }
    template <class T, class... A>
    static void tile_bf16_rows_n(int rows, const float* a, index_t lda, PackedPanelsView<T> b, index_t p, index_t g,
                                 A&&... rest) {
        avx2_f32::tile_bf16_rows_n(rows, a, lda, b.panel(p, g), PanelStrides::of(b, g),
                                   std::forward<A>(rest)...);
    }
};

/// The loop nest of both micro-kernels on `threads` threads (checked shapes, nonempty).
template <class Kernel, class T>
void run(const StridedMatrix<const float>& x, PackedPanelsView<T> b, const StridedMatrix<float>& y, bool accumulate,
         int threads) {
    static_assert(Kernel::tile_rows == avx512_f32::tile_rows, "panel_gemm's row blocks assume one tile height");
    constexpr index_t group = PackedPanelsView<T>::group;
    const index_t m = x.rows, n = b.outputs(), inputs = b.inputs(), depth = b.groups(), panels = b.panels();
    RangeClaims claims(panels, threads);
    parallel_team(threads, [&](int t, int team) {
        panel_gemm::thread_share(
            t, team, m, panels, depth, block_depth / group, Kernel::tile_rows, claims,
            [&](index_t r, int rows, index_t p, index_t g, index_t gn, bool first_block,
                const panel_gemm::Lookahead& next) {
                const index_t cols = std::min(packed_panel_cols, n - p * packed_panel_cols);
                const bool load_c = accumulate || !first_block;
                const avx512_tile::Prefetcher ahead(b, next, gn * Kernel::passes(rows));
                if constexpr (std::is_same_v<T, float>) {
                    Kernel::tile_rows_n(rows, x.row(r) + g, x.ld, b, p, g, gn, y.row(r) + p * packed_panel_cols, y.ld,
                                        cols, load_c, ahead);
                } else {  // an odd K leaves the last pair half: x has no input past the row
                    const bool half_last = g + gn == depth && inputs % 2 != 0;
                    Kernel::tile_bf16_rows_n(rows, x.row(r) + 2 * g, x.ld, b, p, g, gn, half_last,
                                             y.row(r) + p * packed_panel_cols, y.ld, cols, load_c, ahead);
                }
            },
            Kernel::single_tile_ahead);
    });
}
#endif

/// Both panel types: T = float (fp32 panels) or bf16 (bf16 panels of a bf16 weight, widened).
template <class T>
void product(const StridedMatrix<const float>& x, PackedPanelsView<T> b, const StridedMatrix<float>& y, bool accumulate,
             int max_team) {
    require<ShapeError>(x.cols == b.inputs(), "gemm_f32_packed: input rows have ", x.cols,
                        " features, the weight expects ", b.inputs());
    require<ShapeError>(y.rows == x.rows && y.cols == b.outputs(), "gemm_f32_packed: output is [", y.rows, ", ",
                        y.cols, "], expected [", x.rows, ", ", b.outputs(), "]");
    require<InputError>(gemm_f32_packed_available(),
                        "gemm_f32_packed needs AVX2 and FMA or AVX-512, which this machine lacks (",
                        cpu_features().summary(), ")");
    const index_t m = x.rows, n = b.outputs(), inputs = b.inputs();
    if (m == 0 || n == 0) return;
    if (inputs == 0) {
        if (!accumulate)
            for (index_t r = 0; r < m; ++r) std::fill(y.row(r), y.row(r) + n, 0.0f);
        return;
    }
#ifdef CPX_HAVE_GEMM_F32_PACKED
    const int threads = std::min(max_team > 0 ? max_team : max_threads(), panel_gemm::threads_for(m, n, inputs));
    // Panels in strips (packed where the level was AVX2) run on the AVX2 kernel whatever the level now.
    if (vector_isa() == VectorIsa::avx512 && b.layout() == PanelLayout::rows)
        run<Avx512Kernel>(x, b, y, accumulate, threads);
    else
        run<Avx2Kernel>(x, b, y, accumulate, threads);
#else
    (void)max_team;
#endif
}
}  // namespace gemm_f32_detail

/// y (=|+=) x . B (accumulate: add to y). x [M, K], B packed [K, N], y [M, N]; x and y may be
/// strided. `max_team`: at most this many threads (0: as many as pay; 1 from inside a parallel
/// region). Throws ShapeError on mismatched shapes, InputError where neither AVX2 nor AVX-512 is present.
inline void gemm_f32_packed(const StridedMatrix<const float>& x, PackedPanelsView<float> b, const StridedMatrix<float>& y,
                            bool accumulate, int max_team = 0) {
    gemm_f32_detail::product(x, b, y, accumulate, max_team);
}

/// The same fp32 product with B's values stored as bf16 panels (a weight stored in bf16): each
/// value widened exactly, so the result is the fp32 product of the stored values, reading half
/// the bytes of fp32 panels. x is read in place; K may be odd.
inline void gemm_f32_packed(const StridedMatrix<const float>& x, PackedPanelsView<bf16> b, const StridedMatrix<float>& y,
                            bool accumulate, int max_team = 0) {
    gemm_f32_detail::product(x, b, y, accumulate, max_team);
}

}  // namespace cpx::cpu

// Both panel types' products, declared extern with CPX_EXTERN_KERNELS and defined by
// cpu/kernel_instances.hpp, as CPX_LINEAR_INSTANCES in cpu/kernels/linear.hpp.
#define CPX_GEMM_F32_PACKED_INSTANCE(extern_, T)                                                         \
    extern_ template void cpx::cpu::gemm_f32_detail::product<T>(                                         \
        const cpx::StridedMatrix<const float>&, cpx::cpu::PackedPanelsView<T>, const cpx::StridedMatrix<float>&, \
        bool, int);
#define CPX_GEMM_F32_PACKED_INSTANCES(extern_) \
    CPX_GEMM_F32_PACKED_INSTANCE(extern_, float) CPX_GEMM_F32_PACKED_INSTANCE(extern_, cpx::bf16)
#ifdef CPX_EXTERN_KERNELS
CPX_GEMM_F32_PACKED_INSTANCES(extern)
#endif
