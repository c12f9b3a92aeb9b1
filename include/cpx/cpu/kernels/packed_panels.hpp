#pragma once
// A weight matrix repacked once, at load, into the layout our register-blocked
// product kernels read: B of y = x . B with B [K, N] (K inputs, N outputs),
// cut into panels of `panel_cols` output columns; inside a panel, each group
// of G consecutive inputs of the panel's columns is one contiguous run of
// panel_cols x G values:
//
//   packed[((panel * groups + k / G) * panel_cols + n % panel_cols) * G + k % G] = B[k, n]
//
// G is the number of values one 32-bit lane of the kernel's multiply-add
// consumes: 2 for bf16 (vdpbf16ps multiplies two consecutive k of one column
// per lane; an AMX B tile has the same rows of k pairs x 16 columns), 1 for
// fp32 (vfmadd231ps). A 512-bit load is then 16 columns x G inputs. K is padded
// to whole groups and N to whole panels with zeros, so kernels need no tails
// in K or inside a panel.
//
// The source may be fp32 or bf16, in nn.Linear layout [N, K] or input-major
// layout [K, N]; to bf16 rounds to nearest even, everything else is exact.
//
// PanelLayout::strips reorders each panel for the AVX2 fp32 kernel (gemm_f32_avx2.hpp),
// which walks a panel in 16-column strips: inside each block of strip_block_inputs inputs,
// the four strips one after another, each its groups' 16 columns x G values in a row:
//
//   block = k / strip_block_inputs, b0 = block * (strip_block_inputs / G) (its first group),
//   bg = its groups, g = k / G - b0:
//   packed[(panel * groups + b0) * panel_cols * G + (n % panel_cols / 16 * bg + g) * 16 * G
//          + n % 16 * G + k % G] = B[k, n]
//
// A strip pass then reads one ascending run of 64-byte lines instead of one line of every
// 256 (fp32) bytes; the weight packs of fp32 arithmetic take it where the vector level is
// AVX2 (PackedWeight::pack). In bf16 (G = 2) a block is 512 pairs, the bf16 product's input
// block, and each 16 pairs of a strip are one AMX B tile, 1 KiB in a row: the packs of bf16
// arithmetic take strips where AMX may run (bf16_panel_layout); every bf16 kernel reads both.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <variant>
#include <vector>

#include "cpx/core/dtype.hpp"
#include "cpx/core/error.hpp"
#include "cpx/cpu/runtime/aligned_buffer.hpp"
#include "cpx/cpu/runtime/weight_arena.hpp"
#include "cpx/cpu/runtime/compute.hpp"
#include "cpx/cpu/runtime/cpu_features.hpp"
#include "cpx/cpu/runtime/strided.hpp"
#include "cpx/cpu/runtime/vector_isa.hpp"

namespace cpx::cpu {

/// Output columns per panel of a packed weight: four 16-lane registers.
inline constexpr index_t packed_panel_cols = 64;

/// Output columns per strip of PanelLayout::strips: two 8-lane vectors.
inline constexpr index_t strip_cols = 16;
/// Inputs per block of PanelLayout::strips: the packed fp32 product's input block
/// (gemm_f32_packed.hpp checks that they agree), so that every block it reads, and fetches
/// ahead, is one range of memory.
inline constexpr index_t strip_block_inputs = 1024;
static_assert(packed_panel_cols % strip_cols == 0, "a panel is whole strips");

/// Order of the values inside a panel (the file comment has both formulas).
enum class PanelLayout : bool {
    rows,    ///< each group of inputs: one run of the panel's 64 columns (every kernel reads it)
    strips,  ///< each block of inputs: its four 16-column strips one after another (AVX2 fp32; AMX)
};

/// Orientation of the source matrix handed to PackedPanels::pack.
enum class WeightOrientation : bool {
    out_in,  ///< [N, K]: nn.Linear, y = x . W^T
    in_out,  ///< [K, N]: input-major, y = x . W
};

namespace fp32_panels {
// fp32 panels (G = 1) of an nn.Linear weight are packed from runs of 16 inputs of each row, one
// cache line of fp32 values, written across the panel's lines, which stay in L1. By input, one
// value from each of a panel's 64 rows at a time, rows 8 KiB apart (2,048 inputs) fall into one
// set of L1 and evict each other: a 768 x 2048 weight took 6.2 ms that way, 0.7-1.5 ms in runs
// (one Zen 3 core), and the strips layout took a second pass.
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
/// stride_groups = K (the file comment's formulas).
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
}  // namespace fp32_panels

/// A read-only view of packed panels, possibly of a prefix of their outputs and
/// inputs (attention reads the first n keys of keys packed once per call).
template <class T>
class PackedPanelsView {
public:
    static constexpr index_t group = static_cast<index_t>(4 / sizeof(T));

