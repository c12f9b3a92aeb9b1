#pragma once
// Dense products with stored weights, fp32 arithmetic:
//   linear(x, w, y):  y = x . w^T   w: [out, in]  (nn.Linear layout)
//   matmul(x, w, y):  y = x . w     w: [in, out]  (the routed experts' layout)
// with y either overwritten or accumulated into (residual adds, mu terms).
//
// Weights may be stored as fp32 or bf16. Prefill-sized products (repack_min_rows rows and
// more, a panel of outputs or more) on a CPU with AVX2 or AVX-512 pack the weight during the
// call, a chunk of panels at a time, for the packed fp32 kernel (cpu/kernels/gemm_repacked.hpp).
// The rest is split over the output features by our own OpenMP loop, and Eigen multiplies each
// part on one thread. Many rows with fp32 weights: one block of the output per thread
// (thread_blocks below). Otherwise each thread takes panels of the weight, widens bf16 panels
// to fp32 in its own cache-aligned scratch (Eigen's bf16 GEMM is 5-10x slower than
// fp32), and multiplies them. For one row (decode)
// that is a GEMV threaded over the output features, which Eigen alone does not
// thread; it reads each weight exactly once.
//
// A weight may also come with a packed copy (cpu/kernels/packed_panels.hpp), which a
// model makes when the user chooses Compute::bf16 or Compute::fp32_packed: every
// product, decode steps included, then runs on it (cpu/kernels/gemm_bf16.hpp: bf16
// with fp32 sums; cpu/kernels/gemm_f32_packed.hpp: fp32) and never reads the stored
// weight. For decode the packed kernels beat the kernels below (docs/BF16.md "Decode
// on the packs"): bf16 reads half of fp32's bytes with one vdpbf16ps per weight pair,
// and the fp32 panels stream 64 outputs per input where the GEMVs below read rows.
//
// Few-row products run the AVX-512 kernels of cpu/kernels/gemv_avx512.hpp or the
// AVX2 ones of cpu/kernels/gemv_avx2.hpp (nn.Linear layout) where vector_isa()
// allows (chosen at run time), the portable loops below otherwise.

#include "cpx/cpu/runtime/eigen.hpp"

#include <algorithm>
#include <type_traits>

#include "cpx/core/dtype.hpp"
#include "cpx/core/error.hpp"
#include "cpx/core/tensor_view.hpp"
#include "cpx/cpu/runtime/aligned_buffer.hpp"
#include "cpx/cpu/kernels/gemm_bf16.hpp"
#include "cpx/cpu/kernels/gemm_f32_packed.hpp"
#include "cpx/cpu/kernels/gemm_repacked.hpp"
#include "cpx/cpu/kernels/packed_panels.hpp"
#include "cpx/cpu/kernels/gemv_avx2.hpp"
#include "cpx/cpu/kernels/gemv_avx512.hpp"
#include "cpx/cpu/runtime/parallel.hpp"
#include "cpx/cpu/runtime/simd_hints.hpp"
#include "cpx/cpu/runtime/strided.hpp"
#include "cpx/cpu/runtime/vector_isa.hpp"

