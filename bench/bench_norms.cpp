// Element-wise layers: RMSNorm (COMPLEXITY-DEEP), LayerNorm (PRISM), RoPE in
// both pairing conventions. They move bytes, not FLOPs: the counters are
// tokens/s and GB/s (read + write), against the memory read rate. At these
// sizes (a few MB) the data stays in the caches, so the fraction can exceed 1.
#include "bench_support.hpp"

#include <cpx/config/presets.hpp>
#include <cpx/cpu/layers/layernorm.hpp>
#include <cpx/cpu/layers/rope.hpp>
#include <cpx/cpu/kernels/row_norms.hpp>
#include <cpx/cpu/runtime/aligned_buffer.hpp>

#include <string>

namespace {

using namespace cpx;
using cpx::bench::add;
using cpx::bench::Work;

std::string suffix(index_t tokens, int threads) {
    return "/tokens:" + std::to_string(tokens) + "/threads:" + std::to_string(threads);
}

/// A copy whose rows start on cache lines, as the models' activations and PyTorch's tensors do
/// (a std::vector of a few MB starts 16 bytes past a page: every 64-byte access splits a line).
cpu::AlignedVector<float> aligned(const std::vector<float>& v) { return {v.begin(), v.end()}; }

/// A norm over [tokens, d] fp32 rows: every element read and written once.
Work norm_work(index_t tokens, index_t d, int threads) {
    Work work;
    work.tokens = static_cast<double>(tokens);
    work.bytes = 2.0 * static_cast<double>(tokens * d) * sizeof(float);
    work.read_ceiling = bench::machine_read_gbps(threads);
    return work;
}

void rmsnorm(index_t d, index_t tokens, int threads) {
    add("rmsnorm/d:" + std::to_string(d) + suffix(tokens, threads), [=](benchmark::State& state) {
        bench::set_threads(threads);
        const auto x = aligned(bench::normal_vector<float>(static_cast<std::size_t>(tokens * d), 1.0, 1));
        const auto w = bench::normal_vector<float>(static_cast<std::size_t>(d), 1.0, 2);
        cpu::AlignedVector<float> y(x.size());
        const Work work = norm_work(tokens, d, threads);
        bench::run(state, work, [&] {
            cpu::rmsnorm_rows(cpu::rows_of(x.data(), tokens, d), w.data(), cpu::rows_of(y.data(), tokens, d), 1e-6f);
            benchmark::DoNotOptimize(y.data());
        });
    });
}

void layernorm(index_t d, index_t tokens, int threads) {
    add("layernorm/d:" + std::to_string(d) + suffix(tokens, threads), [=](benchmark::State& state) {
        bench::set_threads(threads);
        const auto x = aligned(bench::normal_vector<float>(static_cast<std::size_t>(tokens * d), 1.0, 1));
        const auto w = bench::normal_vector<float>(static_cast<std::size_t>(d), 1.0, 2);
        const auto b = bench::normal_vector<float>(static_cast<std::size_t>(d), 1.0, 3);
        cpu::AlignedVector<float> y(x.size());
        const Work work = norm_work(tokens, d, threads);
        bench::run(state, work, [&] {
            cpu::layernorm<float, float, float>(Matrix<const float>(x.data(), tokens, d), Vector<const float>(w.data(), d),
                                                Vector<const float>(b.data(), d), Matrix<float>(y.data(), tokens, d),
                                                1e-5f);
            benchmark::DoNotOptimize(y.data());
        });
    });
}

/// RoPE in place on `heads` heads of `head_dim` per row (queries and keys of one layer).
void rope(const char* name, RopeParams params, int heads, int head_dim, index_t tokens, int threads) {
    add(std::string("rope/") + name + "/heads:" + std::to_string(heads) + "x" + std::to_string(head_dim) +
            suffix(tokens, threads),
        [=](benchmark::State& state) {
            bench::set_threads(threads);
            const cpu::RopeTable table(params, head_dim, tokens);
            auto x = aligned(bench::normal_vector<float>(static_cast<std::size_t>(tokens) * heads * head_dim, 1.0, 1));
            Work work;
            work.tokens = static_cast<double>(tokens);
            work.bytes = 2.0 * static_cast<double>(x.size()) * sizeof(float);
            work.read_ceiling = bench::machine_read_gbps(threads);
            bench::run(state, work, [&] {
                cpu::apply_rope(table, cpu::packed_heads(x.data(), tokens, heads, head_dim), 0);
                benchmark::DoNotOptimize(x.data());
            });
        });
}

void register_all() {
    for (int threads : {1, 2})
        for (index_t tokens : {512, 2048}) {
            rmsnorm(768, tokens, threads);
            rmsnorm(1024, tokens, threads);
            layernorm(512, tokens, threads);
            // 187M: 12 query + 4 key heads of 64, rotate-half.
            rope("rotate_half", presets::ComplexityDeep187M::rope, 16, 64, tokens, threads);
            // PRISM-mini: 16 physical heads of D = 128, interleaved pairs.
            rope("interleaved", presets::PrismMini::signal_rope, 16, 128, tokens, threads);
        }
}

}  // namespace

int main(int argc, char** argv) { return cpx::bench::bench_main(argc, argv, register_all); }