    /// Groups per block of PanelLayout::strips.
    static constexpr index_t block_groups = strip_block_inputs / group;

    PackedPanelsView() = default;
    PackedPanelsView(const T* data, index_t outputs, index_t inputs, index_t stride_groups,
                     PanelLayout layout = PanelLayout::rows)
        : data_(data), n_(outputs), k_(inputs), stride_groups_(stride_groups), layout_(layout) {}

    index_t outputs() const { return n_; }
    index_t inputs() const { return k_; }
    index_t groups() const { return (k_ + group - 1) / group; }
    index_t panels() const { return (n_ + packed_panel_cols - 1) / packed_panel_cols; }
    PanelLayout layout() const { return layout_; }
    /// First value of `panel` at input group `g` (under PanelLayout::strips: of its first strip).
    const T* panel(index_t panel, index_t g = 0) const {
        const T* base = data_ + panel * stride_groups_ * packed_panel_cols * group;
        if (layout_ == PanelLayout::rows) return base + g * packed_panel_cols * group;
        const index_t b0 = g / block_groups * block_groups;
        return base + b0 * packed_panel_cols * group + (g - b0) * strip_cols * group;
    }
    /// Values from one group of a column to the next group of that column.
    index_t group_stride() const { return (layout_ == PanelLayout::rows ? packed_panel_cols : strip_cols) * group; }
    /// Values from a column at group `g` to the column strip_cols further at that group.
    index_t strip_stride(index_t g) const {
        if (layout_ == PanelLayout::rows) return strip_cols * group;
        const index_t b0 = g / block_groups * block_groups;
        return std::min(block_groups, stride_groups_ - b0) * strip_cols * group;
    }
    /// The first `outputs` outputs of the first `inputs` inputs. Where `inputs` is not a whole
    /// group, the group's other input belongs to the full matrix: the x of a product must hold a
    /// zero there (the products' own rounding of x does).
    PackedPanelsView prefix(index_t outputs, index_t inputs) const {
        require<ShapeError>(outputs >= 0 && outputs <= n_ && inputs >= 0 && inputs <= k_, "packed panels: prefix [",
                            inputs, " -> ", outputs, "] of [", k_, " -> ", n_, "]");
        return {data_, outputs, inputs, stride_groups_, layout_};
    }
    /// Outputs [first, first + count) over every input; `first` must start a panel (a multiple
    /// of packed_panel_cols): a stacked projection read in parts (attention's k and v alone).
    PackedPanelsView outputs_range(index_t first, index_t count) const {
        require<ShapeError>(first >= 0 && count >= 0 && first + count <= n_ && first % packed_panel_cols == 0,
                            "packed panels: outputs [", first, ", ", first + count, ") of ", n_,
                            " do not start a panel of ", packed_panel_cols);
        return {data_ + first / packed_panel_cols * stride_groups_ * packed_panel_cols * group, count, k_,
                stride_groups_, layout_};
    }

private:
    const T* data_ = nullptr;
    index_t n_ = 0, k_ = 0, stride_groups_ = 0;
    PanelLayout layout_ = PanelLayout::rows;
};

/// Where a kernel finds its B values at input group g of a panel (PackedPanelsView::group_stride,
/// strip_stride): `group` values from one input group to the next, `strip` from one 16-column
/// strip to the next; `strips`: the layout is PanelLayout::strips.
struct PanelStrides {
    index_t group, strip;
    bool strips;

