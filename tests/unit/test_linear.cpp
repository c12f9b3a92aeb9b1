// Weight products (nn.Linear layout and input-major layout, fp32 and bf16
// storage) against a plain double-precision matrix product.
#include <doctest/doctest.h>

#include <cpx/cpu/kernels/linear.hpp>

#include <cstring>
#include <limits>
#include <vector>

#include "test_support.hpp"
#include "vector_isas.hpp"

using namespace cpx;

namespace {
// y[m, o] = sum_i x[m, i] * w(o, i), w given as a function so both layouts share it.
template <class Weight>
std::vector<double> reference(const std::vector<float>& x, int rows, int in, int out, Weight w,
                              const std::vector<float>* initial = nullptr) {
    std::vector<double> y(static_cast<std::size_t>(rows) * out);
    for (int m = 0; m < rows; ++m)
        for (int o = 0; o < out; ++o) {
            double acc = initial ? (*initial)[m * out + o] : 0.0;
            for (int i = 0; i < in; ++i) acc += double(x[m * in + i]) * w(o, i);
            y[m * out + o] = acc;
        }
    return y;
}

template <class W>
std::vector<W> stored(const std::vector<float>& w) {
    std::vector<W> s(w.size());
    for (std::size_t i = 0; i < w.size(); ++i) s[i] = from_float<W>(w[i]);
    return s;
}

template <class W>
void check_layouts_now(int rows, int in, int out) {
    CAPTURE(rows);
    CAPTURE(in);
    CAPTURE(out);
    auto x = testing::random_normal(rows * in, 100 + rows);
    auto w = testing::random_normal(out * in, 200 + out, 0.1f);
    const auto ws = stored<W>(w);
    std::vector<float> wr(w.size());  // the stored values, which the reference must see
    for (std::size_t i = 0; i < w.size(); ++i) wr[i] = to_float(ws[i]);
    cpu::LinearScratch scratch;
    // fp32 sums of <= 300 products of O(0.1) terms: ~1e-6 relative.
    {
        auto y = testing::poisoned<float>(rows * out);
        cpu::linear<W>(cpu::rows_of<const float>(x.data(), rows, in), Matrix<const W>(ws.data(), out, in),
                       cpu::rows_of(y.data(), rows, out), cpu::Write::overwrite, scratch);
        auto want = reference(x, rows, in, out, [&](int o, int i) { return double(wr[o * in + i]); });
        CHECK(testing::relative_error(y, want) < 1e-5);
    }
    {  // the same weights read as [in, out]: w(o, i) = stored[i * out + o]
        auto y = testing::poisoned<float>(rows * out);
        cpu::matmul<W>(cpu::rows_of<const float>(x.data(), rows, in), Matrix<const W>(ws.data(), in, out),
                       cpu::rows_of(y.data(), rows, out), cpu::Write::overwrite, scratch);
        auto want = reference(x, rows, in, out, [&](int o, int i) { return double(wr[i * out + o]); });
        CHECK(testing::relative_error(y, want) < 1e-5);
    }
}

template <class W>
void check_layouts(int rows, int in, int out) {
    for (cpu::VectorIsa isa : testing::vector_isas()) {
        const cpu::VectorIsaLimit limit(isa);
        CAPTURE(cpu::vector_isa_name(isa));
        check_layouts_now<W>(rows, in, out);
    }
}

/// The packed arithmetics this machine runs (fp32_packed, bf16), saying which it lacks.
std::vector<cpu::Compute> packed_computes() {
    std::vector<cpu::Compute> computes;
    if (cpu::gemm_f32_packed_available()) computes.push_back(cpu::Compute::fp32_packed);
    if (cpu::best_bf16_level() != cpu::Bf16Level::none) computes.push_back(cpu::Compute::bf16);
    if (computes.empty()) MESSAGE("skipped: no packed arithmetic on this machine (", cpu::cpu_features().summary(), ")");
    return computes;
}

}  // namespace

TEST_CASE("linear and matmul match the reference with fp32 weights for GEMV and GEMM row counts") {
    for (int rows : {1, 2, 3, 5, 7, 8, 9, 14, 16, 17, 40})
        for (int in : {16, 67})
            for (int out : {5, 48, 300}) check_layouts<float>(rows, in, out);
}

TEST_CASE("linear and matmul match the reference with bf16 weights (fp32 arithmetic on the stored values)") {
    for (int rows : {1, 2, 9, 33})
        for (int in : {32, 75})
            for (int out : {7, 64, 257}) check_layouts<bf16>(rows, in, out);
}

