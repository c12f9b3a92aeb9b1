// The packed fp32 product (cpu/kernels/gemm_f32_packed.hpp), on fp32 panels and on a bf16
// weight's panels, against a double-precision reference. The operands are exact in fp32
// (a bf16 weight's values widen exactly), so only the summation errs:
// |y - y_exact| <= (K + 1) 2^-24 S per element, S = |y0| + sum_k |x_k w_k|
// (K additions, one more when accumulating into y0), checked element by element.
// Both panel layouts (rows, and the column strips the AVX2 kernel's weights are packed in)
// under every kernel: a product over strips runs on the AVX2 kernel whatever the level.
#include <doctest/doctest.h>

#include <cpx/cpu/kernels/gemm_f32_packed.hpp>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "test_support.hpp"
#include "vector_isas.hpp"

using namespace cpx;

namespace {

/// Runs `check` once per micro-kernel this machine has (AVX-512, AVX2), each chosen by capping
/// the vector set; with neither, says why it skipped.
template <class Check>
void on_each_kernel(Check&& check) {
    if (!cpu::gemm_f32_packed_available()) {
        MESSAGE("skipped: this machine has neither AVX2 nor AVX-512 (", cpu::cpu_features().summary(), ")");
        return;
    }
    for (const testing::KernelVariant& variant : testing::kernel_variants()) {  // AVX-512: both fetch choices
        if (variant.isa == cpu::VectorIsa::portable) continue;  // the packed product needs AVX2 at least
        const testing::KernelVariantLimit limit(variant);
        CAPTURE(variant.name());
        check();
    }
}

/// Checks y (read from a strided block) against the exact product; w is [n, k].
void check_exact(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& y, int m, int k,
                 int n, index_t y_stride, index_t y_offset, const std::vector<float>* initial) {
    int bad = 0;
    for (int r = 0; r < m; ++r)
        for (int o = 0; o < n; ++o) {
            double exact = initial ? (*initial)[r * n + o] : 0.0, s = std::abs(exact);
            for (int i = 0; i < k; ++i) {
                const double t = double(x[r * k + i]) * w[o * k + i];
                exact += t;
                s += std::abs(t);
            }
            if (!(std::abs(y[y_offset + r * y_stride + o] - exact) <= (k + 1) * 0x1p-24 * s * 1.01 + 1e-30)) ++bad;
        }
    CHECK(bad == 0);
}

/// w rounded to bf16 and back: the values a bf16 weight stores.
std::vector<float> bf16_values(std::vector<float> w) {
    for (float& v : w) v = bf16::from_float(v).to_float();
    return w;
}

std::vector<bf16> to_bf16(const std::vector<float>& w) {
    std::vector<bf16> out(w.size());
    for (std::size_t i = 0; i < w.size(); ++i) out[i] = bf16::from_float(w[i]);
    return out;
}

/// Panels = PackedF32 (fp32 weights) or PackedBf16 (a bf16 weight's panels, widened by the
/// product): the product of the stored values is exact in fp32 either way.
template <class Panels>
void run_case(int m, int k, int n, bool accumulate, cpu::WeightOrientation orientation,
              cpu::PanelLayout layout = cpu::PanelLayout::rows) {
    constexpr bool widened = std::is_same_v<Panels, cpu::PackedBf16>;
    CAPTURE(widened);
    CAPTURE(layout == cpu::PanelLayout::strips);
    CAPTURE(m);
    CAPTURE(k);
    CAPTURE(n);
    CAPTURE(accumulate);
    const auto x = testing::random_normal(static_cast<std::size_t>(m) * k, 41 + m + 3 * k);
    auto w = testing::random_normal(static_cast<std::size_t>(n) * k, 43 + n, 0.05f);  // [n, k]
    if (widened) w = bf16_values(w);
    std::vector<float> stored = w;  // in the packing orientation
    if (orientation == cpu::WeightOrientation::in_out)
        for (int o = 0; o < n; ++o)
            for (int i = 0; i < k; ++i) stored[static_cast<std::size_t>(i) * n + o] = w[static_cast<std::size_t>(o) * k + i];
    const index_t rows = orientation == cpu::WeightOrientation::out_in ? n : k, cols = stored.size() / rows;
    Panels packed;
    if constexpr (widened) {
        const auto w16 = to_bf16(stored);
        packed = Panels::pack(cpu::rows_of<const bf16>(w16.data(), rows, cols), orientation, layout);
    } else {
        packed = Panels::pack(cpu::rows_of<const float>(stored.data(), rows, cols), orientation, layout);
    }
    REQUIRE(packed.layout() == layout);
    const auto initial = testing::random_normal(static_cast<std::size_t>(m) * n, 6);
    std::vector<float> y = accumulate ? initial : testing::poisoned<float>(initial.size());
    cpu::gemm_f32_packed(cpu::rows_of<const float>(x.data(), m, k), packed, cpu::rows_of(y.data(), m, n), accumulate);
    check_exact(x, w, y, m, k, n, n, 0, accumulate ? &initial : nullptr);
}

template <class Panels>
void run_tail_cases() {
    const int cases[][3] = {{1, 1, 1}, {5, 3, 17}, {6, 31, 65}, {7, 64, 63}, {13, 257, 130}, {200, 300, 200},
                            {37, 700, 129}, {400, 96, 70}, {2, 2, 64}, {4, 33, 1}};
    for (cpu::PanelLayout layout : {cpu::PanelLayout::rows, cpu::PanelLayout::strips}) {
        for (const auto& c : cases)
            for (bool accumulate : {false, true})
                run_case<Panels>(c[0], c[1], c[2], accumulate, cpu::WeightOrientation::out_in, layout);
        for (bool accumulate : {false, true})
            run_case<Panels>(13, 257, 130, accumulate, cpu::WeightOrientation::in_out, layout);
    }
}

}  // namespace