    template <class T>
    static PanelStrides of(const PackedPanelsView<T>& b, index_t g) {
        return {b.group_stride(), b.strip_stride(g), b.layout() == PanelLayout::strips};
    }
};

/// T: the packed element type, bf16 or float.
template <class T>
class PackedPanels {
    static_assert(std::is_same_v<T, bf16> || std::is_same_v<T, float>, "panels hold bf16 or fp32 values");

public:
    /// Values of consecutive inputs that one 32-bit lane consumes.
    static constexpr index_t group = static_cast<index_t>(4 / sizeof(T));

    PackedPanels() = default;

    /// Packs `w` (fp32 or bf16, any row stride) as the B of y = x . B.
    template <class W>
    static PackedPanels pack(const StridedMatrix<const W>& w, WeightOrientation orientation,
                             PanelLayout layout = PanelLayout::rows) {
        PackedPanels p;
        p.assign(w, orientation, layout);
        return p;
    }

    /// pack() into this object, reusing its storage (per-call packing of attention's keys and values).
    template <class W>
    void assign(const StridedMatrix<const W>& w, WeightOrientation orientation,
                PanelLayout layout = PanelLayout::rows) {
        if constexpr (std::is_same_v<T, float>) {  // either layout in one pass
            shape(w, orientation);
            data_.resize(static_cast<std::size_t>(panels_ * groups_ * packed_panel_cols));
            for (index_t p = 0; p < panels_; ++p)
                fp32_panels::pack_panel(w, orientation == WeightOrientation::out_in, p, layout,
                                        data_.data() + p * groups_ * packed_panel_cols);
        } else {
            assign_rows(w, orientation);
            if (layout == PanelLayout::strips) to_strips();
        }
        layout_ = layout;
    }

    /// The whole packed matrix as a view (what the products read).
    PackedPanelsView<T> view() const { return {data_.data(), n_, k_, groups_, layout_}; }
    operator PackedPanelsView<T>() const { return view(); }

    index_t outputs() const { return n_; }  ///< N
    index_t inputs() const { return k_; }   ///< K
    index_t groups() const { return groups_; }
    index_t panels() const { return panels_; }
    PanelLayout layout() const { return layout_; }
    bool empty() const { return data_.empty(); }
    std::size_t bytes() const { return data_.size() * sizeof(T); }

    /// First value of `panel` at input group `g` (PackedPanelsView::panel).
    const T* panel(index_t panel, index_t g = 0) const { return view().panel(panel, g); }
    /// Index of B[k, n] in the packed array.
    index_t offset(index_t n, index_t k) const {
        const index_t p = n / packed_panel_cols, c = n % packed_panel_cols, g = k / group;
        const PackedPanelsView<T> v = view();
        return static_cast<index_t>(v.panel(p, g) - data_.data()) + c / strip_cols * v.strip_stride(g) +
               c % strip_cols * group + k % group;
    }
    /// B[k, n] as stored, as float, for tests and fallbacks.
    float at(index_t n, index_t k) const { return to_float(data_[static_cast<std::size_t>(offset(n, k))]); }

private:
    /// Checks w and takes its shape.
    template <class W>
    void shape(const StridedMatrix<const W>& w, WeightOrientation orientation) {
        static_assert(std::is_same_v<W, float> || std::is_same_v<W, bf16>, "packing reads fp32 or bf16 weights");
        require<ShapeError>(w.rows >= 0 && w.cols >= 0 && (w.rows == 0 || w.ld >= w.cols),
                            "packing: a [", w.rows, ", ", w.cols, "] weight with row stride ", w.ld);
        const bool nk = orientation == WeightOrientation::out_in;
        n_ = nk ? w.rows : w.cols;
        k_ = nk ? w.cols : w.rows;
        groups_ = (k_ + group - 1) / group;
        panels_ = (n_ + packed_panel_cols - 1) / packed_panel_cols;
    }