TEST_CASE_TEMPLATE("few-row products at decode sizes: several panels, odd tails, accumulation", W, float, bf16) {
    // Decode's kernels (one to gemv_max_rows rows) split the output into panels
    // per thread and handle the input in blocks of 16 or 32 (one row: 64 inputs
    // at a time) and the rows in groups of 4, or (nn.Linear weights from
    // avx512::lanes_min_rows: 6 rows for fp32, 16 for bf16; AVX2 from 5 and 14) one row per
    // vector lane (8 lanes up to 8 rows, else 16) and the outputs in blocks of 8 (AVX2: 8 or 4); the
    // input-major ones split the input into chunks, read in bands of 8 weight
    // rows (one row: each weight row whole) into strips of 64 columns. These
    // sizes leave remainders in every direction and cover both sides of the
    // lane thresholds and widths. The AVX2 kernels take 16 inputs per chunk, pairs of
    // input rows against four weight rows (one or two rows: four rows from the four
    // quarters of a panel, the panel's last 1-3 rows one at a time), and cut input-major
    // weights into 1, 2 or 4 blocks of rows (800 inputs: 2, 1061: 4), read four weight rows
    // at a time (one input row: one from each quarter of the block, then the rest). 40 inputs are
    // one 32-input line and a tail (the bf16 lane kernel widens the next line while it
    // computes one). Every kernel family the machine runs (AVX-512, AVX2, portable) is checked.
    // At the AVX-512 level both stream-fetch choices (testing::kernel_variants).
    const auto variants = testing::kernel_variants();
    for (int rows : {1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 13, 14, 15, 16})
        for (int in : {40, 800, 1061})
            for (int out : {1027, 2050}) {
                CAPTURE(rows);
                CAPTURE(in);
                CAPTURE(out);
                auto x = testing::random_normal(rows * in, 7 + rows);
                const auto ws = stored<W>(testing::random_normal(out * in, 8 + out, 0.05f));
                auto y0 = testing::random_normal(rows * out, 9);
                cpu::LinearScratch scratch;
                for (bool input_major : {false, true}) {
                    CAPTURE(input_major);
                    // The double-precision reference, once per layout for every kernel family (it
                    // was most of this test's time under the sanitizers when computed per family).
                    const auto weight = [&](int o, int i) {
                        return double(to_float(input_major ? ws[i * out + o] : ws[o * in + i]));
                    };
                    const auto want = reference(x, rows, in, out, weight, &y0);
                    for (const testing::KernelVariant& variant : variants) {
                        const testing::KernelVariantLimit limit(variant);
                        CAPTURE(variant.name());
                        auto y = y0;
                        const auto xr = cpu::rows_of<const float>(x.data(), rows, in);
                        if (input_major)
                            cpu::matmul<W>(xr, Matrix<const W>(ws.data(), in, out), cpu::rows_of(y.data(), rows, out),
                                           cpu::Write::accumulate, scratch);
                        else
                            cpu::linear<W>(xr, Matrix<const W>(ws.data(), out, in), cpu::rows_of(y.data(), rows, out),
                                           cpu::Write::accumulate, scratch);
                        CHECK(testing::relative_error(y, want) < 1e-5);
                    }
                }
            }
}

TEST_CASE("one row against input-major bf16 weights: every thread count gives the same bits, chunks read in pairs") {
    // One input row splits the input into chunks (256 inputs: 2, 450: 3, 1061: 4) whose partial
    // sums are added in order; on AVX-512 without fetches a thread reads its bf16 chunks two at
    // a time up to 1792 outputs (1792 and 300 here), one after the other above (1793). Whatever
    // the threads and their share of chunks (one to three threads: pairs, a chunk left alone,
    // a thread without a pair), the output has the bits of one thread's.
    for (cpu::VectorIsa isa : testing::vector_isas())
        for (int in : {256, 450, 1061})
            for (int out : {300, 1792, 1793}) {
                const cpu::VectorIsaLimit limit(isa);
                CAPTURE(cpu::vector_isa_name(isa));
                CAPTURE(in);
                CAPTURE(out);
                const auto x = testing::random_normal(in, 31);
                const auto ws = stored<bf16>(testing::random_normal(out * in, 32, 0.05f));
                const auto want =
                    reference(x, 1, in, out, [&](int o, int i) { return double(to_float(ws[i * out + o])); });
                std::vector<float> first;
                for (int threads : {1, 2, 3}) {
                    CAPTURE(threads);
                    auto y = testing::poisoned<float>(out);
                    cpu::LinearScratch scratch;
                    testing::on_threads(threads, [&] {
                        cpu::matmul<bf16>(cpu::rows_of<const float>(x.data(), 1, in),
                                          Matrix<const bf16>(ws.data(), in, out), cpu::rows_of(y.data(), 1, out),
                                          cpu::Write::overwrite, scratch);
                    });
                    CHECK(testing::relative_error(y, want) < 1e-5);
                    if (first.empty()) first = y;
                    else CHECK(std::memcmp(first.data(), y.data(), y.size() * sizeof(float)) == 0);
                }
            }
}

