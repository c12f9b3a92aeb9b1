#pragma once
// Sparse dispatch of rows to SwiGLU experts (docs/MODELS.md §8.3-§8.5):
// a counting sort groups the (row, route) pairs by expert (E is small), each
// expert runs one GEMM pair on its contiguous segment, and the results are
// added back to the rows they came from, scaled per pair (the learned
// router's p_e, the top-k route weights). The cost is one expert's worth per
// route, never E experts and a mask.
// Expert weights are input-major: gate_up [E, hidden, 2 width] (gate in
// columns [0, width), up in [width, 2 width)), down [E, width, hidden], applied
// as x . W, as the authors store them.

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "cpx/core/error.hpp"
#include "cpx/cpu/kernels/linear.hpp"
#include "cpx/cpu/kernels/swiglu.hpp"
#include "cpx/cpu/runtime/parallel.hpp"
#include "cpx/cpu/runtime/workspace.hpp"

namespace cpx::cpu {

/// Non-owning expert weights, contiguous per expert.
template <class W>
struct ExpertWeights {
    const W* gate_up = nullptr;  ///< [experts, hidden, 2 * width]
    const W* down = nullptr;     ///< [experts, width, hidden]
    int experts = 0;
    index_t hidden = 0, width = 0;
    /// Per expert, packed copies (in_out) for the chosen arithmetic: arrays of `experts`, or null.
    const PackedWeight* gate_up_packed = nullptr;
    const PackedWeight* down_packed = nullptr;

    // Null matrices (stored matrices released to the packs) give null views of the right shape:
    // an offset applied to a null pointer is undefined behaviour, even unused.
    StridedMatrix<const W> gate_up_of(int e) const {
        return {gate_up ? gate_up + static_cast<index_t>(e) * hidden * 2 * width : nullptr, hidden, 2 * width,
                2 * width};
    }
    StridedMatrix<const W> down_of(int e) const {
        return {down ? down + static_cast<index_t>(e) * width * hidden : nullptr, width, hidden, hidden};
    }
};

/// Work that runs beside the experts of one dispatch, reading and writing nothing they do (the
/// token-routed MLP's shared expert, into a buffer of its own): decode-sized calls give it a
/// thread as they give one to each expert.
struct BesideExperts {
    void (*run)(void* context) = nullptr;
    void* context = nullptr;
    explicit operator bool() const { return run != nullptr; }
};

/// Groups (row, route) pairs by expert and runs each expert on its pairs.
template <class W>
class ExpertDispatch {
public:
    /// Sizes the buffers for `rows` rows of `routes` routes each.
    void reserve(index_t rows, index_t hidden, index_t width, int experts, int routes = 1) {
        const index_t pairs = rows * routes;
        grow(gathered_, static_cast<std::size_t>(pairs * hidden));
        grow(hidden_, static_cast<std::size_t>(pairs * 2 * width));
        grow(outputs_, static_cast<std::size_t>(pairs * hidden));
        order_.reserve(static_cast<std::size_t>(pairs));
        slot_.reserve(static_cast<std::size_t>(pairs));
        starts_.reserve(static_cast<std::size_t>(experts) + 1);
        fill_.reserve(static_cast<std::size_t>(experts));
        busy_.reserve(static_cast<std::size_t>(experts));
        if (static_cast<int>(thread_scratch_.size()) < max_threads())
            thread_scratch_.resize(static_cast<std::size_t>(max_threads()));
        // Decode's experts run on either scratch; size them all for their products now.
        const auto size = [&](LinearScratch& s) {
            reserve_matmul<W>(s, hidden, 2 * width);
            reserve_matmul<W>(s, width, hidden);
        };
        size(scratch_);
        for (LinearScratch& s : thread_scratch_) size(s);
    }

    /// residual[r] += scale[r] * Expert_{expert[r]}(x[r]) for every row r
    /// (scale empty: 1). Rows per expert are added to `counts` when given.
    void forward(const ExpertWeights<W>& w, const StridedMatrix<const float>& x, std::span<const std::int32_t> expert,
                 std::span<const float> scale, const StridedMatrix<float>& residual, std::span<index_t> counts = {}) {
        forward(w, x, 1, expert, scale, residual, counts);
    }