    /// Packs bf16 panels in PanelLayout::rows (fp32 panels: fp32_panels::pack_panel).
    template <class W>
    void assign_rows(const StridedMatrix<const W>& w, WeightOrientation orientation) {
        static_assert(group == 2, "fp32 panels are packed by fp32_panels::pack_panel");
        shape(w, orientation);
        const bool nk = orientation == WeightOrientation::out_in;
        // Every value, pads included, is written once (no fill first): attention packs its keys and
        // values on every call into the storage of the previous call.
        data_.resize(static_cast<std::size_t>(panels_ * groups_ * packed_panel_cols * group));
        T* out = data_.data();
        if constexpr (std::is_same_v<W, T>) {
            // Keys (bf16 rows, an even K): a column's pair is one 32-bit word of its row, so each
            // row is read once, whole, and its words go to their groups; by groups, each word had
            // come from another row (a 512 x 64 head: 12 us, now 4.4). Only here: for fp32 panels of
            // a large weight, this order packed 2.6x slower than by groups (8192 x 768, load time).
            if (nk && k_ % 2 == 0) {
                for (index_t p = 0; p < panels_; ++p, out += groups_ * packed_panel_cols * group) {
                    const index_t c0 = p * packed_panel_cols, cols = std::min(packed_panel_cols, n_ - c0);
                    for (index_t c = 0; c < cols; ++c) {
                        const W* src = w.row(c0 + c);
                        for (index_t g = 0; g < groups_; ++g)
                            std::memcpy(out + (g * packed_panel_cols + c) * group, src + g * group, sizeof(T) * group);
                    }
                    for (index_t g = 0; g < groups_; ++g)
                        std::fill(out + (g * packed_panel_cols + cols) * group, out + (g + 1) * packed_panel_cols * group, T{});
                }
                return;
            }
        }
        for (index_t p = 0; p < panels_; ++p) {
            const index_t c0 = p * packed_panel_cols, cols = std::min(packed_panel_cols, n_ - c0);
            for (index_t g = 0; g < groups_; ++g, out += packed_panel_cols * group) {
                const index_t k0 = g * group, live = std::min(group, k_ - k0);  // inputs of the group that exist
                // Whole groups (all but an odd K's last) without a test per value, and a pair of
                // input-major rows as one interleaving loop, which the compiler vectorises: attention
                // packs every head's keys and values on every prefill call, and one head's 512 x 64
                // bf16 values took 8.3 us, now 1.3, its keys 15 -> 12 (Zen 5, one thread).
                if (live == group && nk) {
                    for (index_t c = 0; c < cols; ++c) {
                        const W* src = w.row(c0 + c) + k0;
                        for (index_t i = 0; i < group; ++i) out[c * group + i] = convert(src[i]);
                    }
                } else if (live == group) {  // two rows interleaved
                    const W* r0 = w.row(k0) + c0;
                    const W* r1 = w.row(k0 + 1) + c0;
                    for (index_t c = 0; c < cols; ++c) {
                        out[2 * c] = convert(r0[c]);
                        out[2 * c + 1] = convert(r1[c]);
                    }
                } else if (nk) {  // column c is row c0 + c of w, its group's inputs adjacent there
                    for (index_t c = 0; c < cols; ++c) {
                        const W* src = w.row(c0 + c) + k0;
                        for (index_t i = 0; i < group; ++i) out[c * group + i] = i < live ? convert(src[i]) : T{};
                    }
                } else {  // input k is row k of w, its columns adjacent there
                    for (index_t i = 0; i < group; ++i) {
                        const W* src = i < live ? w.row(k0 + i) + c0 : nullptr;
                        for (index_t c = 0; c < cols; ++c) out[c * group + i] = src ? convert(src[c]) : T{};
                    }
                }
                std::fill(out + cols * group, out + packed_panel_cols * group, T{});
            }
        }
    }