TEST_CASE_TEMPLATE("few-row products write or add to strided sub-blocks and leave other columns alone", W, float,
                   bf16) {
    // x is columns [4, 4+in) of rows of 50; y is columns [10, 10+out) of rows of
    // 60; w is columns [3, 3+in) of rows of in + 9 (a column range of a wider
    // matrix). One and two rows, three to six, nine, eleven and fifteen: the one-row kernels, the
    // few-row ones (AVX2 fp32 at 3 and 4 rows: two passes of two weight rows, the last block one
    // row long) and the lane kernels (one and two vectors of sequences); overwritten outputs start as NaN.
    const int in = 40, out = 33, wld = in + 9;
    for (cpu::VectorIsa isa : testing::vector_isas())
        for (int rows : {1, 2, 3, 4, 5, 6, 9, 11, 15})
            for (cpu::Write mode : {cpu::Write::overwrite, cpu::Write::accumulate}) {
                const cpu::VectorIsaLimit limit(isa);
                CAPTURE(cpu::vector_isa_name(isa));
                CAPTURE(rows);
                CAPTURE(mode == cpu::Write::accumulate);
                auto xb = testing::random_normal(rows * 50, 1);
                auto yb = testing::random_normal(rows * 60, 2);
                if (mode == cpu::Write::overwrite)
                    for (int m = 0; m < rows; ++m)
                        for (int o = 0; o < out; ++o) yb[m * 60 + 10 + o] = std::numeric_limits<float>::quiet_NaN();
                const auto wb = stored<W>(testing::random_normal(out * wld, 3, 0.2f));
                std::vector<float> x(rows * in), y0(rows * out);
                for (int m = 0; m < rows; ++m) {
                    for (int i = 0; i < in; ++i) x[m * in + i] = xb[m * 50 + 4 + i];
                    for (int o = 0; o < out; ++o) y0[m * out + o] = yb[m * 60 + 10 + o];
                }
                const auto before = yb;
                cpu::LinearScratch scratch;
                cpu::linear<W>(StridedMatrix<const float>{xb.data() + 4, rows, in, 50},
                               StridedMatrix<const W>{wb.data() + 3, out, in, wld},
                               StridedMatrix<float>{yb.data() + 10, rows, out, 60}, mode, scratch);
                auto want = reference(x, rows, in, out, [&](int o, int i) { return double(to_float(wb[o * wld + 3 + i])); },
                                      mode == cpu::Write::accumulate ? &y0 : nullptr);
                std::vector<float> got(rows * out);
                for (int m = 0; m < rows; ++m)
                    for (int o = 0; o < 60; ++o) {
                        if (o >= 10 && o < 10 + out) got[m * out + o - 10] = yb[m * 60 + o];
                        else CHECK(yb[m * 60 + o] == before[m * 60 + o]);
                    }
                CHECK(testing::relative_error(got, want) < 1e-5);
            }
}

TEST_CASE("many-row fp32 products split over 1-4 threads: column blocks, row blocks, strided, accumulated") {
    // More than 16 rows on fp32 weights: one block of y per thread, of columns where y has 16
    // per thread (out 48 and 300), of rows otherwise (out 5 and 20). x is columns [3, 3+in) of
    // rows of in + 7, y columns [2, 2+out) of rows of out + 5, w a column range of a wider
    // matrix; the columns around y's must stay as they were.
    const int in = 67;
    for (int threads : {1, 2, 3, 4})
        for (int rows : {17, 37, 100})
            for (int out : {5, 20, 48, 300})
                for (bool accumulate : {false, true})
                    for (bool input_major : {false, true}) {
                        CAPTURE(threads);
                        CAPTURE(rows);
                        CAPTURE(out);
                        CAPTURE(accumulate);
                        CAPTURE(input_major);
                        const int xld = in + 7, yld = out + 5;
                        const int wrows = input_major ? in : out, wcols = input_major ? out : in, wld = wcols + 9;
                        const auto xb = testing::random_normal(rows * xld, 10 + rows);
                        const auto wb = testing::random_normal(wrows * wld, 20 + out, 0.1f);
                        auto yb = testing::random_normal(rows * yld, 30);
                        if (!accumulate)
                            for (int m = 0; m < rows; ++m)
                                for (int o = 0; o < out; ++o) yb[m * yld + 2 + o] = std::numeric_limits<float>::quiet_NaN();
                        const auto before = yb;
                        std::vector<float> x(rows * in), y0(rows * out);
                        for (int m = 0; m < rows; ++m) {
                            for (int i = 0; i < in; ++i) x[m * in + i] = xb[m * xld + 3 + i];
                            for (int o = 0; o < out; ++o) y0[m * out + o] = before[m * yld + 2 + o];
                        }
                        const StridedMatrix<const float> xs{xb.data() + 3, rows, in, xld};
                        const StridedMatrix<const float> ws{wb.data() + 4, wrows, wcols, wld};
                        const StridedMatrix<float> ys{yb.data() + 2, rows, out, yld};
                        const auto mode = accumulate ? cpu::Write::accumulate : cpu::Write::overwrite;
                        cpu::LinearScratch scratch;
                        testing::on_threads(threads, [&] {
                            if (input_major) cpu::matmul<float>(xs, ws, ys, mode, scratch);
                            else cpu::linear<float>(xs, ws, ys, mode, scratch);
                            return 0;
                        });
                        const auto want = reference(
                            x, rows, in, out,
                            [&](int o, int i) {
                                return double(input_major ? wb[i * wld + 4 + o] : wb[o * wld + 4 + i]);
                            },
                            accumulate ? &y0 : nullptr);
                        std::vector<float> got(rows * out);
                        bool outside_kept = true;
                        for (int m = 0; m < rows; ++m)
                            for (int o = 0; o < yld; ++o) {
                                if (o >= 2 && o < 2 + out) got[m * out + o - 2] = yb[m * yld + o];
                                else outside_kept = outside_kept && yb[m * yld + o] == before[m * yld + o];
                            }
                        CHECK(outside_kept);
                        CHECK(testing::relative_error(got, want) < 1e-5);
                    }
}