TEST_CASE("fp32 packing is exact, padding is zero") {
    const int n = 70, k = 9;
    const auto w = testing::random_normal(n * k, 4);
    const auto p = cpu::PackedF32::pack(cpu::rows_of<const float>(w.data(), n, k), cpu::WeightOrientation::out_in);
    CHECK(p.groups() == k);
    CHECK(p.panels() == 2);
    for (int o = 0; o < n; ++o)
        for (int i = 0; i < k; ++i) CHECK(p.at(o, i) == w[o * k + i]);
    CHECK(p.at(cpu::packed_panel_cols * 2 - 1, 8) == 0.0f);
}

TEST_CASE("packing in column strips is exact, blocks and strips where the layout says, padding zero") {
    // Three input blocks, the last short (fp32: 1024 groups per block; bf16: 512 pairs), and a
    // panel with only one live strip.
    const int n = 70, k = 2 * static_cast<int>(cpu::strip_block_inputs) + 37;
    const auto w = testing::random_normal(static_cast<std::size_t>(n) * k, 7);
    const auto f = cpu::PackedF32::pack(cpu::rows_of<const float>(w.data(), n, k), cpu::WeightOrientation::out_in,
                                        cpu::PanelLayout::strips);
    const auto w16 = to_bf16(w);
    const auto h = cpu::PackedBf16::pack(cpu::rows_of<const bf16>(w16.data(), n, k), cpu::WeightOrientation::out_in,
                                         cpu::PanelLayout::strips);
    int wrong = 0;
    for (int o = 0; o < n; ++o)
        for (int i = 0; i < k; ++i) {
            wrong += f.at(o, i) != w[o * k + i];
            wrong += h.at(o, i) != w16[o * k + i].to_float();
        }
    CHECK(wrong == 0);
    CHECK(f.at(cpu::packed_panel_cols * 2 - 1, k - 1) == 0.0f);
    CHECK(h.at(cpu::packed_panel_cols * 2 - 1, k) == 0.0f);  // the pad input of the odd K's last pair
    // Panel 0: strip 1 of block 0 follows its strip 0 (1024 groups); block 1 follows all four.
    const index_t block = cpu::strip_block_inputs;
    CHECK(f.offset(cpu::strip_cols, 0) == block * cpu::strip_cols);
    CHECK(f.offset(0, block) == block * cpu::packed_panel_cols);
    const index_t block1 = std::min<index_t>(block, k - block);  // groups of block 1
    CHECK(f.offset(cpu::strip_cols, block) == block * cpu::packed_panel_cols + block1 * cpu::strip_cols);
    CHECK(f.offset(1, 1) == cpu::strip_cols + 1);
    // The last block's strips hold its 37 groups (fp32) or 19 pairs (bf16) each.
    CHECK(f.view().strip_stride(2 * block) == 37 * cpu::strip_cols);
    CHECK(h.view().strip_stride(block) == 19 * cpu::strip_cols * 2);
    CHECK(h.view().strip_stride(0) == block / 2 * cpu::strip_cols * 2);
    const auto rows = cpu::PackedF32::pack(cpu::rows_of<const float>(w.data(), n, k), cpu::WeightOrientation::out_in);
    CHECK(rows.view().strip_stride(0) == cpu::strip_cols);
    CHECK(rows.view().group_stride() == cpu::packed_panel_cols);
}

