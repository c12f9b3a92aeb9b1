// The bf16 product (cpu/kernels/gemm_bf16.hpp) against double-precision references.
//
// Tolerances, per output element y = sum_k x_k w_k over K terms:
//  * against the exact product of the bf16-rounded operands, only the fp32
//    summation errs: |y - y_bf16| <= K u S with u = 2^-24 and S = sum_k |x_k w_k|
//    (each of the K additions rounds once; the bf16 x bf16 products are exact);
//  * against the unrounded fp32 operands, rounding each operand to 8 significant
//    bits (unit roundoff u_bf16 = 2^-8) adds at most (2 u_bf16 + u_bf16^2) S.
// Each is checked element by element with that element's own S.
//
// Every case runs on each kernel: the AVX512_BF16 micro-kernel, the AMX tiles
// on the hardware where this machine has them, and the AMX kernel on the
// software model of the tile registers (support/amx_model.hpp) everywhere.
#include <doctest/doctest.h>

#include <cpx/cpu/kernels/gemm_bf16.hpp>
#include <cpx/cpu/kernels/gemm_f32_packed.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "amx_model.hpp"
#include "test_support.hpp"

using namespace cpx;

namespace {

bool have_avx512_bf16() {
    if (cpu::bf16_level_available(cpu::Bf16Level::avx512_bf16)) return true;
    MESSAGE("skipped: this machine has no AVX512_BF16 (", cpu::cpu_features().summary(), ")");
    return false;
}

/// The levels whose thread split a case checks: vdpbf16ps and the widened level, where present.
std::vector<cpu::Bf16Level> threaded_levels() {
    std::vector<cpu::Bf16Level> levels;
    if (have_avx512_bf16()) levels.push_back(cpu::Bf16Level::avx512_bf16);
    if (cpu::bf16_level_available(cpu::Bf16Level::widened)) levels.push_back(cpu::Bf16Level::widened);
    else MESSAGE("skipped widened: neither AVX-512 nor AVX2 and FMA (", cpu::cpu_features().summary(), ")");
    return levels;
}

float bf16_round(float v) { return bf16::from_float(v).to_float(); }

/// The kernels a case runs on.
enum class Kernel { avx512_bf16, amx, amx_model, widened };

const char* kernel_name(Kernel k) {
    switch (k) {
        case Kernel::avx512_bf16: return "avx512_bf16";
        case Kernel::amx: return "amx (hardware)";
        case Kernel::amx_model: return "amx (model)";
        default: return "widened (fp32 FMAs)";
    }
}

/// Whether `k` can run here (the AMX model's input tails run on AVX512_BF16); says why not.
bool runnable(Kernel k) {
    if (k == Kernel::widened) {
        if (cpu::bf16_level_available(cpu::Bf16Level::widened)) return true;
        MESSAGE("skipped widened: neither AVX-512 nor AVX2 and FMA (", cpu::cpu_features().summary(), ")");
        return false;
    }
    if (!cpu::bf16_level_available(cpu::Bf16Level::avx512_bf16)) {
        MESSAGE("skipped ", std::string(kernel_name(k)), ": this machine has no AVX512_BF16 (", cpu::cpu_features().summary(), ")");
        return false;
    }
    if (k == Kernel::amx && !cpu::bf16_level_available(cpu::Bf16Level::amx)) {
        MESSAGE("skipped amx (hardware): no AMX-BF16 granted on this machine (", cpu::cpu_features().summary(),
                "); the AMX kernel runs on the tile model instead");
        return false;
    }
#ifndef CPX_HAVE_GEMM_BF16_AMX
    if (k != Kernel::avx512_bf16) {
        MESSAGE("skipped ", std::string(kernel_name(k)), ": this compiler builds no AMX kernel");
        return false;
    }
#endif
    return true;
}

constexpr Kernel all_kernels[] = {Kernel::avx512_bf16, Kernel::amx, Kernel::amx_model, Kernel::widened};

/// gemm_bf16 on kernel `k` (runnable(k) checked by the caller).
void product(Kernel k, const StridedMatrix<const float>& x, cpu::PackedPanelsView<bf16> b, const StridedMatrix<float>& y,
             bool accumulate, cpu::Bf16Scratch& scratch) {
    if (k == Kernel::amx_model) {
#ifdef CPX_HAVE_GEMM_BF16_AMX
        if (x.rows == 0 || y.cols == 0 || b.groups() == 0)  // handled before the kernel: use the public entry
            return cpu::gemm_bf16(x, b, y, accumulate, scratch, cpu::Bf16Level::avx512_bf16);
        REQUIRE(x.cols == b.inputs());
        REQUIRE((y.rows == x.rows && y.cols == b.outputs()));
        cpu::gemm_bf16_detail::product<testing::AmxModel>(x, b, y, accumulate, scratch, true, 0);
#endif
        return;
    }
    cpu::gemm_bf16(x, b, y, accumulate, scratch,
                   k == Kernel::amx       ? cpu::Bf16Level::amx
                   : k == Kernel::widened ? cpu::Bf16Level::widened
                                          : cpu::Bf16Level::avx512_bf16);
}

struct Case {
    int m, k, n;
};

/// Checks y (read from a strided block) against both references; w is [n, k].
void check_against_references(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& y,
                              int m, int k, int n, index_t y_stride, index_t y_offset,
                              const std::vector<float>* initial) {
    constexpr double u32 = 0x1p-24, ubf = 0x1p-8;
    int bad_rounded = 0, bad_exact = 0;
    for (int r = 0; r < m; ++r)
        for (int o = 0; o < n; ++o) {
            double exact = initial ? (*initial)[r * n + o] : 0.0, rounded = exact, s = std::abs(exact);
            for (int i = 0; i < k; ++i) {
                const double xe = x[r * k + i], we = w[o * k + i];
                exact += xe * we;
                rounded += double(bf16_round(x[r * k + i])) * bf16_round(w[o * k + i]);
                s += std::abs(xe * we);
            }
            const double got = y[y_offset + r * y_stride + o];
            // (k + 1) additions when accumulating into y; a tiny absolute floor for S = 0.
            const double fp32_bound = (k + 1) * u32 * s * 1.01 + 1e-30;
            if (!(std::abs(got - rounded) <= fp32_bound)) ++bad_rounded;
            if (!(std::abs(got - exact) <= fp32_bound + (2 * ubf + ubf * ubf) * s * 1.01)) ++bad_exact;
        }
    CHECK(bad_rounded == 0);
    CHECK(bad_exact == 0);
}

/// The panel layouts every kernel reads (bf16_panel_layout).
std::vector<cpu::PanelLayout> layouts_of(Kernel) { return {cpu::PanelLayout::rows, cpu::PanelLayout::strips}; }

void run_case(Case c, bool accumulate, cpu::WeightOrientation orientation, Kernel kernel,
              cpu::PanelLayout layout = cpu::PanelLayout::rows) {
    CAPTURE(kernel_name(kernel));
    CAPTURE(layout == cpu::PanelLayout::strips);
    CAPTURE(c.m);
    CAPTURE(c.k);
    CAPTURE(c.n);
    CAPTURE(accumulate);
    const auto x = testing::random_normal(static_cast<std::size_t>(c.m) * c.k, 11 + c.m + 7 * c.k);
    const auto w = testing::random_normal(static_cast<std::size_t>(c.n) * c.k, 23 + c.n, 0.05f);  // [n, k]
    cpu::PackedBf16 packed;
    if (orientation == cpu::WeightOrientation::out_in) {
        packed = cpu::PackedBf16::pack(cpu::rows_of<const float>(w.data(), c.n, c.k), orientation, layout);
    } else {
        std::vector<float> wt(w.size());  // [k, n]
        for (int o = 0; o < c.n; ++o)
            for (int i = 0; i < c.k; ++i) wt[static_cast<std::size_t>(i) * c.n + o] = w[static_cast<std::size_t>(o) * c.k + i];
        packed = cpu::PackedBf16::pack(cpu::rows_of<const float>(wt.data(), c.k, c.n), orientation, layout);
    }
    REQUIRE(packed.layout() == layout);
    REQUIRE(packed.outputs() == c.n);
    REQUIRE(packed.inputs() == c.k);
    const auto initial = testing::random_normal(static_cast<std::size_t>(c.m) * c.n, 5);
    std::vector<float> y = accumulate ? initial : testing::poisoned<float>(initial.size());
    cpu::Bf16Scratch scratch;
    product(kernel, cpu::rows_of<const float>(x.data(), c.m, c.k), packed, cpu::rows_of(y.data(), c.m, c.n), accumulate,
            scratch);
    check_against_references(x, w, y, c.m, c.k, c.n, c.n, 0, accumulate ? &initial : nullptr);
}

}  // namespace

