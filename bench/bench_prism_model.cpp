// The whole PRISM-mini model, weights stored as fp32 or bf16 (the KV cache in
// the same type), through KV caches, counted as in bench_complexity_model.cpp:
// prefill FLOPs from flops_per_token over the causal positions with the tied
// head once per sequence, against the GEMM rates of its products; decode bytes
// (all weights, the head, the cache) against the memory read rate.
#include "bench_support.hpp"

#include <cpx/config/model_counts.hpp>
#include <cpx/config/presets.hpp>
#include <cpx/models/prism_model.hpp>

#include <memory>
#include <set>
#include <string>

namespace {

using namespace cpx;
using cpx::bench::add;
using cpx::bench::Gemm;
using cpx::bench::Work;
using C = presets::PrismMini;

template <class W>
const char* dtype_name() { return std::is_same_v<W, float> ? "f32" : "bf16"; }

/// One model per storage type, built on first use (PRISM-mini is ~200 MB in fp32).
template <class W>
PrismModel<C, W, W>& model() {
    static PrismModel<C, W, W> m(PrismWeights<C, W>::random(1));
    return m;
}

std::vector<std::vector<std::int64_t>> random_batch(index_t batch, index_t tokens, std::uint64_t seed) {
    std::mt19937_64 gen(seed);
    std::uniform_int_distribution<std::int64_t> dist(0, C::vocab - 1);
    std::vector<std::vector<std::int64_t>> b(static_cast<std::size_t>(batch));
    for (auto& s : b) {
        s.resize(static_cast<std::size_t>(tokens));
        for (auto& t : s) t = dist(gen);
    }
    return b;
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

template <class W>
void prefill(index_t batch, index_t tokens, int threads) {
    const std::string name =
        std::string("model/prism/mini/") + dtype_name<W>() + shape_suffix("prefill", batch, "tokens", tokens, threads);
    add(name, [=](benchmark::State& state) {
        bench::set_threads(threads);
        auto& m = model<W>();
        const auto seqs = random_batch(batch, tokens, 5);
        std::vector<TokenSpan> spans(seqs.begin(), seqs.end());
        std::vector<KVCache<C, W>> caches;
        for (index_t b = 0; b < batch; ++b) caches.emplace_back(tokens);
        std::vector<KVCache<C, W>*> cache_ptrs;
        for (auto& c : caches) cache_ptrs.push_back(&c);
        std::vector<float> logits(static_cast<std::size_t>(batch) * C::vocab);
        const auto step = [&] {
            for (auto& c : caches) c.clear();
            m.extend(cache_ptrs, spans, LogitsAt::last, cpu::rows_of(logits.data(), batch, C::vocab));
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

template <class W>
void decode(index_t batch, index_t context, int threads) {
    const std::string name =
        std::string("model/prism/mini/") + dtype_name<W>() + shape_suffix("decode", batch, "context", context, threads);
    add(name, [=](benchmark::State& state) {
        bench::set_threads(threads);
        auto& m = model<W>();
        std::vector<KVCache<C, W>> caches;
        for (index_t b = 0; b < batch; ++b) {
            caches.emplace_back(context);
            caches.back().advance(context - 1);  // the earlier positions (zeros: timing only)
        }
        std::vector<KVCache<C, W>*> cache_ptrs;
        for (auto& c : caches) cache_ptrs.push_back(&c);
        const auto next = random_batch(1, batch, 9)[0];
        std::vector<float> logits(static_cast<std::size_t>(batch) * C::vocab);
        const auto step = [&] {
            m.decode(cache_ptrs, next, cpu::rows_of(logits.data(), batch, C::vocab));
            for (auto& c : caches) c.truncate(context - 1);
            benchmark::DoNotOptimize(logits.data());
        };
        Work work;
        const double d = C::hidden, L = C::layers, sw = sizeof(W);
        work.tokens = static_cast<double>(batch);
        work.flops = static_cast<double>(batch) * static_cast<double>(flops_per_token<C>(context));
        // Matrices in their storage type (U, c_fc, c_proj, the tied head, one wpe row
        // per sequence); LayerNorm and bias vectors in fp32; keys and values of every layer.
        const double matrices = L * (double(C::u_rows) * d + 2.0 * C::mlp_width * d) + double(C::vocab) * d +
                                static_cast<double>(batch) * d;
        const double vectors = (L * (4 * d + C::mlp_width + d) + 2 * d) * sizeof(float);
        const double kv = static_cast<double>(batch) * L * 2 * C::u_rows * static_cast<double>(context) * sw;
        work.bytes = matrices * sw + vectors + kv;
        work.read_ceiling = bench::machine_read_gbps(threads);
        warm_once(name, step);
        bench::run(state, work, step);
    });
}

void register_all() {
    for (auto [b, t] : {std::pair<index_t, index_t>{1, 128}, {1, 512}, {4, 512}, {16, 128}}) prefill<float>(b, t, 2);
    prefill<float>(1, 512, 1);
    for (index_t ctx : {128, 512}) decode<float>(1, ctx, 2);
    decode<float>(4, 512, 2);
    decode<float>(1, 512, 1);
    prefill<bf16>(1, 512, 2);
    for (index_t ctx : {128, 512}) decode<bf16>(1, ctx, 2);
    decode<bf16>(1, 512, 1);
}

}  // namespace

int main(int argc, char** argv) { return cpx::bench::bench_main(argc, argv, register_all); }