TEST_CASE_TEMPLATE("a weight with no inputs gives a zero product, or leaves an accumulated output alone", W, float,
                   bf16) {
    const int out = 70;
    const std::vector<float> x(1, 0.0f);  // rows of zero features: any pointer will do
    const std::vector<W> w(1);
    for (cpu::VectorIsa isa : testing::vector_isas())
        for (int rows : {1, 4, 16, 40})
            for (bool input_major : {false, true})
                for (cpu::Write mode : {cpu::Write::overwrite, cpu::Write::accumulate}) {
                    const cpu::VectorIsaLimit limit(isa);
                    CAPTURE(cpu::vector_isa_name(isa));
                    CAPTURE(rows);
                    CAPTURE(input_major);
                    const auto y0 = testing::random_normal(rows * out, 3);
                    auto y = y0;
                    cpu::LinearScratch scratch;
                    const StridedMatrix<const float> xr{x.data(), rows, 0, 0};
                    if (input_major)
                        cpu::matmul<W>(xr, StridedMatrix<const W>{w.data(), 0, out, out}, cpu::rows_of(y.data(), rows, out),
                                       mode, scratch);
                    else
                        cpu::linear<W>(xr, StridedMatrix<const W>{w.data(), out, 0, 0}, cpu::rows_of(y.data(), rows, out),
                                       mode, scratch);
                    for (std::size_t i = 0; i < y.size(); ++i)
                        REQUIRE(y[i] == (mode == cpu::Write::accumulate ? y0[i] : 0.0f));
                }
}

TEST_CASE("products are bit-identical run to run") {
    const int rows = 1, in = 96, out = 1000;
    auto x = testing::random_normal(rows * in, 4);
    auto w = stored<bf16>(testing::random_normal(out * in, 5));
    cpu::LinearScratch s1, s2;
    std::vector<float> a(out), b(out);
    cpu::linear<bf16>(cpu::rows_of<const float>(x.data(), rows, in), Matrix<const bf16>(w.data(), out, in),
                      cpu::rows_of(a.data(), rows, out), cpu::Write::overwrite, s1);
    cpu::linear<bf16>(cpu::rows_of<const float>(x.data(), rows, in), Matrix<const bf16>(w.data(), out, in),
                      cpu::rows_of(b.data(), rows, out), cpu::Write::overwrite, s2);
    for (int o = 0; o < out; ++o) CHECK(a[o] == b[o]);
}

TEST_CASE_TEMPLATE("AVX2: a row's outputs are the same bits alone and with other rows (nn.Linear below the lane "
                   "kernels, input-major up to gemv_max_rows)",
                   W, float, bf16) {
    // The AVX2 nn.Linear kernels for one or two rows (four streams) and for three up to
    // lanes_min_rows - 1 (blocks of four weight rows), and the input-major kernel for any few
    // rows, sum every output in one order, so a sequence's decode products do not depend on how
    // many sequences share the step.
#ifndef CPX_HAVE_GEMV_AVX2
    MESSAGE("skipped: not an x86 build");
#else
    if (cpu::machine_vector_isa() < cpu::VectorIsa::avx2) {
        MESSAGE("skipped: no AVX2 and FMA (", cpu::cpu_features().summary(), ")");
        return;
    }
    const cpu::VectorIsaLimit limit(cpu::VectorIsa::avx2);
    const int in = 1061, out = 1027;
    const auto x = testing::random_normal(cpu::gemv_max_rows * in, 21);
    const auto w = stored<W>(testing::random_normal(out * in, 22, 0.05f));
    cpu::LinearScratch scratch;
    for (bool input_major : {false, true}) {
        CAPTURE(input_major);
        const auto product = [&](int rows, std::vector<float>& y) {
            const auto xr = cpu::rows_of<const float>(x.data(), rows, in);
            if (input_major)
                cpu::matmul<W>(xr, Matrix<const W>(w.data(), in, out), cpu::rows_of(y.data(), rows, out),
                               cpu::Write::overwrite, scratch);
            else
                cpu::linear<W>(xr, Matrix<const W>(w.data(), out, in), cpu::rows_of(y.data(), rows, out),
                               cpu::Write::overwrite, scratch);
        };
        std::vector<float> alone(out);
        product(1, alone);
        const int most = input_major ? static_cast<int>(cpu::gemv_max_rows)
                                     : static_cast<int>(cpu::avx2::lanes_min_rows<W>) - 1;
        for (int rows = 2; rows <= most; ++rows) {
            CAPTURE(rows);
            std::vector<float> y(rows * out);
            product(rows, y);
            int differing = 0;
            for (int o = 0; o < out; ++o) differing += y[o] != alone[o];
            CHECK(differing == 0);
        }
    }
#endif
}