TEST_CASE("run-time CPU features are consistent") {
    const auto& f = cpu::cpu_features();
    MESSAGE("CPU: ", f.model, " | ", f.summary());
    if (f.avx512_bf16) CHECK(f.avx512f);
    if (f.amx_permitted) CHECK(f.amx_bf16);
    CHECK(cpu::bf16_level_available(cpu::Bf16Level::none));
    // The widened level: bf16 operands on the fp32 packed product, where that product runs.
    CHECK(cpu::bf16_level_available(cpu::Bf16Level::widened) == cpu::gemm_f32_packed_available());
    CHECK((cpu::best_bf16_level() == cpu::Bf16Level::none) == !(f.avx512_bf16 || cpu::gemm_f32_packed_available()));
    CHECK((cpu::best_bf16_level() == cpu::Bf16Level::widened) == (!f.avx512_bf16 && cpu::gemm_f32_packed_available()));
#ifdef CPX_HAVE_GEMM_BF16_AMX
    CHECK((cpu::best_bf16_level() == cpu::Bf16Level::amx) == (f.amx_permitted && f.avx512_bf16));
#else
    CHECK_FALSE(cpu::bf16_level_available(cpu::Bf16Level::amx));
#endif
    // The automatically chosen kernels: the machine's set, capped for a scope, restored after it.
    CHECK((cpu::machine_vector_isa() == cpu::VectorIsa::avx512) == f.avx512f);
    CHECK((cpu::machine_vector_isa() == cpu::VectorIsa::avx2) == (f.avx2 && !f.avx512f));
    CHECK(cpu::gemm_f32_packed_available() == (f.avx2 || f.avx512f));
    CHECK(cpu::vector_isa() == cpu::machine_vector_isa());
    {
        const cpu::VectorIsaLimit limit(cpu::VectorIsa::portable);
        CHECK(cpu::vector_isa() == cpu::VectorIsa::portable);
    }
    CHECK(cpu::vector_isa() == cpu::machine_vector_isa());
}