    /// PanelLayout::rows -> strips, block by block of each panel (weights, once at load).
    void to_strips() {
        constexpr index_t bg_max = strip_block_inputs / group, row = packed_panel_cols * group;
        std::vector<T> block(static_cast<std::size_t>(bg_max * row));
        T* panel = data_.data();
        for (index_t p = 0; p < panels_; ++p, panel += groups_ * row)
            for (index_t b0 = 0; b0 < groups_; b0 += bg_max) {
                const index_t bg = std::min(bg_max, groups_ - b0);
                T* dst = panel + b0 * row;
                std::copy(dst, dst + bg * row, block.begin());
                for (index_t g = 0; g < bg; ++g)
                    for (index_t s = 0; s < packed_panel_cols / strip_cols; ++s)
                        std::copy_n(block.begin() + g * row + s * strip_cols * group, strip_cols * group,
                                    dst + (s * bg + g) * strip_cols * group);
            }
    }

    template <class W>
    static T convert(W v) {
        if constexpr (std::is_same_v<T, W>) return v;
        else return from_float<T>(to_float(v));
    }

    WeightVector<T> data_;
    index_t n_ = 0, k_ = 0, groups_ = 0, panels_ = 0;
    PanelLayout layout_ = PanelLayout::rows;
};

/// bf16 panels, for bf16 arithmetic (cpu/kernels/gemm_bf16.hpp).
using PackedBf16 = PackedPanels<bf16>;
/// fp32 panels, for the packed fp32 product (cpu/kernels/gemm_f32_packed.hpp).
using PackedF32 = PackedPanels<float>;

/// bf16 panels of a weight stored in bf16, for fp32 arithmetic (Compute::fp32_packed): the
/// packed fp32 product widens each value exactly, so it computes what fp32 panels would from
/// half their bytes.
struct PackedBf16Widened {
    PackedBf16 panels;
};

/// The layout of panels for the packed fp32 product at the current vector level: strips for the
/// AVX2 kernel, rows for the AVX-512 one. Zen 3, 187M, fp32 weights, alternated binaries
/// (docs/BF16.md): 512-token prefill on one thread 1,911 -> 1,676 ms, two 1,061 -> 939; decode
/// steps (two threads) 20.8 -> 15.5 ms at one sequence, 34.3 -> 30.7 at four; bf16 weights'
/// panels: prefill level, one-sequence steps 12.2 -> 10.6 ms.
inline PanelLayout fp32_panel_layout() {
    return vector_isa() == VectorIsa::avx2 ? PanelLayout::strips : PanelLayout::rows;
}

/// The layout of panels for bf16 arithmetic (Compute::bf16), which every bf16 level reads: strips
/// where AMX may run, since an AMX B tile (16 pairs x 16 columns) is then 1 KiB in a row
/// (cpu/kernels/gemm_bf16_amx.hpp has the figures), and where the only bf16 level the machine
/// has is the widened one and the vector level is AVX2, since that level is the packed fp32
/// product; rows elsewhere (AVX512_BF16 without AMX, whose kernel streams one run per pair).
inline PanelLayout bf16_panel_layout() {
    const CpuFeatures& f = cpu_features();
    if (f.amx_permitted && f.avx512_bf16) return PanelLayout::strips;
    return fp32_panel_layout() == PanelLayout::strips && !f.avx512_bf16 ? PanelLayout::strips : PanelLayout::rows;
}

/// A weight packed for the product a model's Compute choice runs: bf16 panels
/// for Compute::bf16; for Compute::fp32_packed, fp32 panels of an fp32 weight and
/// bf16 panels (widened in the kernel) of a bf16 one. The layers' weight
/// views point at one (or at an array of them, one per expert); linear() and
/// matmul() pick the kernel from what it holds.
class PackedWeight {
public:
    PackedWeight() = default;