namespace cpx::cpu {

/// Whether a product overwrites its output or adds to it.
enum class Write : bool { overwrite, accumulate };

/// Per-thread scratch for widened weight panels. Grows when a call needs more;
/// a model reserves it once so that decode steps allocate nothing.
class LinearScratch {
public:
    void ensure(std::size_t floats_per_thread, int threads) {
        if (floats_per_thread <= per_thread_ && threads <= threads_) return;
        per_thread_ = pad_to_cache_line<float>(std::max(floats_per_thread, per_thread_));
        threads_ = std::max(threads, threads_);
        buffer_.assign(per_thread_ * static_cast<std::size_t>(threads_), 0.0f);
    }
    float* thread_panel(int thread) { return buffer_.data() + per_thread_ * static_cast<std::size_t>(thread); }
    std::size_t bytes() const {
        return (buffer_.size() + lanes_.size() + repacked_.size()) * sizeof(float) + bf16_.bytes();
    }
    /// The bf16-rounded inputs of the bf16 products.
    Bf16Scratch& bf16() { return bf16_; }
    /// Grows to at least `other`'s capacities, so that scratches taking turns on the same
    /// products (one per thread: decode-sized ones) allocate no more than one would. The chunks
    /// of prefill-sized products are the owner's alone.
    void reserve_like(const LinearScratch& other) {
        if (other.per_thread_ > 0) ensure(other.per_thread_, other.threads_);
        if (lanes_.size() < other.lanes_.size()) lanes_.assign(other.lanes_.size(), 0.0f);
        bf16_.reserve_like(other.bf16_);
    }
    /// `floats` cache-aligned floats for an input transposed into vector lanes.
    float* lanes(std::size_t floats) {
        if (lanes_.size() < floats) lanes_.assign(floats, 0.0f);
        return lanes_.data();
    }
    /// The chunks of a weight packed during a prefill-sized call (cpu/kernels/gemm_repacked.hpp).
    AlignedVector<float>& repacked() { return repacked_; }

private:
    Bf16Scratch bf16_;
    AlignedVector<float> lanes_, repacked_;
    AlignedVector<float> buffer_;
    std::size_t per_thread_ = 0;
    int threads_ = 0;
};

/// Rows up to which a product on the stored weights is split over output features
/// (a threaded GEMV reading each weight once from memory) instead of going to
/// Eigen's threaded GEMM: decode steps of up to 16 sequences. Above eight
/// rows Eigen packed every weight panel per call and ran 2.7-3.9x slower than
/// reading the weights (187M, batch 16; docs/BF16.md "Batched decode").
inline constexpr index_t gemv_max_rows = 16;
static_assert(repack_min_rows > gemv_max_rows, "decode-sized products keep the few-row kernels");

namespace detail {
using RowMajorMatrixF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstRowsMap = Eigen::Map<const RowMajorMatrixF, Eigen::Unaligned, Eigen::OuterStride<>>;
using RowsMap = Eigen::Map<RowMajorMatrixF, Eigen::Unaligned, Eigen::OuterStride<>>;

inline ConstRowsMap eigen_rows(const StridedMatrix<const float>& b) {
    return ConstRowsMap(b.data, b.rows, b.cols, Eigen::OuterStride<>(b.ld));
}
inline RowsMap eigen_rows(const StridedMatrix<float>& b) {
    return RowsMap(b.data, b.rows, b.cols, Eigen::OuterStride<>(b.ld));
}

template <class Lhs, class Rhs>
void write_product(RowsMap y, const Lhs& a, const Rhs& b, Write mode) {
    if (mode == Write::accumulate) y.noalias() += a * b;
    else y.noalias() = a * b;
}

/// Many rows on fp32 weights: one block of y per thread, block(r0, rows, o0, cols) an Eigen
/// product run on that thread: contiguous column blocks (multiples of 16) where y has 16
/// columns per thread, row blocks otherwise (a learned router's few outputs). Not Eigen's own
/// threaded GEMM: its threads share packed inputs through spin-waits, which collapse when the
/// process gets fewer free cores than it has threads (two 2-thread processes on 2 cores ran
/// 13x slower than one; docs/THREADS.md). A column block packs all of x once, a small cost
/// beside its share of the multiply. Products too small to split stay under Eigen's own
/// threshold for threading (50,000 multiply-adds).
template <class Block>
void thread_blocks(index_t m, index_t out, index_t in, const Block& block) {
    const index_t threads = max_threads();
    const bool by_columns = out >= 16 * threads;
    const index_t extent = by_columns ? out : m, unit = by_columns ? 16 : 1;
    const index_t per = std::max(unit, ((extent + threads - 1) / threads + unit - 1) / unit * unit);
    const index_t blocks = (extent + per - 1) / per;
    parallel_for(blocks, m * out * in > 32768, [&](index_t b) {
        const index_t begin = b * per, count = std::min(per, extent - begin);
        if (by_columns) block(0, m, begin, count);
        else block(begin, count, 0, out);
    });
}

/// Output features per panel: a multiple of 16, small enough for a few panels
/// per thread (parallelism for GEMVs) and for the panel to stay in L2.
inline index_t panel_width(index_t rows, index_t out, index_t in, int threads) {
    const index_t by_cache = std::max<index_t>(16, (rows <= gemv_max_rows ? 65536 : 262144) / std::max<index_t>(in, 1));
    const index_t by_threads = std::max<index_t>(16, out / (4 * static_cast<index_t>(threads)));
    const index_t w = std::min(by_cache, by_threads);
    return std::max<index_t>(16, w / 16 * 16);
}

template <class W>
void widen(const W* src, index_t n, float* dst) {
    for (index_t i = 0; i < n; ++i) dst[i] = to_float(src[i]);
}

CPX_SIMD_HINTS_BEGIN

/// Fused 16-bit-weight GEMV for a few rows: each weight is widened in
/// registers and used at once, so weights are read exactly once, at half the
/// bytes of fp32, with no widened copy. Four output rows at a time give four
/// independent accumulation chains; `omp simd` vectorises the reductions.
template <class W>
void gemv_rows_nt(const StridedMatrix<const float>& x, const StridedMatrix<const W>& w, const StridedMatrix<float>& y, index_t o0,
                  index_t o1, Write mode) {
    const index_t in = x.cols;
    index_t o = o0;
    for (; o + 4 <= o1; o += 4) {
        const W* w0 = w.data + o * w.ld;
        const W* w1 = w0 + w.ld;
        const W* w2 = w1 + w.ld;
        const W* w3 = w2 + w.ld;
        for (index_t m = 0; m < x.rows; ++m) {
            const float* xr = x.row(m);
            float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
#pragma omp simd reduction(+ : a0, a1, a2, a3)
            for (index_t i = 0; i < in; ++i) {
                a0 += xr[i] * to_float(w0[i]);
                a1 += xr[i] * to_float(w1[i]);
                a2 += xr[i] * to_float(w2[i]);
                a3 += xr[i] * to_float(w3[i]);
            }
            float* yr = y.row(m) + o;
            if (mode == Write::accumulate) yr[0] += a0, yr[1] += a1, yr[2] += a2, yr[3] += a3;
            else yr[0] = a0, yr[1] = a1, yr[2] = a2, yr[3] = a3;
        }
    }
    for (; o < o1; ++o) {
        const W* wr = w.data + o * w.ld;
        for (index_t m = 0; m < x.rows; ++m) {
            const float* xr = x.row(m);
            float a = 0.0f;
#pragma omp simd reduction(+ : a)
            for (index_t i = 0; i < in; ++i) a += xr[i] * to_float(wr[i]);
            float& out = y.row(m)[o];
            out = mode == Write::accumulate ? out + a : a;
        }
    }
}

/// The input-major counterpart: y[m, o0:o1] (=|+=) sum_i x[m, i] * w[i, o0:o1],
/// accumulated over the rows of w in a small fp32 block (acc: rows * (o1 - o0)).
template <class W>
void gemv_rows_nn(const StridedMatrix<const float>& x, const StridedMatrix<const W>& w, const StridedMatrix<float>& y, index_t o0,
                  index_t o1, Write mode, float* acc) {
    const index_t n = o1 - o0, rows = x.rows;
    std::fill(acc, acc + rows * n, 0.0f);
    index_t i = 0;
    // Four weight rows per pass: one load and store of the accumulators per four FMAs.
    for (; i + 4 <= w.rows; i += 4) {
        const W* w0 = w.data + i * w.ld + o0;
        const W* w1 = w0 + w.ld;
        const W* w2 = w1 + w.ld;
        const W* w3 = w2 + w.ld;
        for (index_t m = 0; m < rows; ++m) {
            const float* xr = x.row(m) + i;
            const float x0 = xr[0], x1 = xr[1], x2 = xr[2], x3 = xr[3];
            float* a = acc + m * n;
#pragma omp simd
            for (index_t j = 0; j < n; ++j)
                a[j] += x0 * to_float(w0[j]) + x1 * to_float(w1[j]) + x2 * to_float(w2[j]) + x3 * to_float(w3[j]);
        }
    }
    for (; i < w.rows; ++i) {
        const W* wr = w.data + i * w.ld + o0;
        for (index_t m = 0; m < rows; ++m) {
            const float xi = x.row(m)[i];
            float* a = acc + m * n;
#pragma omp simd
            for (index_t j = 0; j < n; ++j) a[j] += xi * to_float(wr[j]);
        }
    }
    for (index_t m = 0; m < rows; ++m) {
        float* yr = y.row(m) + o0;
        const float* a = acc + m * n;
        if (mode == Write::accumulate)
            for (index_t j = 0; j < n; ++j) yr[j] += a[j];
        else
            std::copy_n(a, n, yr);
    }
}

CPX_SIMD_HINTS_END

template <class W>
void check_product(const char* what, const StridedMatrix<const float>& x, const StridedMatrix<const W>& w, index_t in,
                   index_t out, const StridedMatrix<float>& y) {
    require<ShapeError>(w.ld >= w.cols, what, ": weight rows of ", w.cols, " values are only ", w.ld, " apart");
    require<ShapeError>(x.cols == in, what, ": input rows have ", x.cols, " features, the weight expects ", in);
    require<ShapeError>(y.rows == x.rows && y.cols == out, what, ": output is [", y.rows, ", ", y.cols,
                        "], expected [", x.rows, ", ", out, "]");
}
}  // namespace detail

namespace detail {
/// y (=|+=) x . B over outputs [first, first + count) of the packed B (first starts a panel).
inline bool packed_outputs(const StridedMatrix<const float>& x, const PackedWeight& packed, index_t first,
                           index_t count, const StridedMatrix<float>& y, Write mode, LinearScratch& scratch) {
    const bool add = mode == Write::accumulate;
    if (const PackedBf16* b = packed.bf16()) gemm_bf16(x, b->view().outputs_range(first, count), y, add, scratch.bf16());
    else if (const PackedF32* f = packed.f32()) gemm_f32_packed(x, f->view().outputs_range(first, count), y, add);
    else if (const PackedBf16* h = packed.bf16_widened()) gemm_f32_packed(x, h->view().outputs_range(first, count), y, add);
    else return false;
    return true;
}

/// Checks that `packed` stands for w ([out, in] when out_in, else [in, out]).
template <class W>
void check_pack(const StridedMatrix<const W>& w, bool out_in, const PackedWeight& packed) {
    require<ShapeError>(packed.outputs() == (out_in ? w.rows : w.cols) && packed.inputs() == (out_in ? w.cols : w.rows),
                        "the packed weight is [", packed.inputs(), " -> ", packed.outputs(),
                        "], the weight it stands for [", w.rows, ", ", w.cols, "]");
}

/// The paths linear() and matmul() share, which see the weight's orientation only: the packed
/// copy when one is given, the weight packed during the call where that pays (gemm_repacked.hpp),
/// Eigen's GEMM for the other fp32 products of more than gemv_max_rows rows. False leaves the
/// product (few rows, or 16-bit weights without the packed kernel) to the caller's own kernels.
template <class W>
bool shared_paths(const StridedMatrix<const float>& x, const StridedMatrix<const W>& w, bool out_in,
                  const PackedWeight* packed, const StridedMatrix<float>& y, Write mode, LinearScratch& scratch) {
    const index_t m = x.rows, out = out_in ? w.rows : w.cols, in = out_in ? w.cols : w.rows, ld = w.ld;
    if (packed) {
        check_pack(w, out_in, *packed);
        if (packed_outputs(x, *packed, 0, out, y, mode, scratch)) return true;
    }
    if (repack_pays(m, out)) {
        gemm_repacked<W>(x, w, out_in ? WeightOrientation::out_in : WeightOrientation::in_out, y,
                         mode == Write::accumulate, scratch.repacked());
        return true;
    }
    if constexpr (std::is_same_v<W, float>) {
        if (m > gemv_max_rows) {
            thread_blocks(m, out, in, [&](index_t r0, index_t rows, index_t o0, index_t n) {
                const RowsMap yb = eigen_rows(y.rows_range(r0, rows).columns(o0, n));
                const ConstRowsMap xb = eigen_rows(x.rows_range(r0, rows));
                if (out_in)
                    write_product(yb, xb, ConstRowsMap(w.data + o0 * ld, n, in, Eigen::OuterStride<>(ld)).transpose(),
                                  mode);
                else
                    write_product(yb, xb, ConstRowsMap(w.data + o0, in, n, Eigen::OuterStride<>(ld)), mode);
            });
            return true;
        }
    }
    return false;
}
}  // namespace detail

/// y (=|+=) x . w^T with w [out, in] in nn.Linear layout (w may be a column
/// range of a wider matrix: its rows are w.ld apart). `packed`: w packed
/// (WeightOrientation::out_in) for the chosen arithmetic, used instead of w.
template <class W>
void linear(const StridedMatrix<const float>& x, const StridedMatrix<const W>& w, const StridedMatrix<float>& y, Write mode,
            LinearScratch& scratch, const PackedWeight* packed = nullptr) {
    const index_t out = w.rows, in = w.cols, ld = w.ld, m = x.rows;
    detail::check_product("linear", x, w, in, out, y);
    if (m == 0 || out == 0) return;
    if (detail::shared_paths(x, w, true, packed, y, mode, scratch)) return;
    const int threads = max_threads();
    const index_t pw = detail::panel_width(m, out, in, threads);
    const index_t panels = (out + pw - 1) / pw;
#ifdef CPX_HAVE_GEMV_AVX512
    const bool avx512 = vector_isa() == VectorIsa::avx512;
#else
    constexpr bool avx512 = false;
#endif
#ifdef CPX_HAVE_GEMV_AVX2
    const bool avx2 = vector_isa() == VectorIsa::avx2;
#else
    constexpr bool avx2 = false;
#endif
    // Few rows go to the fused kernels: 16-bit weights always, fp32 weights
    // from two rows on, and one row too where AVX-512 or AVX2 runs it (the
    // portable loop: Eigen's GEMV beats it; for 2-16 rows Eigen runs a small
    // GEMM that first packs every weight panel).
    if (m <= gemv_max_rows && (!std::is_same_v<W, float> || m > 1 || avx512 || avx2)) {
#ifdef CPX_HAVE_GEMV_AVX2
        if constexpr (std::is_same_v<W, bf16> || std::is_same_v<W, float>) {
            if (avx2 && m >= avx2::lanes_min_rows<W>) {
                // Sequences in the vector lanes: x transposed once (threads split the features), then the panels.
                float* const xt = scratch.lanes(static_cast<std::size_t>(avx2::lanes_scratch(in)));
                const int team_asked = panels > 1 && m * out * in > 32768 ? max_threads() : 1;
                RangeClaims claims(panels, team_asked);
                parallel_team(team_asked, [&](int t, int team) {
                    for_share((in + 63) / 64, t, team, [&](index_t b) {
                        avx2::lanes_transpose(x, xt, 64 * b, std::min(in, 64 * b + 64));
                    });
                    team_barrier(team);
                    // Panels claimed, not halved: the products are arithmetic-bound here and the two
                    // threads of a shared machine do not run at one speed. Zen 3, 187M decode steps of
                    // 8-16 sequences, both schedules alternated in one process (six runs of 21-25
                    // rounds): median per-round time ratio 0.96-1.01 (median 0.975), the head 3-10% less.
                    for_claims(claims, panels, t, team, [&](index_t p) {
                        avx2::gemv_lanes_nt(xt, in, w, y, p * pw, std::min(out, (p + 1) * pw), mode == Write::accumulate);
                    });
                });
                return;
            }
            if (avx2) {
                // bf16: each row split by parity once (the scratch is sized for every few-row count).
                StridedMatrix<const float> xs = x;
                if constexpr (std::is_same_v<W, bf16>) {
                    float* split = scratch.lanes(static_cast<std::size_t>(gemv_max_rows * in));
                    for (index_t r = 0; r < m; ++r) avx2::split_row_by_parity(x.row(r), in, split + r * in);
                    xs = StridedMatrix<const float>{split, m, in, in};
                }
                parallel_for(
                    panels, m * out * in > 32768,
                    [&](index_t p) {
                        const index_t o0 = p * pw, o1 = std::min(out, o0 + pw);
                        if (m <= 2) avx2::gemv_streams_nt(xs, w, y, o0, o1, mode == Write::accumulate);
                        else avx2::gemv_rows_nt(xs, w, y, o0, o1, mode == Write::accumulate);
                    },
                    Schedule::ranges_then_rest);
                return;
            }
        }
#endif
#ifdef CPX_HAVE_GEMV_AVX512
        static_assert(gemv_max_rows <= 16, "the lane kernels hold one sequence per lane");
        // The input buffer is sized for every few-row count at once (the lane
        // kernels' transposed input is its largest use), so that a step with
        // another batch size than the one before allocates nothing.
        float* const lanes = avx512 ? scratch.lanes(static_cast<std::size_t>(avx512::lanes_scratch(in))) : nullptr;
        if (avx512 && m >= avx512::lanes_min_rows<W>) {
            // Sequences in the vector lanes: x transposed once (threads split the
            // features), then the panels.
            float* const xt = lanes;
            parallel_team(panels > 1 && m * out * in > 32768 ? max_threads() : 1, [&](int t, int team) {
                for_share((in + 63) / 64, t, team, [&](index_t b) {
                    avx512::lanes_transpose<W>(x, xt, 64 * b, std::min(in, 64 * b + 64));
                });
                team_barrier(team);
                for_share(panels, t, team, [&](index_t p) {
                    avx512::gemv_lanes_nt(xt, in, w, y, p * pw, std::min(out, (p + 1) * pw), mode == Write::accumulate);
                });
            });
            return;
        }
        if constexpr (std::is_same_v<W, bf16> || std::is_same_v<W, float>) {
            if (avx512 && m == 1) {
                // One row: each panel read as one stream (bf16: x split by parity once first).
                const float* xs = x.row(0);
                if constexpr (std::is_same_v<W, bf16>) {
                    avx512::split_row_by_parity(xs, in, lanes);
                    xs = lanes;
                }
                parallel_for(
                    panels, out * in > 32768,
                    [&](index_t p) {
                        avx512::gemv_row_nt<W>(xs, w, y.row(0), p * pw, std::min(out, (p + 1) * pw),
                                               mode == Write::accumulate);
                    },
                    Schedule::ranges_then_rest);
                return;
            }
        }
#endif
#ifdef CPX_HAVE_GEMV_AVX512
        StridedMatrix<const float> xs = x;  // bf16: each row split by parity once
        if constexpr (std::is_same_v<W, bf16>) {
            if (avx512) {
                for (index_t r = 0; r < m; ++r) avx512::split_row_by_parity(x.row(r), in, lanes + r * in);
                xs = StridedMatrix<const float>{lanes, m, in, in};
            }
        }
#endif
        parallel_for(panels, m * out * in > 32768, [&](index_t p) {
#ifdef CPX_HAVE_GEMV_AVX512
            if constexpr (std::is_same_v<W, bf16> || std::is_same_v<W, float>) {
                if (avx512) {
                    avx512::gemv_rows_nt(xs, w, y, p * pw, std::min(out, (p + 1) * pw), mode == Write::accumulate);
                    return;
                }
            }
#endif
            detail::gemv_rows_nt(x, w, y, p * pw, std::min(out, (p + 1) * pw), mode);
        }, Schedule::ranges_then_rest);
        return;
    }
    if constexpr (!std::is_same_v<W, float>) scratch.ensure(static_cast<std::size_t>(pw * in), threads);
    const auto xm = detail::eigen_rows(x);
    parallel_for(panels, m * out * in > 32768, [&](index_t p, int slot) {
        const index_t o0 = p * pw, n = std::min(pw, out - o0);
        const float* wp;
        index_t wld;
        if constexpr (std::is_same_v<W, float>) {
            wp = w.data + o0 * ld, wld = ld;
        } else {
            float* panel = scratch.thread_panel(slot);
            for (index_t o = 0; o < n; ++o) detail::widen(w.data + (o0 + o) * ld, in, panel + o * in);
            wp = panel, wld = in;
        }
        detail::write_product(detail::eigen_rows(y.columns(o0, n)), xm,
                              detail::ConstRowsMap(wp, n, in, Eigen::OuterStride<>(wld)).transpose(), mode);
    });
}

/// linear() through output features [first, first + count) of w alone (rows of the [out, in]
/// weight): a stacked projection of which the call needs a part. On a packed copy `first` must
/// start a panel (a multiple of packed_panel_cols); each output is then the same sum, bit for
/// bit, as in the whole product.
template <class W>
void linear_outputs(const StridedMatrix<const float>& x, const StridedMatrix<const W>& w, index_t first, index_t count,
                    const StridedMatrix<float>& y, Write mode, LinearScratch& scratch,
                    const PackedWeight* packed = nullptr) {
    require<ShapeError>(first >= 0 && count >= 0 && first + count <= w.rows, "linear: outputs [", first, ", ",
                        first + count, ") of a weight of ", w.rows);
    const StridedMatrix<const W> part = w.rows_range(first, count);
    if (!packed) return linear<W>(x, part, y, mode, scratch);
    detail::check_pack(w, true, *packed);
    detail::check_product("linear", x, part, w.cols, count, y);
    if (x.rows == 0 || count == 0) return;
    if (!detail::packed_outputs(x, *packed, first, count, y, mode, scratch)) linear<W>(x, part, y, mode, scratch);
}

/// y (=|+=) x . w with w [in, out] (input-major, as the routed experts store it).
/// `packed`: w packed (WeightOrientation::in_out) for the chosen arithmetic.
template <class W>
void matmul(const StridedMatrix<const float>& x, const StridedMatrix<const W>& w, const StridedMatrix<float>& y, Write mode,
            LinearScratch& scratch, const PackedWeight* packed = nullptr) {
    const index_t in = w.rows, out = w.cols, ld = w.ld, m = x.rows;
    detail::check_product("matmul", x, w, in, out, y);
    if (m == 0 || out == 0) return;
    if (detail::shared_paths(x, w, false, packed, y, mode, scratch)) return;
    const int threads = max_threads();
    if (m <= gemv_max_rows) {
#ifdef CPX_HAVE_GEMV_AVX512
        if constexpr (std::is_same_v<W, bf16> || std::is_same_v<W, float>) {
            if (vector_isa() == VectorIsa::avx512) {
                // The weight's rows read in order, into partial sums kept in scratch (sized for
                // any few-row count, so that a step with another batch size allocates nothing).
                float* const parts =
                    scratch.lanes(static_cast<std::size_t>(avx512::row_nn_scratch(in, out, gemv_max_rows)));
                avx512::gemv_rows_nn_streamed(x, w, y, mode == Write::accumulate, parts);
                return;
            }
        }
#endif
#ifdef CPX_HAVE_GEMV_AVX2
        if constexpr (std::is_same_v<W, bf16> || std::is_same_v<W, float>) {
            if (vector_isa() == VectorIsa::avx2) {
                float* const parts = scratch.lanes(static_cast<std::size_t>(avx2::nn_scratch(in, out, gemv_max_rows)));
                avx2::gemv_rows_nn_streamed(x, w, y, mode == Write::accumulate, parts);
                return;
            }
        }
#endif
        // Few rows, portable: wide column panels (one per thread, at most nn_panel) keep each
        // weight row segment long and contiguous; their accumulators live on the stack.
        static constexpr index_t nn_panel = 1024;
        const index_t per_thread = (out + threads - 1) / threads;
        const index_t pw = std::min(nn_panel, std::max<index_t>(64, (per_thread + 15) / 16 * 16));
        const index_t panels = (out + pw - 1) / pw;
        parallel_for(panels, m * out * in > 32768, [&](index_t p) {
            alignas(cache_line) float acc[gemv_max_rows * nn_panel];
            detail::gemv_rows_nn(x, w, y, p * pw, std::min(out, (p + 1) * pw), mode, acc);
        });
        return;
    }
    // More rows of 16-bit weights: each thread widens a column panel into its scratch. (fp32
    // weights of more rows returned in shared_paths, Eigen reading the stored matrix.)
    if constexpr (!std::is_same_v<W, float>) {
        const index_t pw = detail::panel_width(m, out, in, threads);
        const index_t panels = (out + pw - 1) / pw;
        scratch.ensure(static_cast<std::size_t>(pw * in), threads);
        const auto xm = detail::eigen_rows(x);
        parallel_for(panels, m * out * in > 32768, [&](index_t p, int slot) {
            const index_t o0 = p * pw, n = std::min(pw, out - o0);
            float* panel = scratch.thread_panel(slot);
            for (index_t i = 0; i < in; ++i) detail::widen(w.data + i * ld + o0, n, panel + i * n);
            detail::write_product(detail::eigen_rows(y.columns(o0, n)), xm,
                                  detail::ConstRowsMap(panel, in, n, Eigen::OuterStride<>(n)), mode);
        });
    }
}

/// Sizes `scratch` for the few-row matmul<W> products through an [in, out] weight
/// (one input row streams the weight's rows into partial sums kept there), so
/// that a caller taking turns between scratches can size them all beforehand.
template <class W>
void reserve_matmul(LinearScratch& scratch, index_t in, index_t out) {
#if defined(CPX_HAVE_GEMV_AVX512) && defined(CPX_HAVE_GEMV_AVX2)
    if constexpr (std::is_same_v<W, bf16> || std::is_same_v<W, float>)
        (void)scratch.lanes(static_cast<std::size_t>(
            std::max(avx512::row_nn_scratch(in, out, gemv_max_rows), avx2::nn_scratch(in, out, gemv_max_rows))));
#else
    (void)scratch, (void)in, (void)out;
#endif
}

/// linear() with a contiguous [out, in] weight.
template <class W>
void linear(const StridedMatrix<const float>& x, Matrix<const W> w, const StridedMatrix<float>& y, Write mode,
            LinearScratch& scratch, const PackedWeight* packed = nullptr) {
    linear<W>(x, rows_of(w), y, mode, scratch, packed);
}

/// matmul() with a contiguous [in, out] weight.
template <class W>
void matmul(const StridedMatrix<const float>& x, Matrix<const W> w, const StridedMatrix<float>& y, Write mode,
            LinearScratch& scratch, const PackedWeight* packed = nullptr) {
    matmul<W>(x, rows_of(w), y, mode, scratch, packed);
}

}  // namespace cpx::cpu

// The fp32 and bf16 instances of linear() and matmul(), written once for two uses: with
// CPX_EXTERN_KERNELS defined they are declared extern here, so that a source including this header
// does not compile them again, and cpu/kernel_instances.hpp defines them in one source.
#define CPX_LINEAR_INSTANCE(extern_, product, W)                                                           \
    extern_ template void cpx::cpu::product<W>(                                                            \
        const cpx::StridedMatrix<const float>&, const cpx::StridedMatrix<const W>&,                        \
        const cpx::StridedMatrix<float>&, cpx::cpu::Write, cpx::cpu::LinearScratch&, const cpx::cpu::PackedWeight*);
#define CPX_LINEAR_INSTANCES(extern_)                                                              \
    CPX_LINEAR_INSTANCE(extern_, linear, float) CPX_LINEAR_INSTANCE(extern_, linear, cpx::bf16)    \
    CPX_LINEAR_INSTANCE(extern_, matmul, float) CPX_LINEAR_INSTANCE(extern_, matmul, cpx::bf16)
#ifdef CPX_EXTERN_KERNELS
CPX_LINEAR_INSTANCES(extern)
#endif