TEST_CASE("a packed copy is what every call reads, one row to many, both layouts, both modes") {
    // The pack is made from the negated weights, so a result equal to -reference shows the
    // pack ran and the stored weight was not read. fp32 packs: fp32 sums (1e-5, as above);
    // bf16 packs round x and w to bf16 (2^-8 each, random in sign: ~3e-3 measured).
    std::vector<std::pair<cpu::Compute, double>> computes;
    if (cpu::gemm_f32_packed_available()) computes.emplace_back(cpu::Compute::fp32_packed, 1e-5);
    if (cpu::best_bf16_level() != cpu::Bf16Level::none) computes.emplace_back(cpu::Compute::bf16, 2e-2);
    if (computes.empty()) MESSAGE("skipped: no packed arithmetic on this machine (", cpu::cpu_features().summary(), ")");
    const int in = 67, out = 300;
    const auto w = testing::random_normal(out * in, 7, 0.1f);  // [out, in]
    std::vector<float> negated(w.size()), negated_t(w.size()), w_t(w.size());  // _t: [in, out]
    for (int o = 0; o < out; ++o)
        for (int i = 0; i < in; ++i) {
            negated[o * in + i] = negated_t[i * out + o] = -w[o * in + i];
            w_t[i * out + o] = w[o * in + i];
        }
    cpu::LinearScratch scratch;
    for (const auto& [compute, bound] : computes) {
        const std::string_view arithmetic = cpu::compute_name(compute);  // CAPTURE's lambda cannot take a binding (clang < 16)
        CAPTURE(arithmetic);
        const auto nn = cpu::PackedWeight::pack(cpu::rows_of<const float>(negated.data(), out, in),
                                                cpu::WeightOrientation::out_in, compute);
        const auto io = cpu::PackedWeight::pack(cpu::rows_of<const float>(negated_t.data(), in, out),
                                                cpu::WeightOrientation::in_out, compute);
        for (int rows : {1, 2, 5, 8, 9, 17}) {
            CAPTURE(rows);
            const auto x = testing::random_normal(rows * in, 300 + rows);
            const auto initial = testing::random_normal(rows * out, 400 + rows);
            const auto want = reference(x, rows, in, out, [&](int o, int i) { return -double(w[o * in + i]); });
            const auto want_acc = reference(x, rows, in, out, [&](int o, int i) { return -double(w[o * in + i]); },
                                            &initial);
            auto y = testing::poisoned<float>(rows * out);
            cpu::linear<float>(cpu::rows_of<const float>(x.data(), rows, in), Matrix<const float>(w.data(), out, in),
                               cpu::rows_of(y.data(), rows, out), cpu::Write::overwrite, scratch, &nn);
            CHECK(testing::relative_error(y, want) < bound);
            y = initial;
            cpu::matmul<float>(cpu::rows_of<const float>(x.data(), rows, in), Matrix<const float>(w_t.data(), in, out),
                               cpu::rows_of(y.data(), rows, out), cpu::Write::accumulate, scratch, &io);
            CHECK(testing::relative_error(y, want_acc) < bound);
        }
        // A pack of another shape than the weight it stands for is refused.
        std::vector<float> x(in), y(out - 1);
        CHECK_THROWS_AS(cpu::linear<float>(cpu::rows_of<const float>(x.data(), 1, in),
                                           Matrix<const float>(w.data(), out - 1, in), cpu::rows_of(y.data(), 1, out - 1),
                                           cpu::Write::overwrite, scratch, &nn),
                        ShapeError);
    }
}

