#pragma once
// A weight matrix repacked once, at load, into the layout the bf16 product
// kernels read (cpu/gemm_bf16.hpp): B of y = x . B with B [K, N] (K inputs,
// N outputs), cut into panels of `panel_cols` output columns; inside a panel,
// each pair of consecutive inputs (k, k + 1) of the panel's columns is one
// contiguous run of panel_cols x 2 bf16 values:
//
//   packed[((panel * pairs + k / 2) * panel_cols + n % panel_cols) * 2 + k % 2] = B[k, n]
//
// That is the operand order of vdpbf16ps (each 32-bit lane multiplies two
// consecutive k of one column) and of an AMX B tile (rows of k pairs, 16
// columns of 2 values), so both bf16 levels read the same packing: a 512-bit
// load is 16 columns x 2 inputs. K is padded to even and N to whole panels with
// zeros, so kernels need no tails in K or inside a panel.
//
// The source may be fp32 (rounded to nearest even) or bf16 (copied exactly),
// in nn.Linear layout [N, K] or input-major layout [K, N].

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "cpx/core/dtype.hpp"
#include "cpx/core/error.hpp"
#include "cpx/cpu/aligned_buffer.hpp"
#include "cpx/cpu/strided.hpp"

namespace cpx::cpu {

/// Output columns per panel of a packed bf16 weight: four 16-lane registers.
inline constexpr index_t bf16_panel_cols = 64;

/// Orientation of the source matrix handed to PackedBf16::pack.
enum class WeightOrientation : bool {
    out_in,  ///< [N, K]: nn.Linear, y = x . W^T
    in_out,  ///< [K, N]: input-major, y = x . W
};

class PackedBf16 {
public:
    PackedBf16() = default;

    /// Packs `w` (fp32 or bf16, any row stride) as the B of y = x . B.
    template <class W>
    static PackedBf16 pack(const RowBlock<const W>& w, WeightOrientation orientation) {
        static_assert(std::is_same_v<W, float> || std::is_same_v<W, bf16>, "packing reads fp32 or bf16 weights");
        require<ShapeError>(w.rows >= 0 && w.cols >= 0 && (w.rows == 0 || w.stride >= w.cols),
                            "PackedBf16::pack: a [", w.rows, ", ", w.cols, "] weight with row stride ", w.stride);
        PackedBf16 p;
        const bool nk = orientation == WeightOrientation::out_in;
        p.n_ = nk ? w.rows : w.cols;
        p.k_ = nk ? w.cols : w.rows;
        p.pairs_ = (p.k_ + 1) / 2;
        p.panels_ = (p.n_ + bf16_panel_cols - 1) / bf16_panel_cols;
        p.data_.assign(static_cast<std::size_t>(p.panels_ * p.pairs_ * bf16_panel_cols * 2), 0);
        auto bits = [](W v) -> std::uint16_t {
            if constexpr (std::is_same_v<W, bf16>) return v.bits;
            else return bf16::from_float(v).bits;
        };
        for (index_t r = 0; r < w.rows; ++r) {
            const W* row = w.row(r);
            for (index_t c = 0; c < w.cols; ++c) {
                const index_t n = nk ? r : c, k = nk ? c : r;
                p.data_[static_cast<std::size_t>(p.offset(n, k))] = bits(row[c]);
            }
        }
        return p;
    }

    index_t outputs() const { return n_; }  ///< N
    index_t inputs() const { return k_; }   ///< K
    index_t pairs() const { return pairs_; }
    index_t panels() const { return panels_; }
    bool empty() const { return data_.empty(); }
    std::size_t bytes() const { return data_.size() * sizeof(std::uint16_t); }

    /// First value of `panel` at input pair `pair`: panel_cols x 2 values follow.
    const std::uint16_t* panel(index_t panel, index_t pair = 0) const {
        return data_.data() + (panel * pairs_ + pair) * bf16_panel_cols * 2;
    }
    /// Index of B[k, n] in the packed array.
    index_t offset(index_t n, index_t k) const {
        return ((n / bf16_panel_cols * pairs_ + k / 2) * bf16_panel_cols + n % bf16_panel_cols) * 2 + k % 2;
    }
    /// B[k, n] as stored (bf16 bits widened to float), for tests and fallbacks.
    float at(index_t n, index_t k) const {
        return bf16::from_bits(data_[static_cast<std::size_t>(offset(n, k))]).to_float();
    }

private:
    AlignedVector<std::uint16_t> data_;
    index_t n_ = 0, k_ = 0, pairs_ = 0, panels_ = 0;
};

}  // namespace cpx::cpu