TEST_CASE("weights for fp32 arithmetic are packed in column strips where the vector level is AVX2") {
    const int n = 20, k = 30;
    const auto w = testing::random_normal(static_cast<std::size_t>(n) * k, 8);
    const auto rows = cpu::rows_of<const float>(w.data(), n, k);
    for (cpu::VectorIsa isa : testing::vector_isas()) {
        const cpu::VectorIsaLimit limit(isa);
        CAPTURE(cpu::vector_isa_name(isa));
        const auto p = cpu::PackedWeight::pack(rows, cpu::WeightOrientation::out_in, cpu::Compute::fp32_packed);
        const auto want = isa == cpu::VectorIsa::avx2 ? cpu::PanelLayout::strips : cpu::PanelLayout::rows;
        CHECK(cpu::fp32_panel_layout() == want);
        REQUIRE(p.f32() != nullptr);
        CHECK(p.f32()->layout() == want);
        const auto w16 = to_bf16(w);
        const auto q = cpu::PackedWeight::pack(cpu::rows_of<const bf16>(w16.data(), n, k),
                                               cpu::WeightOrientation::out_in, cpu::Compute::fp32_packed);
        REQUIRE(q.bf16_widened() != nullptr);
        CHECK(q.bf16_widened()->layout() == want);
        // bf16 arithmetic: strips where AMX may run (its B tiles are then contiguous) and where the
        // widened level (the packed fp32 product) is the machine's only bf16 level on AVX2.
        const auto b = cpu::PackedWeight::pack(rows, cpu::WeightOrientation::out_in, cpu::Compute::bf16);
        const auto& f = cpu::cpu_features();
        const auto want_bf16 = (f.amx_permitted && f.avx512_bf16) ||
                                       (isa == cpu::VectorIsa::avx2 && !f.avx512_bf16)
                                   ? cpu::PanelLayout::strips
                                   : cpu::PanelLayout::rows;
        CHECK(cpu::bf16_panel_layout() == want_bf16);
        REQUIRE(b.bf16() != nullptr);
        CHECK(b.bf16()->layout() == want_bf16);
    }
}

TEST_CASE("packed fp32 product: tails in M, N and K, both modes, both orientations") {
    on_each_kernel([&] {
        run_tail_cases<cpu::PackedF32>();
    });
}

TEST_CASE("packed fp32 product on a bf16 weight's panels: tails in M, N and K (odd K too), both modes and orientations") {
    on_each_kernel([&] {
        run_tail_cases<cpu::PackedBf16>();
    });
}

TEST_CASE("packed fp32 product: inputs over several blocks, the last one short") {
    on_each_kernel([&] {
        // Each input block after the first adds to the accumulators the one before stored.
        const int k = static_cast<int>(2 * cpu::gemm_f32_detail::block_depth) + 37;
        for (cpu::PanelLayout layout : {cpu::PanelLayout::rows, cpu::PanelLayout::strips})
            for (bool accumulate : {false, true}) {
                const auto out_in = cpu::WeightOrientation::out_in;
                run_case<cpu::PackedF32>(9, k, 70, accumulate, out_in, layout);
                run_case<cpu::PackedBf16>(9, k, 70, accumulate, out_in, layout);  // odd: the last pair half
                run_case<cpu::PackedBf16>(16, k + 1, 70, accumulate, out_in, layout);
                // Decode's few rows: one tile per thread, which on AVX2 fetches the next block (the
                // next panel, or its next input block) over its 2 or 4 strips.
                run_case<cpu::PackedF32>(1, k, 130, accumulate, out_in, layout);
                run_case<cpu::PackedF32>(2, k, 130, accumulate, out_in, layout);
                run_case<cpu::PackedF32>(4, k, 130, accumulate, out_in, layout);
                run_case<cpu::PackedBf16>(3, k, 130, accumulate, out_in, layout);
            }
    });
}