TEST_CASE("packing: [N, K] and [K, N] sources give the same packed matrix; bf16 sources are copied exactly") {
    const int n = 70, k = 9;
    const auto w = testing::random_normal(n * k, 3);
    std::vector<float> wt(w.size());
    for (int o = 0; o < n; ++o)
        for (int i = 0; i < k; ++i) wt[i * n + o] = w[o * k + i];
    const auto a = cpu::PackedBf16::pack(cpu::rows_of<const float>(w.data(), n, k), cpu::WeightOrientation::out_in);
    const auto b = cpu::PackedBf16::pack(cpu::rows_of<const float>(wt.data(), k, n), cpu::WeightOrientation::in_out);
    std::vector<bf16> wb(w.size());
    for (std::size_t i = 0; i < w.size(); ++i) wb[i] = bf16::from_float(w[i]);
    const auto c = cpu::PackedBf16::pack(cpu::rows_of<const bf16>(wb.data(), n, k), cpu::WeightOrientation::out_in);
    CHECK(a.panels() == 2);
    CHECK(a.groups() == 5);
    CHECK(a.bytes() == static_cast<std::size_t>(2 * 5 * cpu::packed_panel_cols * 2 * 2));
    for (int o = 0; o < n; ++o)
        for (int i = 0; i < k; ++i) {
            CHECK(a.at(o, i) == bf16_round(w[o * k + i]));
            CHECK(b.at(o, i) == a.at(o, i));
            CHECK(c.at(o, i) == a.at(o, i));
        }
    // Padding (column 70..127 of panel 1, input 9 of the last pair) is zero.
    CHECK(a.at(cpu::packed_panel_cols * 2 - 1, 9) == 0.0f);
    CHECK(a.at(3, 9) == 0.0f);
}

TEST_CASE("packing bf16 rows of an even K (attention's keys and values): exact copies, zero pads, reused storage") {
    // The whole-word path for [N, K] bf16 rows and the interleaving path for [K, N] ones, on
    // strided rows, a partial last panel, and storage left by a larger matrix.
    const int n = 70, k = 10, ld = 13;
    const auto w = testing::random_normal(n * ld, 7);
    std::vector<bf16> wb(w.size());
    for (std::size_t i = 0; i < w.size(); ++i) wb[i] = bf16::from_float(w[i]);
    const auto big = testing::random_normal(200 * 34, 8);
    std::vector<bf16> bigb(big.size());
    for (std::size_t i = 0; i < big.size(); ++i) bigb[i] = bf16::from_float(big[i]);
    for (const cpu::WeightOrientation orientation : {cpu::WeightOrientation::out_in, cpu::WeightOrientation::in_out}) {
        const bool out_in = orientation == cpu::WeightOrientation::out_in;
        CAPTURE(out_in);
        const index_t rows = out_in ? n : k, cols = out_in ? k : n;
        const StridedMatrix<const bf16> src{wb.data(), rows, cols, out_in ? ld : n + 3};
        cpu::PackedBf16 reused;
        reused.assign(StridedMatrix<const bf16>{bigb.data(), 200, 34, 34}, orientation);
        reused.assign(src, orientation);
        REQUIRE(reused.outputs() == n);
        REQUIRE(reused.inputs() == k);
        for (index_t o = 0; o < reused.panels() * cpu::packed_panel_cols; ++o)
            for (index_t i = 0; i < 2 * reused.groups(); ++i) {
                const float want = o < n && i < k ? (out_in ? src.row(o)[i] : src.row(i)[o]).to_float() : 0.0f;
                CHECK(reused.at(o, i) == want);
            }
    }
}

