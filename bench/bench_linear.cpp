// The weight products every projection runs (cpu::linear, y = x W^T), at the
// models' projection shapes, with fp32 and bf16-stored weights.
//   prefill (many rows): compute-bound, against Eigen's GEMM of the same shape
//   (`f32_eigen` rows: that product on the stored weights, the path of CPUs without AVX2);
//   decode (one row, or one per sequence of a batched step): bandwidth-bound,
//   against the memory read rate (and the FMA peak for several rows). The
//   weights rotate through copies filling 1 GiB so every call reads them from
//   memory, not from a cache that a benchmark loop would keep warm. Eigen's own
//   matrix-vector product (single-threaded in Eigen 3.4) is the baseline, and
//   `*_portable` rows run the same decode products with the vector kernels
//   switched off (cpu::VectorIsaLimit): what a CPU without AVX2 gets; on an
//   AVX-512 machine `*_avx2` rows cap them at AVX2, what a CPU without AVX-512 gets.
#include "bench_support.hpp"

#include <cpx/cpu/kernels/gemm_f32_packed.hpp>
#include <cpx/cpu/kernels/linear.hpp>

#include <optional>
#include <string>

namespace {

using namespace cpx;
using cpx::bench::add;
using cpx::bench::Work;

struct Shape {
    const char* name;  ///< projection/model
    index_t out, in;
};

constexpr Shape shapes[] = {
    {"qkv_mu/187M", 768 + 2 * 256, 2 * 768},    // [q|k|v] from [a|mu]
    {"o_proj/187M", 768, 768},
    {"qkv_mu/384M", 1024 + 2 * 256, 2 * 1024},
    {"o_proj/384M", 1024, 1024},
    {"u/prism_mini", 2048, 512},                // PRISM's h = x U^T
};

template <class W>
const char* dtype_name() { return std::is_same_v<W, float> ? "f32" : "bf16"; }

std::string name_of(const Shape& s, const char* dtype, index_t tokens, int threads) {
    return std::string("linear/") + s.name + "/" + dtype + "/tokens:" + std::to_string(tokens) +
           "/threads:" + std::to_string(threads);
}

/// The product on the stored weight (the default arithmetic: from repack_min_rows rows it packs the
/// weight during the call for the packed kernel, cpu/kernels/gemm_repacked.hpp). `eigen`: with the
/// vector kernels switched off, Eigen's GEMM, what a CPU without AVX2 runs (`f32_eigen` rows).
template <class W>
void prefill(const Shape& s, index_t tokens, int threads, bool eigen = false) {
    const std::string dtype = std::string(dtype_name<W>()) + (eigen ? "_eigen" : "");
    add(name_of(s, dtype.c_str(), tokens, threads), [=](benchmark::State& state) {
        bench::set_threads(threads);
        std::optional<cpu::VectorIsaLimit> limit;
        if (eigen) limit.emplace(cpu::VectorIsa::portable);
        const auto x = bench::normal_vector<float>(static_cast<std::size_t>(tokens * s.in), 1.0, 1);
        const auto w = bench::normal_vector<W>(static_cast<std::size_t>(s.out * s.in), 0.02, 2);
        std::vector<float> y(static_cast<std::size_t>(tokens * s.out));
        cpu::LinearScratch scratch;
        Work work;
        work.tokens = static_cast<double>(tokens);
        work.flops = 2.0 * static_cast<double>(tokens * s.out * s.in);
        work.bytes = static_cast<double>(s.out * s.in * sizeof(W));
        work.gemm_ceiling = bench::gemm_ceiling({{double(tokens), double(s.out), double(s.in)}});
        bench::run(state, work, [&] {
            cpu::linear<W>(cpu::rows_of(x.data(), tokens, s.in), cpu::rows_of(w.data(), s.out, s.in),
                           cpu::rows_of(y.data(), tokens, s.out), cpu::Write::overwrite, scratch);
            benchmark::DoNotOptimize(y.data());
        });
    });
}

/// The same product in bf16 arithmetic (weights packed once, x rounded per call), against the
/// vdpbf16ps peak measured in this binary and against Eigen's fp32 GEMM of the shape.
void prefill_bf16_compute(const Shape& s, index_t tokens, int threads) {
    if (cpu::best_bf16_level() == cpu::Bf16Level::none) return;  // the report names the CPU's levels
    add(name_of(s, "bf16_compute", tokens, threads), [=](benchmark::State& state) {
        bench::set_threads(threads);
        const auto x = bench::normal_vector<float>(static_cast<std::size_t>(tokens * s.in), 1.0, 1);
        const auto w = bench::normal_vector<float>(static_cast<std::size_t>(s.out * s.in), 0.02, 2);
        const auto packed = cpu::PackedWeight::pack(cpu::rows_of<const float>(w.data(), s.out, s.in),
                                                    cpu::WeightOrientation::out_in, cpu::Compute::bf16);
        std::vector<float> y(static_cast<std::size_t>(tokens * s.out));
        cpu::LinearScratch scratch;
        Work work;
        work.tokens = static_cast<double>(tokens);
        work.flops = 2.0 * static_cast<double>(tokens * s.out * s.in);
        work.gemm_ceiling = bench::gemm_ceiling({{double(tokens), double(s.out), double(s.in)}});
        work.bf16_peak = bench::machine_bf16_peak_gflops(threads);
        bench::run(state, work, [&] {
            cpu::linear<float>(cpu::rows_of(x.data(), tokens, s.in), cpu::rows_of(w.data(), s.out, s.in),
                               cpu::rows_of(y.data(), tokens, s.out), cpu::Write::overwrite, scratch, &packed);
            benchmark::DoNotOptimize(y.data());
        });
    });
}

/// The fp32 product with the weight packed once (cpu/kernels/gemm_f32_packed.hpp) instead of Eigen's GEMM.
void prefill_f32_packed(const Shape& s, index_t tokens, int threads) {
    if (!cpu::gemm_f32_packed_available()) return;
    add(name_of(s, "f32_packed", tokens, threads), [=](benchmark::State& state) {
        bench::set_threads(threads);
        const auto x = bench::normal_vector<float>(static_cast<std::size_t>(tokens * s.in), 1.0, 1);
        const auto w = bench::normal_vector<float>(static_cast<std::size_t>(s.out * s.in), 0.02, 2);
        const auto packed = cpu::PackedF32::pack(cpu::rows_of<const float>(w.data(), s.out, s.in),
                                                 cpu::WeightOrientation::out_in, cpu::fp32_panel_layout());
        std::vector<float> y(static_cast<std::size_t>(tokens * s.out));
        Work work;
        work.tokens = static_cast<double>(tokens);
        work.flops = 2.0 * static_cast<double>(tokens * s.out * s.in);
        work.gemm_ceiling = bench::gemm_ceiling({{double(tokens), double(s.out), double(s.in)}});
        work.fma_peak = bench::machine_fma_peak_gflops(threads);
        bench::run(state, work, [&] {
            cpu::gemm_f32_packed(cpu::rows_of<const float>(x.data(), tokens, s.in), packed,
                                 cpu::rows_of(y.data(), tokens, s.out), false);
            benchmark::DoNotOptimize(y.data());
        });
    });
}

/// Copies of one weight matrix filling 1 GiB, kept for the suite's lifetime
/// per storage type (the last shape's copies are reused when they fit).
template <class W>
cpu::AlignedVector<W>& weight_pool() {
    // Cache-line aligned like a model's weights (and every copy, the shapes being whole lines):
    // glibc places large blocks 16 bytes past a page, which splits every 64-byte load over two
    // lines and made the few-row products up to 3x slower than in a model.
    // Values that vary along the pool (a cycle of 997, no multiple of a page's elements), so no
    // two pages are alike and no same-page merging can turn the reads into hits on one page.
    static cpu::AlignedVector<W> pool = [] {
        cpu::AlignedVector<W> p((std::size_t{1} << 30) / sizeof(W));
        for (std::size_t i = 0; i < p.size(); ++i) p[i] = from_float<W>(0.01f + 1e-5f * static_cast<float>(i % 997));
        return p;
    }();
    return pool;
}

/// The few-row products of decode: nn.Linear weights (cpu::linear), the same on bf16 packs (bf16
/// arithmetic, which decode runs under Compute::bf16), the routed experts' input-major weights
/// (cpu::matmul), or Eigen's GEMV as the one-row fp32 baseline.
enum class Product { linear, linear_bf16_packed, matmul, eigen_gemv };

/// bf16 packs of [out, in] weights filling 1 GiB, like weight_pool's copies; each pack of
/// another scale of one normal weight, so that no two copies' pages are alike.
std::vector<cpu::PackedWeight> packed_pool(index_t out, index_t in) {
    auto w = bench::normal_vector<float>(static_cast<std::size_t>(out * in), 0.02, 2);
    const auto pack = [&] {
        return cpu::PackedWeight::pack(cpu::rows_of<const float>(w.data(), out, in), cpu::WeightOrientation::out_in,
                                       cpu::Compute::bf16);
    };
    std::vector<cpu::PackedWeight> packs;
    packs.push_back(pack());
    const std::size_t copies = std::max<std::size_t>(1, (std::size_t{1} << 30) / packs.front().bytes());
    while (packs.size() < copies) {
        for (float& v : w) v *= 1.001f;
        packs.push_back(pack());
    }
    return packs;
}

/// `rows` rows (one per sequence of a decode step) through an `in` -> `out` weight, threaded over
/// output panels. The weights come from memory on every call, so the bound is their bytes at the
/// read rate measured in this binary; GFLOP/s against the peak of the instruction the product runs
/// on (fp32 FMA, or the bf16 one under bf16 arithmetic) shows how close a batch comes to being
/// compute-bound instead.
template <class W>
void decode(const std::string& name, index_t in, index_t out, index_t rows, int threads, Product product,
            cpu::VectorIsa isa = cpu::VectorIsa::avx512) {
    add(name, [=](benchmark::State& state) {
        bench::set_threads(threads);
        const cpu::VectorIsaLimit limit(isa);
        auto& pool = weight_pool<W>();
        const std::size_t size = static_cast<std::size_t>(out * in);
        const auto packs = product == Product::linear_bf16_packed ? packed_pool(out, in) : std::vector<cpu::PackedWeight>{};
        const std::size_t copies = packs.empty() ? pool.size() / size : packs.size();
        const auto x = bench::normal_vector<float>(static_cast<std::size_t>(rows * in), 1.0, 1);
        std::vector<float> y(static_cast<std::size_t>(rows * out));
        cpu::LinearScratch scratch;
        std::size_t next = 0;
        Work work;
        work.tokens = static_cast<double>(rows);
        work.flops = 2.0 * static_cast<double>(size) * static_cast<double>(rows);
        work.bytes = static_cast<double>(size * (packs.empty() ? sizeof(W) : 2));
        work.read_ceiling = bench::machine_read_gbps(threads);
        if (rows > 1) {  // how close a batch comes to the peak of the instruction it runs on
            if (product == Product::linear_bf16_packed) work.bf16_peak = bench::machine_bf16_peak_gflops(threads);
            else work.fma_peak = bench::machine_fma_peak_gflops(threads);
        }
        bench::run(state, work, [&] {
            const std::size_t copy = next++ % copies;
            const W* w = pool.data() + (packs.empty() ? copy : 0) * size;
            const auto xr = cpu::rows_of(x.data(), rows, in);
            const auto yr = cpu::rows_of(y.data(), rows, out);
            if (product == Product::linear_bf16_packed) {
                cpu::linear<W>(xr, cpu::rows_of(w, out, in), yr, cpu::Write::overwrite, scratch, &packs[copy]);
            } else if (product == Product::matmul) {
                cpu::matmul<W>(xr, cpu::rows_of(w, in, out), yr, cpu::Write::overwrite, scratch);
            } else if (product == Product::linear) {
                cpu::linear<W>(xr, cpu::rows_of(w, out, in), yr, cpu::Write::overwrite, scratch);
            } else if constexpr (std::is_same_v<W, float>) {
                using M = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
                Eigen::Map<Eigen::VectorXf>(y.data(), out).noalias() =
                    Eigen::Map<const M>(w, out, in) * Eigen::Map<const Eigen::VectorXf>(x.data(), in);
            }
            benchmark::DoNotOptimize(y.data());
        });
    });
}

/// "_<level>" for a case capped below AVX-512, "" otherwise. Appended, not "_" + string: GCC 12 at
/// -O3 reports that as an overlapping copy (-Wrestrict), which the warnings-as-errors build refuses.
std::string isa_suffix(cpu::VectorIsa isa) {
    std::string suffix;
    if (isa != cpu::VectorIsa::avx512) suffix.append("_").append(cpu::vector_isa_name(isa));
    return suffix;
}

/// The projection `s` at decode sizes.
template <class W>
void decode(const Shape& s, index_t rows, int threads, Product product = Product::linear,
            cpu::VectorIsa isa = cpu::VectorIsa::avx512) {
    std::string variant = product == Product::eigen_gemv           ? "eigen_gemv"
                          : product == Product::linear_bf16_packed ? "bf16_compute"
                                                                   : dtype_name<W>();
    variant += isa_suffix(isa);
    decode<W>(name_of(s, variant.c_str(), rows, threads), s.in, s.out, rows, threads, product, isa);
}

/// A routed expert's product for the few rows a decode step sends to it.
template <class W>
void expert_decode(const char* name, index_t in, index_t out, index_t rows, int threads,
                   cpu::VectorIsa isa = cpu::VectorIsa::avx512) {
    decode<W>(std::string("matmul/") + name + "/" + dtype_name<W>() + isa_suffix(isa) +
                  "/tokens:" + std::to_string(rows) + "/threads:" + std::to_string(threads),
              in, out, rows, threads, Product::matmul, isa);
}

void register_all() {
    for (const Shape& s : shapes) {
        for (index_t tokens : {512, 2048}) {
            prefill<float>(s, tokens, 2);
            prefill<bf16>(s, tokens, 2);
        }
        prefill<float>(s, 2048, 1);
        prefill<bf16>(s, 2048, 1);
        for (int threads : {1, 2}) prefill<float>(s, 2048, threads, true);
        for (index_t tokens : {512, 2048}) prefill_bf16_compute(s, tokens, 2);
        prefill_bf16_compute(s, 2048, 1);
        for (index_t tokens : {512, 2048}) prefill_f32_packed(s, tokens, 2);
        prefill_f32_packed(s, 2048, 1);
        for (int threads : {1, 2}) {
            decode<float>(s, 1, threads, Product::eigen_gemv);
            decode<float>(s, 1, threads);
            decode<bf16>(s, 1, threads);
            if (cpu::best_bf16_level() != cpu::Bf16Level::none) decode<float>(s, 1, threads, Product::linear_bf16_packed);
        }
        for (index_t rows : {4, 8, 16}) {  // batched decode
            decode<float>(s, rows, 2);
            decode<bf16>(s, rows, 2);
            if (cpu::best_bf16_level() != cpu::Bf16Level::none) decode<float>(s, rows, 2, Product::linear_bf16_packed);
        }
    }
    // The tied output head (one row per decode step; 98 MB of fp32 weights for the 187M model,
    // the largest single product of a step), decode only: prefill's head runs in the model suites.
    constexpr Shape head{"lm_head/187M", 32000, 768};
    for (int threads : {1, 2}) {
        decode<float>(head, 1, threads, Product::eigen_gemv);
        decode<float>(head, 1, threads);
        decode<bf16>(head, 1, threads);
    }
    // The narrower kernels below the machine's set, for the first projection and an expert.
    for (cpu::VectorIsa isa : {cpu::VectorIsa::portable, cpu::VectorIsa::avx2}) {
        if (isa >= cpu::machine_vector_isa()) continue;
        for (index_t rows : {1, 16}) {
            decode<float>(shapes[0], rows, 2, Product::linear, isa);
            decode<bf16>(shapes[0], rows, 2, Product::linear, isa);
            expert_decode<float>("expert_gate_up/187M", 768, 1024, rows, 2, isa);
            expert_decode<bf16>("expert_gate_up/187M", 768, 1024, rows, 2, isa);
        }
    }
    for (index_t rows : {1, 4, 16}) {  // the 187M model's experts: gate_up [768 -> 1024], down [512 -> 768]
        expert_decode<float>("expert_gate_up/187M", 768, 1024, rows, 2);
        expert_decode<bf16>("expert_gate_up/187M", 768, 1024, rows, 2);
        expert_decode<float>("expert_down/187M", 512, 768, rows, 2);
        expert_decode<bf16>("expert_down/187M", 512, 768, rows, 2);
    }
}

}  // namespace

int main(int argc, char** argv) { return cpx::bench::bench_main(argc, argv, register_all); }