TEST_CASE_TEMPLATE("a packed weight with no inputs gives a zero product, or leaves an accumulated output alone", W,
                   float, bf16) {
    // The packed kernels' own K = 0 exits (gemm_f32_packed, gemm_bf16 on each bf16 level), from
    // one row to many, for both orientations of the pack.
    const std::vector<cpu::Compute> computes = packed_computes();
    const int out = 70;
    const std::vector<float> x(1, 0.0f);  // rows of zero features: any pointer will do
    const std::vector<W> w(1);
    for (const cpu::Compute compute : computes)
        for (bool input_major : {false, true}) {
            const std::string_view arithmetic = cpu::compute_name(compute);
            CAPTURE(arithmetic);
            CAPTURE(input_major);
            const StridedMatrix<const W> stored =
                input_major ? StridedMatrix<const W>{w.data(), 0, out, out} : StridedMatrix<const W>{w.data(), out, 0, 0};
            const auto packed = cpu::PackedWeight::pack(
                stored, input_major ? cpu::WeightOrientation::in_out : cpu::WeightOrientation::out_in, compute);
            for (int rows : {1, 3, 16, 40})
                for (cpu::Write mode : {cpu::Write::overwrite, cpu::Write::accumulate}) {
                    CAPTURE(rows);
                    const auto y0 = testing::random_normal(rows * out, 5);
                    auto y = y0;
                    cpu::LinearScratch scratch;
                    const StridedMatrix<const float> xr{x.data(), rows, 0, 0};
                    if (input_major) cpu::matmul<W>(xr, stored, cpu::rows_of(y.data(), rows, out), mode, scratch, &packed);
                    else cpu::linear<W>(xr, stored, cpu::rows_of(y.data(), rows, out), mode, scratch, &packed);
                    for (std::size_t i = 0; i < y.size(); ++i)
                        REQUIRE(y[i] == (mode == cpu::Write::accumulate ? y0[i] : 0.0f));
                }
        }
}

TEST_CASE("fp32_packed on a bf16 weight: bf16 panels, the fp32 product of the stored values, equal to the unpacked path") {
    // The pack of a bf16 weight keeps its values in bf16 panels (half of fp32 panels) and the
    // kernel widens them exactly: the same fp32 sums of the same products as the stored-weight
    // path, in another order (1e-5), for odd and even inputs, one row to many, both layouts.
    if (!cpu::gemm_f32_packed_available()) {
        MESSAGE("skipped: neither AVX-512 nor AVX2 and FMA (", cpu::cpu_features().summary(), ")");
        return;
    }
    cpu::LinearScratch scratch;
    for (int in : {67, 64}) {
        CAPTURE(in);
        const int out = 150;
        const auto w16 = stored<bf16>(testing::random_normal(out * in, 8, 0.1f));  // [out, in]
        std::vector<bf16> w16_t(w16.size());                                       // [in, out]
        for (int o = 0; o < out; ++o)
            for (int i = 0; i < in; ++i) w16_t[i * out + o] = w16[o * in + i];
        const auto nn = cpu::PackedWeight::pack(cpu::rows_of<const bf16>(w16.data(), out, in),
                                                cpu::WeightOrientation::out_in, cpu::Compute::fp32_packed);
        const auto io = cpu::PackedWeight::pack(cpu::rows_of<const bf16>(w16_t.data(), in, out),
                                                cpu::WeightOrientation::in_out, cpu::Compute::fp32_packed);
        REQUIRE(nn.bf16_widened() != nullptr);
        CHECK(nn.f32() == nullptr);
        CHECK(nn.bf16() == nullptr);
        CHECK(cpu::compute_of(&nn) == cpu::Compute::fp32_packed);
        CHECK(nn.bytes() == nn.bf16_widened()->bytes());
        CHECK(nn.outputs() == out);
        CHECK(nn.inputs() == in);
        for (int rows : {1, 3, 6, 16, 40}) {
            CAPTURE(rows);
            const auto x = testing::random_normal(rows * in, 500 + rows);
            const auto initial = testing::random_normal(rows * out, 600 + rows);
            const auto weight = [&](int o, int i) { return double(w16[o * in + i].to_float()); };
            auto y = testing::poisoned<float>(rows * out);
            cpu::linear<bf16>(cpu::rows_of<const float>(x.data(), rows, in), Matrix<const bf16>(w16.data(), out, in),
                              cpu::rows_of(y.data(), rows, out), cpu::Write::overwrite, scratch, &nn);
            CHECK(testing::relative_error(y, reference(x, rows, in, out, weight)) < 1e-5);
            auto plain = testing::poisoned<float>(rows * out);
            cpu::linear<bf16>(cpu::rows_of<const float>(x.data(), rows, in), Matrix<const bf16>(w16.data(), out, in),
                              cpu::rows_of(plain.data(), rows, out), cpu::Write::overwrite, scratch);
            CHECK(testing::relative_error(y, std::vector<double>(plain.begin(), plain.end())) < 1e-5);
            y = initial;
            cpu::matmul<bf16>(cpu::rows_of<const float>(x.data(), rows, in), Matrix<const bf16>(w16_t.data(), in, out),
                              cpu::rows_of(y.data(), rows, out), cpu::Write::accumulate, scratch, &io);
            CHECK(testing::relative_error(y, reference(x, rows, in, out, weight, &initial)) < 1e-5);
        }
    }
}