TEST_CASE("packing into the storage of an earlier, larger matrix writes every value and pad afresh") {
    // Attention packs its keys and values on every call into the previous call's storage,
    // which is not cleared first: pads must still come out zero.
    const auto big = testing::random_normal(200 * 33, 5);
    const auto small = testing::random_normal(5 * 3, 6);
    for (const cpu::WeightOrientation orientation : {cpu::WeightOrientation::out_in, cpu::WeightOrientation::in_out}) {
        const bool out_in = orientation == cpu::WeightOrientation::out_in;
        CAPTURE(out_in);
        cpu::PackedBf16 reused;
        reused.assign(cpu::rows_of<const float>(big.data(), 200, 33), orientation);
        // [5, 3] as [N, K] (5 outputs, 3 inputs) or as [K, N] (3 outputs, 5 inputs).
        reused.assign(cpu::rows_of<const float>(small.data(), 5, 3), orientation);
        const auto fresh = cpu::PackedBf16::pack(cpu::rows_of<const float>(small.data(), 5, 3), orientation);
        REQUIRE(reused.bytes() == fresh.bytes());
        const index_t n = out_in ? 5 : 3, k = out_in ? 3 : 5;
        for (index_t o = 0; o < reused.panels() * cpu::packed_panel_cols; ++o)
            for (index_t i = 0; i < 2 * reused.groups(); ++i) {
                const float want = o < n && i < k ? bf16_round(out_in ? small[o * 3 + i] : small[i * 3 + o]) : 0.0f;
                CHECK(reused.at(o, i) == want);
                CHECK(fresh.at(o, i) == want);
            }
    }
}

/// x rounded to bf16 bits, rows `ld` values apart, `rows` rows (the rows past x's zero), each
/// row's values past x.cols zero: the inputs gemm_bf16_rounded takes.
std::vector<std::uint16_t> rounded_rows(const std::vector<float>& x, int m, int k, index_t ld, index_t rows) {
    std::vector<std::uint16_t> a(static_cast<std::size_t>(rows * ld), 0);
    for (int r = 0; r < m; ++r)
        for (int i = 0; i < k; ++i) a[static_cast<std::size_t>(r * ld + i)] = bf16::from_float(x[r * k + i]).bits;
    return a;
}

TEST_CASE("bf16 product on inputs rounded by the caller: the same bits as gemm_bf16, tails and both modes") {
    const Case cases[] = {{1, 1, 1}, {5, 3, 17}, {7, 64, 63}, {33, 65, 130}, {37, 700, 129}};
    for (const Kernel kernel : {Kernel::avx512_bf16, Kernel::amx, Kernel::amx_model}) {
        if (!runnable(kernel)) continue;
        CAPTURE(kernel_name(kernel));
        for (const Case c : cases)
            for (bool accumulate : {false, true}) {
                CAPTURE(c.m);
                CAPTURE(c.k);
                CAPTURE(c.n);
                CAPTURE(accumulate);
                const auto x = testing::random_normal(static_cast<std::size_t>(c.m) * c.k, 50 + c.m);
                const auto w = testing::random_normal(static_cast<std::size_t>(c.n) * c.k, 60 + c.n, 0.05f);
                const auto packed =
                    cpu::PackedBf16::pack(cpu::rows_of<const float>(w.data(), c.n, c.k), cpu::WeightOrientation::out_in);
                const auto initial = testing::random_normal(static_cast<std::size_t>(c.m) * c.n, 7);
                std::vector<float> want = accumulate ? initial : testing::poisoned<float>(initial.size());
                std::vector<float> got = want;
                cpu::Bf16Scratch scratch;
                product(kernel, cpu::rows_of<const float>(x.data(), c.m, c.k), packed,
                        cpu::rows_of(want.data(), c.m, c.n), accumulate, scratch);
                const bool amx = kernel != Kernel::avx512_bf16;
                const cpu::Bf16Level level = amx ? cpu::Bf16Level::amx : cpu::Bf16Level::avx512_bf16;
                const index_t ld = 2 * packed.groups() + 6;  // any even stride that holds the pairs
                const index_t rows = cpu::bf16_rounded_rows(c.m, level);  // exactly what the kernel may read
                const auto a = rounded_rows(x, c.m, c.k, ld, rows);
                if (kernel == Kernel::amx_model) {
#ifdef CPX_HAVE_GEMM_BF16_AMX
                    cpu::gemm_bf16_detail::product_rounded<testing::AmxModel>(
                        a.data(), ld, c.m, packed, cpu::rows_of(got.data(), c.m, c.n), accumulate, true, 0);
#endif
                } else {
                    cpu::gemm_bf16_rounded(a.data(), ld, c.m, packed, cpu::rows_of(got.data(), c.m, c.n), accumulate,
                                           level);
                }
                CHECK(got == want);
            }
    }
}

