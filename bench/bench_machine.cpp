// The machine's own limits, as the other suites measure them: Eigen fp32 GEMM
// (square and model-shaped) and the memory read rate at 1 and 2 threads, over
// buffers from cache-sized to well past the last-level cache.
#include "bench_support.hpp"

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

void memory_read(std::size_t mib, int threads) {
    add("machine/memory_read/mib:" + std::to_string(mib) + "/threads:" + std::to_string(threads),
        [=](benchmark::State& state) {
            const std::size_t n = (mib << 20) / sizeof(float);
            std::vector<float> buf(n, 1.0f);
            cpx::bench::Work w;
            w.bytes = static_cast<double>(n * sizeof(float));
            cpx::bench::run(state, w,
                            [&] { benchmark::DoNotOptimize(cpx::bench::read_all(buf.data(), n, threads)); });
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
    for (std::size_t mib : {16, 64, 512, 2048})
        for (int threads : {1, 2}) memory_read(mib, threads);
}

}  // namespace

int main(int argc, char** argv) { return cpx::bench::bench_main(argc, argv, register_all); }