TEST_CASE_TEMPLATE("a range of a packed weight's outputs: the same bits as those columns of the whole product", W,
                   float, bf16) {
    // Attention projects k and v alone (outputs from q_width on) for rows it does not finish:
    // the range must reproduce the stacked product's columns exactly, from one row to many,
    // in both modes; a range that does not start a panel is refused, and unpacked weights
    // compute those rows of the weight (up to the order of fp32 sums).
    const std::vector<cpu::Compute> computes = packed_computes();
    const int in = 45, out = 64 * 3 + 30;
    const auto w = stored<W>(testing::random_normal(out * in, 21, 0.1f));
    const Matrix<const W> weight(w.data(), out, in);
    cpu::LinearScratch scratch;
    for (const cpu::Compute compute : computes) {
        CAPTURE(cpu::compute_name(compute));
        const auto packed = cpu::PackedWeight::pack(cpu::rows_of<const W>(w.data(), out, in),
                                                    cpu::WeightOrientation::out_in, compute);
        for (int rows : {1, 7, 40})
            for (const cpu::Write mode : {cpu::Write::overwrite, cpu::Write::accumulate}) {
                CAPTURE(rows);
                const auto x = testing::random_normal(rows * in, 700 + rows);
                const auto initial = testing::random_normal(rows * out, 800 + rows);
                auto whole = mode == cpu::Write::accumulate ? initial : testing::poisoned<float>(rows * out);
                cpu::linear<W>(cpu::rows_of<const float>(x.data(), rows, in), weight, cpu::rows_of(whole.data(), rows, out),
                               mode, scratch, &packed);
                for (const auto& columns : {std::pair{64, out - 64}, std::pair{128, 50}, std::pair{0, 64}}) {
                    const auto first = columns.first, count = columns.second;  // no bindings: CAPTURE is a lambda
                    CAPTURE(first);
                    auto part = whole;  // columns outside [first, first + count) keep the whole product's values
                    for (int r = 0; r < rows; ++r)
                        for (int o = first; o < first + count; ++o)
                            part[r * out + o] = mode == cpu::Write::accumulate ? initial[r * out + o]
                                                                               : std::numeric_limits<float>::quiet_NaN();
                    cpu::linear_outputs<W>(cpu::rows_of<const float>(x.data(), rows, in), weight, first, count,
                                           cpu::rows_of(part.data(), rows, out).columns(first, count), mode, scratch,
                                           &packed);
                    CHECK(part == whole);
                }
            }
        std::vector<float> x(in), y(64);
        CHECK_THROWS_AS(cpu::linear_outputs<W>(cpu::rows_of<const float>(x.data(), 1, in), weight, 32, 64,
                                               cpu::rows_of(y.data(), 1, 64), cpu::Write::overwrite, scratch, &packed),
                        ShapeError);
        CHECK_THROWS_AS(cpu::linear_outputs<W>(cpu::rows_of<const float>(x.data(), 1, in), weight, 192, 64,
                                               cpu::rows_of(y.data(), 1, 64), cpu::Write::overwrite, scratch, &packed),
                        ShapeError);
    }
    // Unpacked: the rows [first, first + count) of the weight, any first.
    const auto x = testing::random_normal(3 * in, 900);
    auto whole = testing::poisoned<float>(3 * out);
    cpu::linear<W>(cpu::rows_of<const float>(x.data(), 3, in), weight, cpu::rows_of(whole.data(), 3, out),
                   cpu::Write::overwrite, scratch);
    std::vector<float> part = testing::poisoned<float>(3 * 40);
    cpu::linear_outputs<W>(cpu::rows_of<const float>(x.data(), 3, in), weight, 33, 40, cpu::rows_of(part.data(), 3, 40),
                           cpu::Write::overwrite, scratch);
    std::vector<double> want(3 * 40);
    for (int r = 0; r < 3; ++r)
        for (int o = 0; o < 40; ++o) want[r * 40 + o] = whole[r * out + 33 + o];
    CHECK(testing::relative_error(part, want) < 1e-6);
}