TEST_CASE("bf16 product with no inputs (K = 0): zeros written, or an accumulated output left alone") {
    // The K = 0 exits of gemm_bf16 (every level) and of gemm_bf16_rounded (the levels with bf16
    // inputs), which the kernels never see.
    const int n = 70;
    const std::vector<float> w(1, 0.0f);  // a [n, 0] weight: any pointer will do
    const auto packed = cpu::PackedBf16::pack(StridedMatrix<const float>{w.data(), n, 0, 0}, cpu::WeightOrientation::out_in);
    REQUIRE(packed.groups() == 0);
    const std::vector<float> x(1, 0.0f);
    const std::vector<std::uint16_t> a(2, 0);
    for (const Kernel kernel : all_kernels) {
        if (!runnable(kernel)) continue;
        CAPTURE(kernel_name(kernel));
        for (int m : {1, 5, 40})
            for (bool accumulate : {false, true}) {
                CAPTURE(m);
                CAPTURE(accumulate);
                const auto initial = testing::random_normal(static_cast<std::size_t>(m) * n, 9);
                auto y = initial;
                cpu::Bf16Scratch scratch;
                product(kernel, StridedMatrix<const float>{x.data(), m, 0, 0}, packed, cpu::rows_of(y.data(), m, n),
                        accumulate, scratch);
                for (std::size_t i = 0; i < y.size(); ++i) REQUIRE(y[i] == (accumulate ? initial[i] : 0.0f));
                if (kernel == Kernel::widened || kernel == Kernel::amx_model) continue;
                y = initial;
                cpu::gemm_bf16_rounded(a.data(), 0, m, packed, cpu::rows_of(y.data(), m, n), accumulate,
                                       kernel == Kernel::amx ? cpu::Bf16Level::amx : cpu::Bf16Level::avx512_bf16);
                for (std::size_t i = 0; i < y.size(); ++i) REQUIRE(y[i] == (accumulate ? initial[i] : 0.0f));
            }
    }
}

TEST_CASE("bf16 product on rounded inputs: levels without bf16 inputs, short rows and shape mismatches are errors") {
    const auto w = testing::random_normal(8 * 5, 1);
    const auto packed = cpu::PackedBf16::pack(cpu::rows_of<const float>(w.data(), 8, 5), cpu::WeightOrientation::out_in);
    std::vector<std::uint16_t> a(64 * 8, 0);
    std::vector<float> y(3 * 8);
    for (const cpu::Bf16Level level : {cpu::Bf16Level::none, cpu::Bf16Level::widened})
        CHECK_THROWS_AS(cpu::gemm_bf16_rounded(a.data(), 8, 3, packed, cpu::rows_of(y.data(), 3, 8), false, level),
                        InputError);
    if (!have_avx512_bf16()) return;
    const auto level = cpu::Bf16Level::avx512_bf16;
    // Five inputs are three pairs: rows of 4 or an odd stride cannot hold them.
    CHECK_THROWS_AS(cpu::gemm_bf16_rounded(a.data(), 4, 3, packed, cpu::rows_of(y.data(), 3, 8), false, level),
                    ShapeError);
    CHECK_THROWS_AS(cpu::gemm_bf16_rounded(a.data(), 7, 3, packed, cpu::rows_of(y.data(), 3, 8), false, level),
                    ShapeError);
    CHECK_THROWS_AS(cpu::gemm_bf16_rounded(a.data(), 6, 3, packed, cpu::rows_of(y.data(), 2, 8), false, level),
                    ShapeError);
    CHECK_THROWS_AS(cpu::gemm_bf16_rounded(a.data(), 6, 3, packed, cpu::rows_of(y.data(), 3, 7), false, level),
                    ShapeError);
    CHECK(cpu::bf16_rounded_rows(7, level) == 12);  // whole tiles of the micro-kernel's 6 rows
}

