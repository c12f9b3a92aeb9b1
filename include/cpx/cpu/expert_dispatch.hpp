#pragma once
// Sparse dispatch of rows to SwiGLU experts (docs/MODELS.md §8.3-§8.4):
// a counting sort groups the rows by expert (E is small), each expert runs one
// GEMM pair on its contiguous segment, and the results are added back to the
// rows they came from, optionally scaled per row (the learned router's p_e).
// The cost is one expert's worth per row, never E experts and a mask.
// Expert weights are input-major: gate_up [E, hidden, 2 width] (gate in
// columns [0, width), up in [width, 2 width)), down [E, width, hidden], applied
// as x . W, as the authors store them.

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "cpx/core/error.hpp"
#include "cpx/cpu/linear.hpp"
#include "cpx/cpu/swiglu.hpp"
#include "cpx/cpu/workspace.hpp"

namespace cpx::cpu {

/// Non-owning expert weights, contiguous per expert.
template <class W>
struct ExpertWeights {
    const W* gate_up = nullptr;  ///< [experts, hidden, 2 * width]
    const W* down = nullptr;     ///< [experts, width, hidden]
    int experts = 0;
    index_t hidden = 0, width = 0;

    RowBlock<const W> gate_up_of(int e) const {
        return {gate_up + static_cast<index_t>(e) * hidden * 2 * width, hidden, 2 * width, 2 * width};
    }
    RowBlock<const W> down_of(int e) const {
        return {down + static_cast<index_t>(e) * width * hidden, width, hidden, hidden};
    }
};

/// Groups rows by expert and runs each expert on its rows.
template <class W>
class ExpertDispatch {
public:
    void reserve(index_t rows, index_t hidden, index_t width, int experts) {
        grow(gathered_, static_cast<std::size_t>(rows * hidden));
        grow(hidden_, static_cast<std::size_t>(rows * 2 * width));
        grow(outputs_, static_cast<std::size_t>(rows * hidden));
        order_.reserve(static_cast<std::size_t>(rows));
        starts_.reserve(static_cast<std::size_t>(experts) + 1);
    }

    /// residual[r] += scale[r] * Expert_{expert[r]}(x[r]) for every row r
    /// (scale empty: 1). Rows per expert are added to `counts` when given.
    void forward(const ExpertWeights<W>& w, const RowBlock<const float>& x, std::span<const std::int32_t> expert,
                 std::span<const float> scale, const RowBlock<float>& residual, std::span<index_t> counts = {}) {
        const index_t n = x.rows, d = w.hidden, width = w.width;
        const int experts = w.experts;
        require<ShapeError>(x.cols == d && residual.rows == n && residual.cols == d,
                            "expert dispatch: rows of ", x.cols, " and a residual of [", residual.rows, ", ",
                            residual.cols, "] for hidden size ", d);
        require<ShapeError>(static_cast<index_t>(expert.size()) == n && (scale.empty() || static_cast<index_t>(scale.size()) == n),
                            "expert dispatch: ", expert.size(), " expert ids and ", scale.size(), " scales for ", n,
                            " rows");
        // Counting sort, stable in the row index.
        starts_.assign(static_cast<std::size_t>(experts) + 1, 0);
        for (index_t r = 0; r < n; ++r) {
            const std::int32_t e = expert[static_cast<std::size_t>(r)];
            require<InputError>(e >= 0 && e < experts, "expert dispatch: row ", r, " routed to expert ", e,
                                ", outside [0, ", experts, ")");
            ++starts_[static_cast<std::size_t>(e) + 1];
        }
        for (int e = 0; e < experts; ++e) starts_[e + 1] += starts_[e];
        if (!counts.empty())
            for (int e = 0; e < experts; ++e) counts[e] += starts_[e + 1] - starts_[e];
        order_.resize(static_cast<std::size_t>(n));
        fill_.assign(starts_.begin(), starts_.end() - 1);
        for (index_t r = 0; r < n; ++r) order_[static_cast<std::size_t>(fill_[expert[r]]++)] = r;

        const RowBlock<float> gathered = block_in(gathered_, n, d);
        const RowBlock<float> h = block_in(hidden_, n, 2 * width);
        const RowBlock<float> y = block_in(outputs_, n, d);
#pragma omp parallel for schedule(static) if (n * d > 65536)
        for (index_t i = 0; i < n; ++i) std::copy_n(x.row(order_[static_cast<std::size_t>(i)]), d, gathered.row(i));
        for (int e = 0; e < experts; ++e) {
            const index_t begin = starts_[e], rows = starts_[e + 1] - begin;
            if (rows == 0) continue;
            const RowBlock<float> he = h.sub_rows(begin, rows);
            matmul<W>(RowBlock<const float>(gathered.sub_rows(begin, rows)), w.gate_up_of(e), he, Write::overwrite,
                      scratch_);
            swiglu_inplace(he, width);
            matmul<W>(RowBlock<const float>(he.sub_cols(0, width)), w.down_of(e), y.sub_rows(begin, rows),
                      Write::overwrite, scratch_);
        }
        // Each destination row receives exactly one routed row: no write conflicts.
#pragma omp parallel for schedule(static) if (n * d > 65536)
        for (index_t i = 0; i < n; ++i) {
            const index_t r = order_[static_cast<std::size_t>(i)];
            float* dst = residual.row(r);
            const float* src = y.row(i);
            if (scale.empty())
                for (index_t c = 0; c < d; ++c) dst[c] += src[c];
            else
                for (index_t c = 0; c < d; ++c) dst[c] += scale[static_cast<std::size_t>(r)] * src[c];
        }
    }

private:
    AlignedVector<float> gathered_, hidden_, outputs_;
    std::vector<index_t> order_, starts_, fill_;
    LinearScratch scratch_;
};

}  // namespace cpx::cpu