    /// Top-k form: row r takes `routes` routes, pair p = r * routes + j going to
    /// expert[p] with weight scale[p] (scale empty: 1):
    ///   residual[r] += sum_j scale[p] * Expert_{expert[p]}(x[r]).
    /// A counting sort over the rows * routes pairs makes each expert one GEMM
    /// pair over its segment, so the cost is `routes` experts per row, never E.
    /// Pairs per expert are added to `counts` when given; `beside` runs during the call.
    void forward(const ExpertWeights<W>& w, const StridedMatrix<const float>& x, int routes,
                 std::span<const std::int32_t> expert, std::span<const float> scale, const StridedMatrix<float>& residual,
                 std::span<index_t> counts = {}, BesideExperts beside = {});

private:
    AlignedVector<float> gathered_, hidden_, outputs_;
    std::vector<index_t> order_, slot_, starts_, fill_;
    std::vector<int> busy_;
    LinearScratch scratch_;
    std::vector<LinearScratch> thread_scratch_;
};

// Defined outside the class, so that it is not inline and CPX_EXTERN_KERNELS below can keep
// every source from compiling it again.
template <class W>
void ExpertDispatch<W>::forward(const ExpertWeights<W>& w, const StridedMatrix<const float>& x, int routes,
                                std::span<const std::int32_t> expert, std::span<const float> scale,
                                const StridedMatrix<float>& residual, std::span<index_t> counts,
                                BesideExperts beside) {
    const index_t n = x.rows, d = w.hidden, width = w.width;
    const int experts = w.experts;
    require<ShapeError>(routes >= 1, "expert dispatch: ", routes, " routes per row");
    const index_t pairs = n * routes;
    require<ShapeError>(x.cols == d && residual.rows == n && residual.cols == d,
                        "expert dispatch: rows of ", x.cols, " and a residual of [", residual.rows, ", ",
                        residual.cols, "] for hidden size ", d);
    require<ShapeError>(static_cast<index_t>(expert.size()) == pairs &&
                            (scale.empty() || static_cast<index_t>(scale.size()) == pairs),
                        "expert dispatch: ", expert.size(), " expert ids and ", scale.size(), " scales for ", n,
                        " rows of ", routes, " routes");
    // Counting sort of the pairs, stable in the pair index.
    starts_.assign(static_cast<std::size_t>(experts) + 1, 0);
    for (index_t p = 0; p < pairs; ++p) {
        const std::int32_t e = expert[static_cast<std::size_t>(p)];
        require<InputError>(e >= 0 && e < experts, "expert dispatch: row ", p / routes, " route ", p % routes,
                            " goes to expert ", e, ", outside [0, ", experts, ")");
        ++starts_[static_cast<std::size_t>(e) + 1];
    }
    for (int e = 0; e < experts; ++e) starts_[e + 1] += starts_[e];
    if (!counts.empty())
        for (int e = 0; e < experts; ++e) counts[e] += starts_[e + 1] - starts_[e];
    order_.resize(static_cast<std::size_t>(pairs));
    slot_.resize(static_cast<std::size_t>(pairs));
    fill_.assign(starts_.begin(), starts_.end() - 1);
    for (index_t p = 0; p < pairs; ++p) {
        const index_t at = fill_[static_cast<std::size_t>(expert[static_cast<std::size_t>(p)])]++;
        order_[static_cast<std::size_t>(at)] = p;
        slot_[static_cast<std::size_t>(p)] = at;
    }

    const StridedMatrix<float> gathered = block_in(gathered_, pairs, d);
    const StridedMatrix<float> h = block_in(hidden_, pairs, 2 * width);
    const StridedMatrix<float> y = block_in(outputs_, pairs, d);
    parallel_for(pairs, pairs * d > 65536, [&](index_t i) {
        std::copy_n(x.row(order_[static_cast<std::size_t>(i)] / routes), d, gathered.row(i));
    });
    auto run_expert = [&](int e, LinearScratch& scratch) {
        const index_t begin = starts_[e], rows = starts_[e + 1] - begin;
        const StridedMatrix<float> he = h.rows_range(begin, rows);
        matmul<W>(StridedMatrix<const float>(gathered.rows_range(begin, rows)), w.gate_up_of(e), he, Write::overwrite,
                  scratch, w.gate_up_packed ? w.gate_up_packed + e : nullptr);
        swiglu_inplace(he, width);
        matmul<W>(StridedMatrix<const float>(he.columns(0, width)), w.down_of(e), y.rows_range(begin, rows),
                  Write::overwrite, scratch, w.down_packed ? w.down_packed + e : nullptr);
    };
    busy_.clear();
    for (int e = 0; e < experts; ++e)
        if (starts_[e + 1] > starts_[e]) busy_.push_back(e);
    const int threads = max_threads();
    const int busy = static_cast<int>(busy_.size()), jobs = busy + (beside ? 1 : 0);
    if (threads > 1 && pairs <= gemv_max_rows && jobs >= threads) {
        // Decode-sized work on several experts (the work beside them counting as one): one
        // expert per thread at a time, each product on one thread (inside a parallel region
        // parallel_for and parallel_team run on their caller), instead of a parallel region
        // per product.
        // 187M's one-row step on two threads, the routed and the shared expert side by side
        // (Zen 5, eight alternations; medians of the cases run at 78-88 GB/s read): bf16
        // weights 4.0 -> 3.87 ms, compute:bf16 3.76 -> 3.64; level within the noise at ~50 GB/s.
        // The scratches share their capacities, so that which thread draws which expert does
        // not decide whether a step allocates.
        if (static_cast<int>(thread_scratch_.size()) < threads) thread_scratch_.resize(static_cast<std::size_t>(threads));
        for (LinearScratch& s : thread_scratch_) s.reserve_like(scratch_);
        const int first = beside ? 1 : 0;  // the work beside the experts starts first
        const auto job = [&](int i, int slot) {
            if (i < first) beside.run(beside.context);
            else run_expert(busy_[static_cast<std::size_t>(i - first)], thread_scratch_[static_cast<std::size_t>(slot)]);
        };
        // Fewer than two jobs per thread: one round of one job per thread, then the jobs left
        // over one after the other with every thread on each product, rather than some threads
        // waiting while others take a second job (three like-sized jobs on two threads took two
        // jobs' time). With more jobs the threads draw them as they finish, which evens out
        // unlike sizes (16 sequences: the shared expert has every row, an expert a few).
        const int alone = jobs < 2 * threads ? threads : jobs;
        parallel_for(alone, true, job, Schedule::one_by_one);
        for (const LinearScratch& s : thread_scratch_) scratch_.reserve_like(s);
        for (LinearScratch& s : thread_scratch_) s.reserve_like(scratch_);
        for (int i = alone; i < jobs; ++i) run_expert(busy_[static_cast<std::size_t>(i - first)], scratch_);
    } else {
        if (beside) beside.run(beside.context);
        for (int e : busy_) run_expert(e, scratch_);
    }
    // Per destination row, its routes in route order: no write conflicts
    // and a fixed summation order, whatever the thread count.
    parallel_for(n, pairs * d > 65536, [&](index_t r) {
        float* dst = residual.row(r);
        for (int j = 0; j < routes; ++j) {
            const std::size_t p = static_cast<std::size_t>(r * routes + j);
            const float* src = y.row(slot_[p]);
            if (scale.empty())
                for (index_t c = 0; c < d; ++c) dst[c] += src[c];
            else
                for (index_t c = 0; c < d; ++c) dst[c] += scale[p] * src[c];
        }
    });
}

}  // namespace cpx::cpu

// The fp32 and bf16 experts, declared extern with CPX_EXTERN_KERNELS and defined by
// cpu/kernel_instances.hpp, as CPX_LINEAR_INSTANCES in cpu/kernels/linear.hpp.
#define CPX_EXPERT_DISPATCH_INSTANCES(extern_)              \
    extern_ template class cpx::cpu::ExpertDispatch<float>; \
    extern_ template class cpx::cpu::ExpertDispatch<cpx::bf16>;
#ifdef CPX_EXTERN_KERNELS
CPX_EXPERT_DISPATCH_INSTANCES(extern)
#endif