TEST_CASE("bf16 product: tails in M, N and K, both modes, both weight orientations") {
    // M around the micro-kernels' 6 and the tiles' 16 and 32 rows, K around whole
    // chunks of 16 pairs (64 inputs: two chunks, none left), N around 64-column panels;
    // {40, 1100, 1100}: two input blocks (512 pairs and a tail of 38) and 18 panels, so that
    // each of two threads walks more than the AMX order's block of 8 panels per tile of rows
    // (amx::row_tile_panels).
    const Case cases[] = {{1, 1, 1},      {1, 2, 64},      {5, 3, 17},    {6, 31, 65},   {7, 64, 63},
                          {16, 32, 64},   {32, 64, 64},    {33, 65, 1},   {31, 96, 128}, {13, 257, 130},
                          {200, 300, 200}, {37, 700, 129}, {400, 96, 70}, {40, 1100, 1100}};
    for (const Kernel kernel : all_kernels) {
        if (!runnable(kernel)) continue;
        for (const cpu::PanelLayout layout : layouts_of(kernel)) {
            for (const Case c : cases)
                for (bool accumulate : {false, true})
                    run_case(c, accumulate, cpu::WeightOrientation::out_in, kernel, layout);
            for (const Case c : {Case{13, 257, 130}, Case{5, 3, 17}})
                for (bool accumulate : {false, true})
                    run_case(c, accumulate, cpu::WeightOrientation::in_out, kernel, layout);
        }
    }
}

TEST_CASE("bf16 product: inputs over several blocks, the last one short") {
    // Each input block after the first adds to the accumulators the one before stored.
    const int k = static_cast<int>(4 * cpu::gemm_bf16_detail::block_pairs) + 37;  // 2 blocks, then 18.5 pairs
    for (const Kernel kernel : all_kernels) {
        if (!runnable(kernel)) continue;
        for (const cpu::PanelLayout layout : layouts_of(kernel)) {
            for (bool accumulate : {false, true}) {
                run_case(Case{9, k, 70}, accumulate, cpu::WeightOrientation::out_in, kernel, layout);
                // Decode's few rows: one tile, each panel's blocks in turn (panel_gemm::thread_share).
                run_case(Case{1, k, 130}, accumulate, cpu::WeightOrientation::out_in, kernel, layout);
                run_case(Case{4, k, 200}, accumulate, cpu::WeightOrientation::out_in, kernel, layout);
            }
            run_case(Case{40, k, 64}, true, cpu::WeightOrientation::out_in, kernel, layout);
        }
    }
}

#ifdef CPX_HAVE_GEMM_BF16_AMX
TEST_CASE("bf16 product, AMX level: products of one or two rows run on the vdpbf16ps micro-kernel") {
    // Decode-sized products (amx::vector_max_rows) never configure the tiles; one row more does.
    // Rounded inputs are padded to whole tiles of the kernel that reads them: the micro-kernel's
    // 6 rows, one 16-row A tile, 32-row tiles.
    static_assert(cpu::amx::vector_max_rows == 2, "the cases below straddle the line");
    CHECK(cpu::bf16_rounded_rows(1, cpu::Bf16Level::amx) == 6);
    CHECK(cpu::bf16_rounded_rows(2, cpu::Bf16Level::amx) == 6);
    CHECK(cpu::bf16_rounded_rows(3, cpu::Bf16Level::amx) == 16);
    CHECK(cpu::bf16_rounded_rows(16, cpu::Bf16Level::amx) == 16);
    CHECK(cpu::bf16_rounded_rows(17, cpu::Bf16Level::amx) == 32);
    CHECK(cpu::bf16_rounded_rows(33, cpu::Bf16Level::amx) == 64);
    if (!runnable(Kernel::amx_model)) return;
    const int k = 70, n = 130;
    const auto w = testing::random_normal(static_cast<std::size_t>(n) * k, 4, 0.05f);
    const auto packed = cpu::PackedBf16::pack(cpu::rows_of<const float>(w.data(), n, k), cpu::WeightOrientation::out_in);
    for (const int m : {1, 2, 3, 6}) {
        CAPTURE(m);
        const auto x = testing::random_normal(static_cast<std::size_t>(m) * k, 3 + m);
        cpu::Bf16Scratch scratch;
        std::vector<float> y = testing::poisoned<float>(static_cast<std::size_t>(m) * n);
        testing::on_one_thread([&] {
            testing::AmxModel::state().products = -1;  // configure() resets it
            product(Kernel::amx_model, cpu::rows_of<const float>(x.data(), m, k), packed, cpu::rows_of(y.data(), m, n),
                    false, scratch);
            if (m <= cpu::amx::vector_max_rows) CHECK(testing::AmxModel::state().products == -1);
            else CHECK(testing::AmxModel::state().products > 0);
        });
        check_against_references(x, w, y, m, k, n, n, 0, nullptr);
    }
}

