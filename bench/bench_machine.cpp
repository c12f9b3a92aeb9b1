// The machine's own limits, as the other suites measure them: Eigen fp32 GEMM
// (square and model-shaped) and the memory read rate, at 1 and 2 threads.
#include "bench_support.hpp"

namespace {

void BM_EigenSgemm(benchmark::State& state) {
    const int m = static_cast<int>(state.range(0)), n = static_cast<int>(state.range(1)),
              k = static_cast<int>(state.range(2));
    Eigen::setNbThreads(static_cast<int>(state.range(3)));
    using M = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    M a = M::Random(m, k), b = M::Random(k, n), c(m, n);
    cpx::bench::Work w;
    w.flops = 2.0 * m * n * k;
    cpx::bench::run(state, w, [&] {
        c.noalias() = a * b;
        benchmark::DoNotOptimize(c.data());
    });
}
BENCHMARK(BM_EigenSgemm)
    ->ArgNames({"m", "n", "k", "threads"})
    ->Args({1024, 1024, 1024, 1})
    ->Args({2048, 2048, 2048, 1})
    ->Args({2048, 2048, 2048, 2})
    ->Args({2048, 768, 768, 1})    // run2 projections, 2048 tokens
    ->Args({2048, 1024, 1024, 2})  // 384M projections
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void BM_MemoryRead(benchmark::State& state) {
    const int threads = static_cast<int>(state.range(0));
    const std::size_t n = (512ull << 20) / sizeof(float);
    std::vector<float> buf(n, 1.0f);
    cpx::bench::Work w;
    w.bytes = static_cast<double>(n * sizeof(float));
    cpx::bench::run(state, w, [&] { benchmark::DoNotOptimize(cpx::bench::read_all(buf.data(), n, threads)); });
}
BENCHMARK(BM_MemoryRead)->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
