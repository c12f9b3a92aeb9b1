#pragma once
// Prefill-sized products on a weight as stored (Compute::fp32, no packed copy) through the
// packed fp32 kernel (gemm_f32_packed.hpp), the weight packed during the call: a chunk of its
// output panels at a time into the caller's scratch, every thread packing some of the chunk's
// panels, then every thread multiplying them. Eigen's GEMM packs its operands on every call too;
// its AVX2 register tile ran a 2048 x 768 x 768 product at 53 GFLOP/s on one Zen 3 core where
// the packed tile ran at 90 (docs/BF16.md "fp32 on stored weights").
//
// The chunk (at most chunk_floats values, whole panels, at least one per thread) bounds the
// scratch: a 32000-output head would need 98 MB packed whole. Each panel is packed by
// fp32_panels::pack_panel (cpu/kernels/packed_panels.hpp), the packing of every fp32 panel.
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
            fp32_panels::pack_panel(w, out_in, p0 + p, layout, buffer.data() + p * panel_floats);
        });
        const index_t first = p0 * packed_panel_cols, outputs = std::min(count * packed_panel_cols, n - first);
        gemm_f32_packed(x, PackedPanelsView<float>(buffer.data(), outputs, k, k, layout), y.columns(first, outputs),
                        accumulate);
    }
}

}  // namespace cpx::cpu