TEST_CASE("bf16 product, AMX: the tiles carry the whole chunks, the micro-kernel only the last pairs") {
    // On the tile model, one thread: [32 x 70] . [70 x 64] is one tile call over one panel, its
    // 35 pairs 2 chunks on the tiles (2 halves x 2 chunks x 4 products) and 3 on the micro-kernel.
    // Up to 16 rows take the one-A-tile kernel: one pass of 4 products per chunk; 17 rows the
    // 32-row tiles again.
    if (!runnable(Kernel::amx_model)) return;
    const int k = 70, n = 64;
    const auto w = testing::random_normal(static_cast<std::size_t>(n) * k, 4, 0.05f);
    const auto packed = cpu::PackedBf16::pack(cpu::rows_of<const float>(w.data(), n, k), cpu::WeightOrientation::out_in);
    for (const auto& shape : {std::pair{32, 2 * 2 * 4}, std::pair{16, 2 * 4}, std::pair{9, 2 * 4}, std::pair{17, 2 * 2 * 4}}) {
        const int m = shape.first, products = shape.second;  // no bindings: lambdas below use them (clang < 16)
        CAPTURE(m);
        const auto x = testing::random_normal(static_cast<std::size_t>(m) * k, 3);
        cpu::Bf16Scratch scratch;
        std::vector<float> y = testing::poisoned<float>(static_cast<std::size_t>(m) * n);
        testing::on_one_thread([&] {
            product(Kernel::amx_model, cpu::rows_of<const float>(x.data(), m, k), packed, cpu::rows_of(y.data(), m, n),
                    false, scratch);
            CHECK(testing::AmxModel::state().products == products);
            CHECK_FALSE(testing::AmxModel::state().configured);  // released after the product
        });
        check_against_references(x, w, y, m, k, n, n, 0, nullptr);
    }
    // The model itself refuses a product whose shapes do not chain, and use before configuration.
    testing::on_one_thread([&] {
        CHECK_THROWS_AS(testing::AmxModel::zero<0>(), std::logic_error);
        auto config = cpu::amx::full_tiles();
        config.rows[6] = 8;  // B of 8 pairs against A of 16
        testing::AmxModel::configure(config);
        CHECK_THROWS_AS((testing::AmxModel::dot<0, 4, 6>()), std::logic_error);
        testing::AmxModel::release();
    });
}
#endif

TEST_CASE("bf16 product: strided input and output; columns beside the output are untouched") {
    for (const Kernel kernel : all_kernels) {
        if (!runnable(kernel)) continue;
        CAPTURE(kernel_name(kernel));
        const int m = 19, k = 45, n = 77, x_stride = 52, y_stride = 90, y_offset = 5;
        const auto xw = testing::random_normal(static_cast<std::size_t>(m) * x_stride, 8);
        std::vector<float> x(static_cast<std::size_t>(m) * k);
        for (int r = 0; r < m; ++r)
            for (int i = 0; i < k; ++i) x[r * k + i] = xw[r * x_stride + 3 + i];
        const auto w = testing::random_normal(static_cast<std::size_t>(n) * k, 9, 0.05f);
        const auto packed = cpu::PackedBf16::pack(cpu::rows_of<const float>(w.data(), n, k), cpu::WeightOrientation::out_in);
        std::vector<float> y(static_cast<std::size_t>(m) * y_stride, 1234.5f);
        cpu::Bf16Scratch scratch;
        product(kernel, StridedMatrix<const float>{xw.data() + 3, m, k, x_stride}, packed,
                StridedMatrix<float>{y.data() + y_offset, m, n, y_stride}, false, scratch);
        check_against_references(x, w, y, m, k, n, y_stride, y_offset, nullptr);
        int touched = 0;
        for (int r = 0; r < m; ++r)
            for (int j = 0; j < y_stride; ++j)
                if ((j < y_offset || j >= y_offset + n) && y[r * y_stride + j] != 1234.5f) ++touched;
        CHECK(touched == 0);
    }
}

