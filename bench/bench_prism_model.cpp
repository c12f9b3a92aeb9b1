// The whole PRISM-mini model (fp32 weights, the model's only storage type),
// through per-layer fp32 key/value storage, prefill and decode counted as in
// bench_complexity_model.cpp: prefill FLOPs from flops_per_token over the
// causal positions with the tied head once per sequence, against the GEMM
// rates of its products; decode bytes (all weights, the head, the cache)
// against the memory read rate.
#include "bench_support.hpp"

#include <cpx/config/model_counts.hpp>
#include <cpx/config/presets.hpp>
#include <cpx/models/prism_model.hpp>

#include <memory>
#include <optional>
#include <set>
#include <string>

namespace {

using namespace cpx;
using cpx::bench::add;
using cpx::bench::Gemm;
using cpx::bench::Work;
using C = presets::PrismMini;

PrismModel<C>& model() {
    static PrismModel<C> m(PrismWeights<C>::random(1));
    return m;
}

/// Key/value rows of B sequences x L layers, head-major per layer as the core reads them.
struct PrismCaches {
    static constexpr int heads = 2 * C::heads, dim = C::head_dim;
    index_t capacity;
    std::vector<std::vector<float>> k, v;  // [sequence * layers + layer]
    PrismCaches(index_t batch, index_t capacity) : capacity(capacity) {
        const auto n = static_cast<std::size_t>(batch * C::layers);
        k.assign(n, std::vector<float>(static_cast<std::size_t>(capacity) * C::u_rows, 0.0f));
        v = k;
    }
    cpu::LayerKv<float> of(std::size_t sequence, int layer) {
        const std::size_t i = sequence * C::layers + static_cast<std::size_t>(layer);
        const auto view = [&](std::vector<float>& s) {
            return cpu::HeadRows<float>{s.data(), capacity, heads, dim, dim, capacity * dim};
        };
        return {view(k[i]), view(v[i])};
    }
};

std::vector<std::int32_t> random_tokens(index_t n, std::uint64_t seed) {
    std::mt19937_64 gen(seed);
    std::uniform_int_distribution<std::int32_t> dist(0, C::vocab - 1);
    std::vector<std::int32_t> t(static_cast<std::size_t>(n));
    for (auto& x : t) x = dist(gen);
    return t;
}

template <class Fn>
void warm_once(const std::string& key, Fn&& fn) {
    static std::set<std::string> warmed;
    if (warmed.insert(key).second) fn();
}

std::string shape_suffix(const char* what, index_t batch, const char* len_name, index_t len, int threads) {
    return std::string("/") + what + "/batch:" + std::to_string(batch) + "/" + len_name + ":" + std::to_string(len) +
           "/threads:" + std::to_string(threads);
}

void prefill(index_t batch, index_t tokens, int threads) {
    const std::string name = "model/prism/mini/f32" + shape_suffix("prefill", batch, "tokens", tokens, threads);
    add(name, [=](benchmark::State& state) {
        bench::set_threads(threads);
        auto& m = model();
        const auto ids = random_tokens(batch * tokens, 5);
        PrismCaches caches(batch, tokens);
        std::vector<cpu::SequenceChunk<float>> chunks;
        for (index_t b = 0; b < batch; ++b) chunks.push_back({b * tokens, tokens, 0, {}});
        std::vector<float> logits(static_cast<std::size_t>(batch) * C::vocab);
        const auto step = [&] {
            m.run<float>(ids, chunks, [&](std::size_t c, int l) { return std::optional(caches.of(c, l)); },
                         Matrix<float>(logits.data(), batch, C::vocab), LogitRows::last_of_chunk);
            benchmark::DoNotOptimize(logits.data());
        };
        Work work;
        const double t = static_cast<double>(tokens), b = static_cast<double>(batch), n = b * t, d = C::hidden;
        work.tokens = n;
        work.flops = b * (bench::causal_sum([](count_t ctx) { return flops_per_token<C>(ctx); }, t) -
                          (t - 1) * static_cast<double>(head_flops_per_token<C>()));
        const double L = C::layers, heads = 2 * C::heads;
        work.gemm_ceiling = bench::gemm_ceiling({{n, double(C::u_rows), d, L},
                                                 {n, d, double(C::u_rows), L},
                                                 {t, t, double(C::head_dim), b * L * heads / 2},
                                                 {t, double(C::head_dim), t, b * L * heads / 2},
                                                 {n, double(C::mlp_width), d, L},
                                                 {n, d, double(C::mlp_width), L},
                                                 {b, double(C::vocab), d}});
        warm_once(name, step);
        bench::run(state, work, step);
    });
}

void decode(index_t batch, index_t context, int threads) {
    const std::string name = "model/prism/mini/f32" + shape_suffix("decode", batch, "context", context, threads);
    add(name, [=](benchmark::State& state) {
        bench::set_threads(threads);
        auto& m = model();
        const auto ids = random_tokens(batch, 9);
        PrismCaches caches(batch, context);
        // The new token of each sequence is position context - 1; earlier rows hold zeros.
        std::vector<cpu::SequenceChunk<float>> chunks;
        for (index_t b = 0; b < batch; ++b) chunks.push_back({b, 1, context - 1, {}});
        std::vector<float> logits(static_cast<std::size_t>(batch) * C::vocab);
        const auto step = [&] {
            m.run<float>(ids, chunks, [&](std::size_t c, int l) { return std::optional(caches.of(c, l)); },
                         Matrix<float>(logits.data(), batch, C::vocab), LogitRows::last_of_chunk);
            benchmark::DoNotOptimize(logits.data());
        };
        Work work;
        const double d = C::hidden, L = C::layers;
        work.tokens = static_cast<double>(batch);
        work.flops = static_cast<double>(batch) * static_cast<double>(flops_per_token<C>(context));
        const double weights = L * (double(C::u_rows) * d + 2.0 * C::mlp_width * d + C::mlp_width + 5 * d) +
                               double(C::vocab) * d + 2 * d + 2 * d /*wpe row*/;
        const double kv = static_cast<double>(batch) * L * 2 * C::u_rows * static_cast<double>(context);
        work.bytes = (weights + kv) * sizeof(float);
        work.read_ceiling = bench::machine_read_gbps(threads);
        warm_once(name, step);
        bench::run(state, work, step);
    });
}

void register_all() {
    for (auto [b, t] : {std::pair<index_t, index_t>{1, 128}, {1, 512}, {4, 512}, {16, 128}}) prefill(b, t, 2);
    prefill(1, 512, 1);
    for (index_t ctx : {128, 512}) decode(1, ctx, 2);
    decode(4, 512, 2);
    decode(1, 512, 1);
}

}  // namespace

int main(int argc, char** argv) { return cpx::bench::bench_main(argc, argv, register_all); }
