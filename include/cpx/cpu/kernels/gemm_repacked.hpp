#pragma once
// Prefill-sized products on a weight as stored (Compute::fp32, no packed copy) through the
// packed fp32 kernel (gemm_f32_packed.hpp), the weight packed during the call: a chunk of its
// output panels at a time into the caller's scratch, every thread packing some of the chunk's
// panels, then every thread multiplying them. Eigen's GEMM packs its operands on every call too;
// its AVX2 register tile ran a 2048 x 768 x 768 product at 53 GFLOP/s on one Zen 3 core where
// the packed tile ran at 90 (docs/BF16.md "fp32 on stored weights").
//
// The chunk (at most chunk_floats values, whole panels, at least one per thread) bounds the
// scratch: a 32000-output head would need 98 MB packed whole. Packing reads each weight row in
// runs of 16 inputs, one cache line of fp32 values, and writes them across the panel's lines,
// which stay in L1: packing by input, one value of each of 64 rows 8 KiB apart, evicted its own
// lines (the 64 rows fall into one set of L1): a 768 x 2048 weight took 6.2 ms, in runs 0.7-1.5.
//
// fp32 or bf16 weights (bf16 widened exactly into fp32 panels), nn.Linear [N, K] or input-major
// [K, N]; the same sums as the packed fp32 product on a packed copy of the weight, so results
// agree with Eigen's to fp32 rounding, not bit for bit.

#include <algorithm>
#include <cstddef>
#include <type_traits>

#include "cpx/core/dtype.hpp"
#include "cpx/cpu/kernels/gemm_f32_packed.hpp"
#include "cpx/cpu/kernels/packed_panels.hpp"
#include "cpx/cpu/runtime/aligned_buffer.hpp"
#include "cpx/cpu/runtime/parallel.hpp"
#include "cpx/cpu/runtime/strided.hpp"
#include "cpx/cpu/runtime/vector_isa.hpp"

namespace cpx::cpu {

/// Rows from which a product on a stored weight packs it and runs the packed fp32 kernel (fewer:
/// decode's kernels, cpu/kernels/linear.hpp). Outputs below one panel stay with Eigen (a learned
/// router's few experts would fill a 64-column tile with padding).
inline constexpr index_t repack_min_rows = 64;

/// Scratch values per chunk of packed panels by default: 4 MiB.
inline constexpr std::size_t repack_chunk_floats = std::size_t{1} << 20;

/// Whether x . B with `rows` rows and `outputs` outputs runs through gemm_repacked on this machine now.
inline bool repack_pays(index_t rows, index_t outputs) {
    return rows >= repack_min_rows && outputs >= packed_panel_cols && vector_isa() != VectorIsa::portable &&
           gemm_f32_packed_available();
}

namespace repack_detail {
/// dst[(k - k0) * width + c] = B[k, n0 + c] for k in [k0, k0 + kn), c < cols; 0 for cols <= c < width.
/// B[k, n] is w[n, k] (out_in) or w[k, n].
template <class W>
void pack_run(const StridedMatrix<const W>& w, bool out_in, index_t n0, index_t cols, index_t k0, index_t kn,
              index_t width, float* dst) {
    if (!out_in) {  // each input's outputs are adjacent in w
        for (index_t k = 0; k < kn; ++k) {
            const W* src = w.row(k0 + k) + n0;
            float* d = dst + k * width;
            for (index_t c = 0; c < cols; ++c) d[c] = to_float(src[c]);
            std::fill(d + cols, d + width, 0.0f);
        }
        return;
    }
    constexpr index_t run = 16;  // inputs per read of a weight row: a line of fp32 values
    for (index_t kk = 0; kk < kn; kk += run) {
        const index_t live = std::min(run, kn - kk);
        float* d = dst + kk * width;
        for (index_t c = 0; c < cols; ++c) {
            const W* src = w.row(n0 + c) + k0 + kk;
            for (index_t i = 0; i < live; ++i) d[i * width + c] = to_float(src[i]);
        }
        if (cols < width)
            for (index_t i = 0; i < live; ++i) std::fill(d + i * width + cols, d + (i + 1) * width, 0.0f);
    }
}

/// Packs panel `panel` of B ([K, N] as above) at dst, as PackedPanels<float> lays it out with
/// stride_groups = K (the formulas in packed_panels.hpp).
template <class W>
void pack_panel(const StridedMatrix<const W>& w, bool out_in, index_t panel, PanelLayout layout, float* dst) {
    const index_t n = out_in ? w.rows : w.cols, k = out_in ? w.cols : w.rows;
    const index_t n0 = panel * packed_panel_cols, cols = std::min(packed_panel_cols, n - n0);
    if (layout == PanelLayout::rows) return pack_run(w, out_in, n0, cols, 0, k, packed_panel_cols, dst);
    for (index_t b0 = 0; b0 < k; b0 += strip_block_inputs) {
        const index_t bg = std::min(strip_block_inputs, k - b0);
        for (index_t s = 0; s < packed_panel_cols / strip_cols; ++s)
            pack_run(w, out_in, n0 + s * strip_cols, std::clamp<index_t>(cols - s * strip_cols, 0, strip_cols), b0,
                     bg, strip_cols, dst + b0 * packed_panel_cols + s * bg * strip_cols);
    }
}
}  // namespace repack_detail

/// y (=|+=) x . B with B = w^T (orientation out_in, w [N, K]) or w (in_out, w [K, N]), w fp32 or
/// bf16 as stored, through the packed fp32 kernel: chunks of whole panels of at most
/// `chunk_floats` values (at least one panel per thread) packed into `buffer`, then multiplied.
/// Needs gemm_f32_packed_available(); shapes checked by the caller (cpu/kernels/linear.hpp).
template <class W>
void gemm_repacked(const StridedMatrix<const float>& x, const StridedMatrix<const W>& w, WeightOrientation orientation,
                   const StridedMatrix<float>& y, bool accumulate, AlignedVector<float>& buffer,
                   std::size_t chunk_floats = repack_chunk_floats) {
    static_assert(std::is_same_v<W, float> || std::is_same_v<W, bf16>, "gemm_repacked reads fp32 or bf16 weights");
    const bool out_in = orientation == WeightOrientation::out_in;
    const index_t n = out_in ? w.rows : w.cols, k = out_in ? w.cols : w.rows;
    if (x.rows == 0 || n == 0) return;
    const PanelLayout layout = fp32_panel_layout();
    const index_t panel_floats = packed_panel_cols * std::max<index_t>(k, 1);
    const index_t panels = (n + packed_panel_cols - 1) / packed_panel_cols;
    const index_t chunk = std::min(
        panels, std::max<index_t>(max_threads(), static_cast<index_t>(chunk_floats) / panel_floats));
    if (buffer.size() < static_cast<std::size_t>(chunk * panel_floats))
        buffer.assign(static_cast<std::size_t>(chunk * panel_floats), 0.0f);
    for (index_t p0 = 0; p0 < panels; p0 += chunk) {
        const index_t count = std::min(chunk, panels - p0);
        parallel_for(count, count > 1 && count * panel_floats > 65536, [&](index_t p) {
            repack_detail::pack_panel(w, out_in, p0 + p, layout, buffer.data() + p * panel_floats);
        });
        const index_t first = p0 * packed_panel_cols, outputs = std::min(count * packed_panel_cols, n - first);
        gemm_f32_packed(x, PackedPanelsView<float>(buffer.data(), outputs, k, k, layout), y.columns(first, outputs),
                        accumulate);
    }
}

}  // namespace cpx::cpu