TEST_CASE("packed fp32 product on bf16 panels: an odd K never reads x past its row") {
    on_each_kernel([&] {
        // x rows are strided with a NaN right after each row's last input: the pad input of the
        // last pair meets a zero weight, and 0 x NaN would poison the row if it were read.
        const int m = 8, k = 45, n = 70, x_stride = 46;
        const auto w = bf16_values(testing::random_normal(static_cast<std::size_t>(n) * k, 21, 0.05f));
        const auto w16 = to_bf16(w);
        const auto packed = cpu::PackedBf16::pack(cpu::rows_of<const bf16>(w16.data(), n, k), cpu::WeightOrientation::out_in);
        const auto x = testing::random_normal(static_cast<std::size_t>(m) * k, 22);
        std::vector<float> xs(static_cast<std::size_t>(m) * x_stride, std::nanf(""));
        for (int r = 0; r < m; ++r)
            for (int i = 0; i < k; ++i) xs[static_cast<std::size_t>(r) * x_stride + i] = x[static_cast<std::size_t>(r) * k + i];
        for (int threads : {0, 1}) {
            CAPTURE(threads);
            std::vector<float> y = testing::poisoned<float>(static_cast<std::size_t>(m) * n);
            cpu::gemm_f32_packed(StridedMatrix<const float>{xs.data(), m, k, x_stride}, packed.view(),
                                 cpu::rows_of(y.data(), m, n), false, threads);
            check_exact(x, w, y, m, k, n, n, 0, nullptr);
        }
    });
}

TEST_CASE("packed fp32 product: strided input and output; columns beside the output are untouched") {
    on_each_kernel([&] {
        const int m = 19, k = 45, n = 77, x_stride = 52, y_stride = 90, y_offset = 5;
        const auto xw = testing::random_normal(static_cast<std::size_t>(m) * x_stride, 18);
        std::vector<float> x(static_cast<std::size_t>(m) * k);
        for (int r = 0; r < m; ++r)
            for (int i = 0; i < k; ++i) x[r * k + i] = xw[r * x_stride + 3 + i];
        const auto w = testing::random_normal(static_cast<std::size_t>(n) * k, 19, 0.05f);
        const auto packed = cpu::PackedF32::pack(cpu::rows_of<const float>(w.data(), n, k), cpu::WeightOrientation::out_in);
        std::vector<float> y(static_cast<std::size_t>(m) * y_stride, 1234.5f);
        cpu::gemm_f32_packed(StridedMatrix<const float>{xw.data() + 3, m, k, x_stride}, packed,
                             StridedMatrix<float>{y.data() + y_offset, m, n, y_stride}, false);
        check_exact(x, w, y, m, k, n, y_stride, y_offset, nullptr);
        int touched = 0;
        for (int r = 0; r < m; ++r)
            for (int j = 0; j < y_stride; ++j)
                if ((j < y_offset || j >= y_offset + n) && y[r * y_stride + j] != 1234.5f) ++touched;
        CHECK(touched == 0);
    });
}

TEST_CASE("packed fp32 product: the same result on one thread and on all") {
    on_each_kernel([&] {
        const int m = 150, k = 299, n = 300;
        const auto x = testing::random_normal(static_cast<std::size_t>(m) * k, 51);
        const auto w = testing::random_normal(static_cast<std::size_t>(n) * k, 52, 0.05f);
        const auto packed = cpu::PackedF32::pack(cpu::rows_of<const float>(w.data(), n, k), cpu::WeightOrientation::out_in);
        std::vector<float> all = testing::poisoned<float>(static_cast<std::size_t>(m) * n), one = all;
        cpu::gemm_f32_packed(cpu::rows_of<const float>(x.data(), m, k), packed, cpu::rows_of(all.data(), m, n), false);
        testing::on_one_thread([&] {
            cpu::gemm_f32_packed(cpu::rows_of<const float>(x.data(), m, k), packed, cpu::rows_of(one.data(), m, n), false);
        });
        CHECK(all == one);
        check_exact(x, w, all, m, k, n, n, 0, nullptr);
    });
}

TEST_CASE("packed fp32 product: shape mismatches are errors") {
    const auto w = testing::random_normal(8 * 4, 1);
    const auto packed = cpu::PackedF32::pack(cpu::rows_of<const float>(w.data(), 8, 4), cpu::WeightOrientation::out_in);
    std::vector<float> x(3 * 5), y(3 * 8);
    CHECK_THROWS_AS(
        cpu::gemm_f32_packed(cpu::rows_of<const float>(x.data(), 3, 5), packed, cpu::rows_of(y.data(), 3, 8), false),
        ShapeError);
    CHECK_THROWS_AS(
        cpu::gemm_f32_packed(cpu::rows_of<const float>(x.data(), 3, 4), packed, cpu::rows_of(y.data(), 2, 8), false),
        ShapeError);
}