TEST_CASE_TEMPLATE("prefill-sized products on stored weights pack them per call: chunks, strip blocks, tails, strides",
                   W, float, bf16) {
    // From repack_min_rows rows and one panel of outputs, linear() and matmul() without a packed
    // copy pack the weight during the call, a chunk of panels at a time, for the packed fp32 kernel
    // (gemm_repacked.hpp). Inputs past one strip block (1024) with a tail, outputs that are not
    // whole panels, chunks of one panel per thread (the smallest budget), strided x, y and w, both
    // modes; the columns around y's stay as they were. fp32 sums of up to 1030 products: 2e-5.
    // Through linear()/matmul() the result is gemm_repacked's, bit for bit, at every vector level
    // but the portable one (which keeps Eigen's product).
    if (!cpu::gemm_f32_packed_available()) {
        MESSAGE("skipped: the packed fp32 kernel needs AVX2 or AVX-512 (", cpu::cpu_features().summary(), ")");
        return;
    }
    const int rows = cpu::repack_min_rows + 6;
    for (int in : {33, 1030})
        for (int out : {64, 130})
            for (bool input_major : {false, true}) {
                CAPTURE(in);
                CAPTURE(out);
                CAPTURE(input_major);
                const int xld = in + 3, yld = out + 5;
                const int wrows = input_major ? in : out, wcols = input_major ? out : in, wld = wcols + 9;
                const auto xb = testing::random_normal(rows * xld, 11 + in);
                const auto wf = testing::random_normal(wrows * wld, 21 + out, 0.1f);
                const auto wb = stored<W>(wf);
                const auto initial = testing::random_normal(rows * yld, 31);
                std::vector<float> x(rows * in), y0(rows * out);
                for (int m = 0; m < rows; ++m) {
                    for (int i = 0; i < in; ++i) x[m * in + i] = xb[m * xld + 1 + i];
                    for (int o = 0; o < out; ++o) y0[m * out + o] = initial[m * yld + 2 + o];
                }
                const auto weight = [&](int o, int i) {
                    return double(to_float(input_major ? wb[i * wld + 4 + o] : wb[o * wld + 4 + i]));
                };
                const auto want = reference(x, rows, in, out, weight);
                const auto want_acc = reference(x, rows, in, out, weight, &y0);
                const StridedMatrix<const float> xs{xb.data() + 1, rows, in, xld};
                const StridedMatrix<const W> ws{wb.data() + 4, wrows, wcols, wld};
                const auto orientation = input_major ? cpu::WeightOrientation::in_out : cpu::WeightOrientation::out_in;
                for (cpu::VectorIsa isa : testing::vector_isas()) {
                    if (isa == cpu::VectorIsa::portable) continue;
                    const cpu::VectorIsaLimit limit(isa);
                    CAPTURE(cpu::vector_isa_name(isa));
                    REQUIRE(cpu::repack_pays(rows, out));
                    for (int threads : {1, 3})
                        for (bool accumulate : {false, true}) {
                            CAPTURE(threads);
                            CAPTURE(accumulate);
                            auto chunked = accumulate ? initial : testing::poisoned<float>(rows * yld);
                            auto whole = chunked;
                            cpu::LinearScratch scratch;
                            cpu::AlignedVector<float> buffer;
                            const auto mode = accumulate ? cpu::Write::accumulate : cpu::Write::overwrite;
                            testing::on_threads(threads, [&] {
                                cpu::gemm_repacked<W>(xs, ws, orientation, {chunked.data() + 2, rows, out, yld},
                                                      accumulate, buffer, 1);
                                const StridedMatrix<float> ys{whole.data() + 2, rows, out, yld};
                                if (input_major) cpu::matmul<W>(xs, ws, ys, mode, scratch);
                                else cpu::linear<W>(xs, ws, ys, mode, scratch);
                                return 0;
                            });
                            std::vector<float> got(rows * out);
                            bool outside_kept = true, same = true;
                            for (int m = 0; m < rows; ++m)
                                for (int o = 0; o < yld; ++o) {
                                    const std::size_t at = static_cast<std::size_t>(m * yld + o);
                                    if (o >= 2 && o < 2 + out) {
                                        got[m * out + o - 2] = chunked[at];
                                        same = same && chunked[at] == whole[at];
                                    } else {
                                        const float before =
                                            accumulate ? initial[at] : std::numeric_limits<float>::quiet_NaN();
                                        outside_kept = outside_kept && std::memcmp(&chunked[at], &before, 4) == 0 &&
                                                       std::memcmp(&whole[at], &before, 4) == 0;
                                    }
                                }
                            CHECK(outside_kept);
                            CHECK(same);
                            CHECK(testing::relative_error(got, accumulate ? want_acc : want) < 2e-5);
                        }
                }
            }
}

TEST_CASE("products reject mismatched shapes") {
    std::vector<float> buf(256);
    cpu::LinearScratch scratch;
    CHECK_THROWS_AS(cpu::linear<float>(cpu::rows_of<const float>(buf.data(), 2, 8), Matrix<const float>(buf.data(), 4, 7),
                                       cpu::rows_of(buf.data() + 128, 2, 4), cpu::Write::overwrite, scratch),
                    ShapeError);
    CHECK_THROWS_AS(cpu::matmul<float>(cpu::rows_of<const float>(buf.data(), 2, 8), Matrix<const float>(buf.data(), 8, 4),
                                       cpu::rows_of(buf.data() + 128, 3, 4), cpu::Write::overwrite, scratch),
                    ShapeError);
}