    template <class W>
    static PackedWeight pack(const StridedMatrix<const W>& w, WeightOrientation orientation, Compute compute);

    /// bf16 panels for bf16 arithmetic.
    const PackedBf16* bf16() const { return std::get_if<PackedBf16>(&panels_); }
    /// fp32 panels for fp32 arithmetic.
    const PackedF32* f32() const { return std::get_if<PackedF32>(&panels_); }
    /// bf16 panels of a bf16 weight for fp32 arithmetic.
    const PackedBf16* bf16_widened() const {
        const auto* w = std::get_if<PackedBf16Widened>(&panels_);
        return w ? &w->panels : nullptr;
    }
    index_t outputs() const { return visit([](const auto& p) { return p.outputs(); }); }
    index_t inputs() const { return visit([](const auto& p) { return p.inputs(); }); }
    std::size_t bytes() const { return visit([](const auto& p) { return p.bytes(); }); }

private:
    template <class F>
    auto visit(F&& f) const -> decltype(f(std::declval<const PackedF32&>())) {
        if (const PackedBf16* b = bf16()) return f(*b);
        if (const PackedF32* p = f32()) return f(*p);
        if (const PackedBf16* w = bf16_widened()) return f(*w);
        return {};
    }

    std::variant<std::monostate, PackedBf16, PackedF32, PackedBf16Widened> panels_;
};

// Outside the class, so that it is not inline (CPX_EXTERN_KERNELS below).
template <class W>
PackedWeight PackedWeight::pack(const StridedMatrix<const W>& w, WeightOrientation orientation, Compute compute) {
    require<InputError>(compute != Compute::fp32, "packing a weight for fp32 arithmetic, which reads it as stored");
    PackedWeight p;
    const PanelLayout layout = fp32_panel_layout();
    if (compute == Compute::bf16) p.panels_ = PackedBf16::pack(w, orientation, bf16_panel_layout());
    else if constexpr (std::is_same_v<W, cpx::bf16>)
        p.panels_ = PackedBf16Widened{PackedBf16::pack(w, orientation, layout)};
    else p.panels_ = PackedF32::pack(w, orientation, layout);
    return p;
}

/// The arithmetic a packed weight stands for: the layers run their other products
/// (attention's Q K^T and P V) the same way. Null: plain fp32.
inline Compute compute_of(const PackedWeight* p) {
    if (p && p->bf16()) return Compute::bf16;
    if (p && (p->f32() || p->bf16_widened())) return Compute::fp32_packed;
    return Compute::fp32;
}

}  // namespace cpx::cpu

// Packing fp32 and bf16 weights, declared extern with CPX_EXTERN_KERNELS and defined by
// cpu/kernel_instances.hpp, as CPX_LINEAR_INSTANCES in cpu/kernels/linear.hpp.
#define CPX_PACKED_WEIGHT_INSTANCE(extern_, W)                                                         \
    extern_ template cpx::cpu::PackedWeight cpx::cpu::PackedWeight::pack<W>(                           \
        const cpx::StridedMatrix<const W>&, cpx::cpu::WeightOrientation, cpx::cpu::Compute);
#define CPX_PACKED_WEIGHT_INSTANCES(extern_) \
    CPX_PACKED_WEIGHT_INSTANCE(extern_, float) CPX_PACKED_WEIGHT_INSTANCE(extern_, cpx::bf16)
#ifdef CPX_EXTERN_KERNELS
CPX_PACKED_WEIGHT_INSTANCES(extern)
#endif
