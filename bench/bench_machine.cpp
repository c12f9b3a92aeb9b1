// The machine's own limits, as the other suites measure them: Eigen fp32 GEMM
// (square and model-shaped) and the memory read rate at 1 and 2 threads, over
// buffers from cache-sized to well past the last-level cache.
#include "bench_support.hpp"

#include <cpx/cpu/kernels/gemm_bf16.hpp>
#include <cpx/cpu/kernels/gemm_f32_packed.hpp>

#include <string>

namespace {

using cpx::bench::add;

void sgemm(int m, int n, int k, int threads) {
    add("machine/eigen_sgemm/m:" + std::to_string(m) + "/n:" + std::to_string(n) + "/k:" + std::to_string(k) +
            "/threads:" + std::to_string(threads),
        [=](benchmark::State& state) {
            cpx::bench::set_threads(threads);
            using M = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
            M a = M::Random(m, k), b = M::Random(k, n), c(m, n);
            cpx::bench::Work w;
            w.flops = 2.0 * m * n * k;
            cpx::bench::run(state, w, [&] {
                c.noalias() = a * b;
                benchmark::DoNotOptimize(c.data());
            });
        });
}

/// The arithmetic peaks every bf16 case is measured against: one instruction in a register-resident loop.
void peak(const char* name, double (*gflops)(int), int threads) {
    add(std::string("machine/peak/") + name + "/threads:" + std::to_string(threads), [=](benchmark::State& state) {
        double g = 0;
        for (auto _ : state) g = gflops(threads);
        state.counters["GFLOP_per_s"] = benchmark::Counter(g);
    })->Iterations(1);
}

/// Our bf16 product on square shapes, against that peak.
void gemm_bf16(int m, int n, int k, int threads) {
    add("machine/gemm_bf16/m:" + std::to_string(m) + "/n:" + std::to_string(n) + "/k:" + std::to_string(k) +
            "/threads:" + std::to_string(threads),
        [=](benchmark::State& state) {
            cpx::bench::set_threads(threads);
            const auto x = cpx::bench::normal_vector<float>(static_cast<std::size_t>(m) * k, 1.0, 1);
            const auto w = cpx::bench::normal_vector<float>(static_cast<std::size_t>(n) * k, 0.02, 2);
            const auto packed = cpx::cpu::PackedBf16::pack(cpx::cpu::rows_of<const float>(w.data(), n, k),
                                                           cpx::cpu::WeightOrientation::out_in,
                                                           cpx::cpu::bf16_panel_layout());  // as models pack
            std::vector<float> y(static_cast<std::size_t>(m) * n);
            cpx::cpu::Bf16Scratch scratch;
            cpx::bench::Work work;
            work.flops = 2.0 * m * n * k;
            work.bf16_peak = cpx::bench::machine_bf16_peak_gflops(threads);
            cpx::bench::run(state, work, [&] {
                cpx::cpu::gemm_bf16(cpx::cpu::rows_of<const float>(x.data(), m, k), packed,
                                    cpx::cpu::rows_of(y.data(), m, n), false, scratch);
                benchmark::DoNotOptimize(y.data());
            });
        });
}

/// Our packed fp32 product on square shapes, against the FMA peak (and, in the report, Eigen's SGEMM).
void gemm_f32_packed(int m, int n, int k, int threads) {
    add("machine/gemm_f32_packed/m:" + std::to_string(m) + "/n:" + std::to_string(n) + "/k:" + std::to_string(k) +
            "/threads:" + std::to_string(threads),
        [=](benchmark::State& state) {
            cpx::bench::set_threads(threads);
            const auto x = cpx::bench::normal_vector<float>(static_cast<std::size_t>(m) * k, 1.0, 1);
            const auto w = cpx::bench::normal_vector<float>(static_cast<std::size_t>(n) * k, 0.02, 2);
            const auto packed = cpx::cpu::PackedF32::pack(cpx::cpu::rows_of<const float>(w.data(), n, k),
                                                          cpx::cpu::WeightOrientation::out_in,
                                                          cpx::cpu::fp32_panel_layout());  // as models pack
            std::vector<float> y(static_cast<std::size_t>(m) * n);
            cpx::bench::Work work;
            work.flops = 2.0 * m * n * k;
            work.fma_peak = cpx::bench::machine_fma_peak_gflops(threads);
            work.gemm_ceiling = cpx::bench::machine_gemm_gflops(m, n, k);
            cpx::bench::run(state, work, [&] {
                cpx::cpu::gemm_f32_packed(cpx::cpu::rows_of<const float>(x.data(), m, k), packed,
                                          cpx::cpu::rows_of(y.data(), m, n), false);
                benchmark::DoNotOptimize(y.data());
            });
        });
}

/// The read rate, the bare stream or with L2 prefetches ahead (cpx::bench::read_all); the
/// suites' read ceiling is the faster of the two.
void memory_read(std::size_t mib, int threads, bool prefetch) {
    add(std::string("machine/memory_read") + (prefetch ? "_prefetch" : "") + "/mib:" + std::to_string(mib) +
            "/threads:" + std::to_string(threads),
        [=](benchmark::State& state) {
            const std::size_t n = (mib << 20) / sizeof(float);
            const cpx::cpu::AlignedVector<float> buf = cpx::bench::read_buffer(mib << 20);
            cpx::bench::Work w;
            w.bytes = static_cast<double>(n * sizeof(float));
            cpx::bench::run(state, w, [&] {
                benchmark::DoNotOptimize(cpx::bench::read_all(buf.data(), n, threads, prefetch));
            });
        });
}

void register_all() {
    for (int threads : {1, 2}) {
        sgemm(1024, 1024, 1024, threads);
        sgemm(2048, 2048, 2048, threads);
        sgemm(2048, 1280, 1536, threads);  // 187M q|k|v from [a|mu], 2048 tokens
        sgemm(2048, 1600, 1024, threads);  // 384M shared expert gate|up
        sgemm(512, 1600, 1024, threads);   // one of 4 experts' rows
        sgemm(2048, 8716, 1024, threads);  // 384M dense gate|up
    }
    for (int threads : {1, 2}) {
        if (cpx::cpu::gemm_f32_packed_available()) {  // AVX2 or AVX-512: the FMA peak and our kernel
            peak("fma_f32", cpx::bench::machine_fma_peak_gflops, threads);
            gemm_f32_packed(1024, 1024, 1024, threads);
            gemm_f32_packed(2048, 2048, 2048, threads);
            gemm_f32_packed(2048, 1280, 1536, threads);
        }
        if (cpx::cpu::best_bf16_level() != cpx::cpu::Bf16Level::none) {  // widened: its peak is fma_f32's
            if (cpx::cpu::bf16_level_available(cpx::cpu::Bf16Level::avx512_bf16))
                peak("dpbf16", cpx::bench::machine_dpbf16_peak_gflops, threads);
            if (cpx::cpu::best_bf16_level() == cpx::cpu::Bf16Level::amx)
                peak("amx_bf16", cpx::bench::machine_amx_peak_gflops, threads);
            gemm_bf16(1024, 1024, 1024, threads);
            gemm_bf16(2048, 2048, 2048, threads);
        }
    }
    for (std::size_t mib : {16, 64, 512, 2048})
        for (int threads : {1, 2})
            for (bool prefetch : {false, true}) memory_read(mib, threads, prefetch);
}

}  // namespace

int main(int argc, char** argv) { return cpx::bench::bench_main(argc, argv, register_all); }