TEST_CASE("bf16 product: the same result on one thread and on all, and after the scratch held other data") {
    const int m = 150, k = 299, n = 300;
    const auto x = testing::random_normal(static_cast<std::size_t>(m) * k, 31);
    const auto w = testing::random_normal(static_cast<std::size_t>(n) * k, 32, 0.05f);
    const auto packed = cpu::PackedBf16::pack(cpu::rows_of<const float>(w.data(), n, k), cpu::WeightOrientation::out_in);
    for (const cpu::Bf16Level level : threaded_levels()) {
        CAPTURE(std::string(cpu::bf16_level_name(level)));
        cpu::Bf16Scratch scratch;
        // Fill the scratch with infinities where the odd K's pad input will sit.
        std::vector<float> inf_rows(static_cast<std::size_t>(m) * (k + 1), std::numeric_limits<float>::infinity());
        const auto wide =
            cpu::PackedBf16::pack(cpu::rows_of<const float>(w.data(), 1, k + 1), cpu::WeightOrientation::out_in);
        std::vector<float> sink(m);
        cpu::gemm_bf16(cpu::rows_of<const float>(inf_rows.data(), m, k + 1), wide, cpu::rows_of(sink.data(), m, 1), false,
                       scratch, level);
        std::vector<float> all = testing::poisoned<float>(static_cast<std::size_t>(m) * n), one = all;
        cpu::gemm_bf16(cpu::rows_of<const float>(x.data(), m, k), packed, cpu::rows_of(all.data(), m, n), false, scratch,
                       level);
        testing::on_one_thread([&] {
            cpu::gemm_bf16(cpu::rows_of<const float>(x.data(), m, k), packed, cpu::rows_of(one.data(), m, n), false,
                           scratch, level);
        });
        CHECK(all == one);
        check_against_references(x, w, all, m, k, n, n, 0, nullptr);
    }
}

TEST_CASE("bf16 product: one row (a decode step) is split over the threads by the weights it reads") {
    // A one-row product has few outputs but a whole weight to read: threads_for counts both.
    const int all = cpu::max_threads();
    CHECK(cpu::panel_gemm::threads_for(1, 64, 64) == 1);
    CHECK(cpu::panel_gemm::threads_for(1, 256, 256) == 1);
    CHECK(cpu::panel_gemm::threads_for(1, 768, 512) == std::min(all, 6));  // an expert's down projection
    CHECK(cpu::panel_gemm::threads_for(1, 768, 768) == std::min(all, 9));
    CHECK(cpu::panel_gemm::threads_for(1, 4608, 1536) == std::min(all, 1 + 108));
    CHECK(cpu::panel_gemm::threads_for(512, 768, 16) == std::min(all, 96));
    const int k = 1537, n = 700;  // 700 x 1537 weights: every thread of a two-core machine takes panels
    const auto x = testing::random_normal(static_cast<std::size_t>(k), 41);
    const auto w = testing::random_normal(static_cast<std::size_t>(n) * k, 42, 0.05f);
    const auto packed = cpu::PackedBf16::pack(cpu::rows_of<const float>(w.data(), n, k), cpu::WeightOrientation::out_in);
    for (const cpu::Bf16Level level : threaded_levels()) {
        CAPTURE(std::string(cpu::bf16_level_name(level)));
        cpu::Bf16Scratch scratch;
        std::vector<float> threaded = testing::poisoned<float>(n), one = threaded;
        cpu::gemm_bf16(cpu::rows_of<const float>(x.data(), 1, k), packed, cpu::rows_of(threaded.data(), 1, n), false,
                       scratch, level);
        testing::on_one_thread([&] {
            cpu::gemm_bf16(cpu::rows_of<const float>(x.data(), 1, k), packed, cpu::rows_of(one.data(), 1, n), false,
                           scratch, level);
        });
        CHECK(threaded == one);
        check_against_references(x, w, threaded, 1, k, n, n, 0, nullptr);
    }
}

TEST_CASE("bf16 product: shape mismatches and unavailable levels are errors") {
    const auto w = testing::random_normal(8 * 4, 1);
    const auto packed = cpu::PackedBf16::pack(cpu::rows_of<const float>(w.data(), 8, 4), cpu::WeightOrientation::out_in);
    std::vector<float> x(3 * 5), y(3 * 8);
    cpu::Bf16Scratch scratch;
    CHECK_THROWS_AS(cpu::gemm_bf16(cpu::rows_of<const float>(x.data(), 3, 5), packed, cpu::rows_of(y.data(), 3, 8), false,
                                   scratch, cpu::Bf16Level::avx512_bf16),
                    ShapeError);
    CHECK_THROWS_AS(cpu::gemm_bf16(cpu::rows_of<const float>(x.data(), 3, 4), packed, cpu::rows_of(y.data(), 2, 8), false,
                                   scratch, cpu::Bf16Level::avx512_bf16),
                    ShapeError);
    CHECK_THROWS_AS(cpu::gemm_bf16(cpu::rows_of<const float>(x.data(), 3, 4), packed, cpu::rows_of(y.data(), 3, 8), false,
                                   scratch, cpu::Bf16Level::none),
                    InputError);
}
