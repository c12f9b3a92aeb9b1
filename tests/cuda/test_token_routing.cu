// Token routing on the GPU: the CUB dispatch against a host stable sort (one
// route and top-k pairs), the grouped expert GEMMs and the whole token-routed
// MLP (routed + shared expert, route weights and output scales) against a
// double-precision reference that dispatches per token, and a decode step
// captured in a CUDA graph and replayed on new tokens.
#include <doctest/doctest.h>

#include <cpx/cuda/runtime/graph.cuh>
#include <cpx/cuda/layers/learned_router_mlp.cuh>
#include <cpx/cuda/layers/token_routed_mlp.cuh>
#include <cpx/router/top_k_routing.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "cuda_test_support.cuh"
#include "test_support.hpp"

using namespace cpx;
// CUB brings a global ::cuda namespace (libcu++), so cpx::cuda gets a short alias here.
namespace gpu = cpx::cuda;

namespace {

std::vector<std::int32_t> read_ints(const std::int32_t* device, int n) {
    std::vector<std::int32_t> host(n);
    if (n) CPX_CUDA_CHECK(cudaMemcpy(host.data(), device, n * sizeof(std::int32_t), cudaMemcpyDeviceToHost));
    return host;
}

std::int64_t clamp_token(std::int64_t t, int vocab) { return std::clamp<std::int64_t>(t, 0, vocab - 1); }

// A routing table with every expert used except `empty_expert` (pass -1 for none).
std::vector<std::int32_t> make_table(int vocab, int experts, int empty_expert, std::uint64_t seed) {
    auto ids = testing::random_ints(vocab, 0, experts - 1, seed);
    std::vector<std::int32_t> table(ids.begin(), ids.end());
    for (auto& e : table)
        if (e == empty_expert) e = (e + 1) % experts;
    return table;
}

// A [k, V] table of random routes, each token's routes distinct (the cyclic rule on a random primary).
std::vector<std::int32_t> make_top_k_table(int vocab, int experts, int k, std::uint64_t seed) {
    return router::cyclic_routes(make_table(vocab, experts, -1, seed), k, experts);
}

double silu_d(double z) { return z / (1.0 + std::exp(-z)); }

// Host model of one token-routed MLP: weights as floats (already rounded to the storage type).
struct HostMlp {
    int d, ie, is, experts;
    std::vector<float> gate, up, down;         // [E, d, ie], [E, d, ie], [E, ie, d]
    std::vector<float> s_gate_up, s_down;      // [2 is, d], [d, is]

    // h + R(m) + S(m) per token, dispatching each token to its own expert.
    std::vector<double> apply(const std::vector<float>& m, const std::vector<float>& h, const std::vector<int>& expert,
                              int rows) const {
        return apply_routes(m, h, expert, 1, RouteMix{}, rows);
    }

    // h + g_s S(m) + sum_r m_r E_{routes[n * k + r]}(m) per token (math/route_mix.hpp's factors).
    std::vector<double> apply_routes(const std::vector<float>& m, const std::vector<float>& h,
                                     const std::vector<int>& routes, int k, RouteMix mix, int rows) const {
        std::vector<double> out(h.begin(), h.end());
        std::vector<double> act(std::max(ie, is));
        for (int r = 0; r < rows; ++r) {
            const float* x = &m[r * d];
            for (int route = 0; route < k; ++route) {
                const int e = routes[r * k + route];
                const double factor = mix.route(route);
                for (int j = 0; j < ie; ++j) {
                    double g = 0, u = 0;
                    for (int c = 0; c < d; ++c) {
                        g += double(x[c]) * gate[(e * d + c) * ie + j];
                        u += double(x[c]) * up[(e * d + c) * ie + j];
                    }
                    act[j] = silu_d(g) * u;
                }
                for (int n = 0; n < d; ++n) {
                    double s = 0;
                    for (int j = 0; j < ie; ++j) s += act[j] * down[(e * ie + j) * d + n];
                    out[r * d + n] += factor * s;
                }
            }
            if (is == 0) continue;
            for (int j = 0; j < is; ++j) {
                double g = 0, u = 0;
                for (int c = 0; c < d; ++c) {
                    g += double(x[c]) * s_gate_up[j * d + c];
                    u += double(x[c]) * s_gate_up[(is + j) * d + c];
                }
                act[j] = silu_d(g) * u;
            }
            for (int n = 0; n < d; ++n) {
                double s = 0;
                for (int j = 0; j < is; ++j) s += act[j] * s_down[n * is + j];
                out[r * d + n] += double(mix.shared) * s;
            }
        }
        return out;
    }
};

template <class T>
HostMlp make_host_mlp(int d, int ie, int is, int experts, std::uint64_t seed) {
    HostMlp w{d, ie, is, experts, {}, {}, {}, {}, {}};
    const float s_in = 1.0f / std::sqrt(float(d)), s_mid = 1.0f / std::sqrt(float(std::max(ie, 1)));
    w.gate = testing::rounded<T>(testing::random_normal(experts * d * ie, seed, s_in));
    w.up = testing::rounded<T>(testing::random_normal(experts * d * ie, seed + 1, s_in));
    w.down = testing::rounded<T>(testing::random_normal(experts * ie * d, seed + 2, s_mid));
    w.s_gate_up = testing::rounded<T>(testing::random_normal(2 * is * d, seed + 3, s_in));
    w.s_down = testing::rounded<T>(testing::random_normal(d * is, seed + 4, 1.0f / std::sqrt(float(std::max(is, 1)))));
    return w;
}

// The same weights on the device.
template <class T>
struct DeviceMlp {
    gpu::DeviceBuffer<T> gate, up, down, s_gate_up, s_down;
    gpu::TokenRoutedMlpWeights<T> weights;
    explicit DeviceMlp(const HostMlp& h)
        : gate(testing::to_storage<T>(h.gate)),
          up(testing::to_storage<T>(h.up)),
          down(testing::to_storage<T>(h.down)),
          s_gate_up(testing::to_storage<T>(h.s_gate_up)),
          s_down(testing::to_storage<T>(h.s_down)) {
        weights.gate = {gate.data(), h.experts, h.d, h.ie};
        weights.up = {up.data(), h.experts, h.d, h.ie};
        weights.down = {down.data(), h.experts, h.ie, h.d};
        weights.shared = {s_gate_up.data(), s_down.data(), h.d, h.is};
    }
};

std::vector<int> host_experts(const std::vector<std::int64_t>& tokens, const std::vector<std::int32_t>& table) {
    std::vector<int> e(tokens.size());
    for (std::size_t i = 0; i < tokens.size(); ++i) e[i] = table[clamp_token(tokens[i], int(table.size()))];
    return e;
}

// Routes and runs the token-routed MLP once; returns h + MLP(m) as floats.
template <class T>
std::vector<float> run_mlp(gpu::Blas& blas, gpu::ExpertDispatch& dispatch, const gpu::DeviceRoutingTable& table,
                           const DeviceMlp<T>& mlp, const HostMlp& host, const std::vector<std::int64_t>& tokens,
                           const std::vector<float>& m, const std::vector<float>& h,
                           gpu::GroupedGemmChoice kernel = {}) {
    const int rows = static_cast<int>(tokens.size());
    gpu::DeviceBuffer<std::int64_t> dtok(tokens);
    auto dm = testing::upload_as<T>(m), dh = testing::upload_as<T>(h);
    gpu::TokenRoutedMlpWorkspace<T> ws(dispatch.max_tokens(), host.ie, host.is, dispatch.max_routes(), host.d);
    dispatch.route(dtok.data(), rows, table, nullptr);
    gpu::token_routed_mlp_add<T>(blas, dispatch, StridedMatrix<const T>(dm.data(), rows, host.d, host.d), mlp.weights,
                                  ws, StridedMatrix<T>(dh.data(), rows, host.d, host.d), nullptr, kernel);
    CPX_CUDA_CHECK(cudaDeviceSynchronize());
    return testing::download_floats(dh);
}

}  // namespace

TEST_CASE("routing gives the stable permutation by expert and the segment offsets, clamping ids like the reference") {
    const int V = 101, E = 4;
    const auto table = make_table(V, E, 2, 1);  // expert 2 receives no token
    gpu::DeviceRoutingTable dtable(TokenRouting(table, E));
    gpu::ExpertDispatch dispatch(E, 300);
    for (int rows : {1, 7, 64, 65, 300}) {
        auto ids = testing::random_ints(rows, -3, V + 3, 10 + rows);  // a few ids outside [0, V): clamped
        const std::vector<std::int64_t> tokens(ids.begin(), ids.end());
        gpu::DeviceBuffer<std::int64_t> dtok(tokens);
        dispatch.route(dtok.data(), rows, dtable, nullptr);
        CPX_CUDA_CHECK(cudaDeviceSynchronize());

        const auto expert = host_experts(tokens, table);
        std::vector<std::int32_t> perm(rows);
        std::iota(perm.begin(), perm.end(), 0);
        std::stable_sort(perm.begin(), perm.end(), [&](int a, int b) { return expert[a] < expert[b]; });
        std::vector<std::int32_t> offsets(E + 1, 0);
        for (int e : expert) ++offsets[e + 1];
        std::partial_sum(offsets.begin(), offsets.end(), offsets.begin());

        CHECK(read_ints(dispatch.permutation(), rows) == perm);
        CHECK(read_ints(dispatch.offsets(), E + 1) == offsets);
        CHECK(offsets[3] == offsets[2]);  // the empty expert has an empty segment
    }
}

TEST_CASE("routing by given expert ids (the learned router's argmax) uses the same dispatch") {
    const int E = 3, rows = 50;
    const auto ids = testing::random_ints(rows, 0, E - 1, 20);
    gpu::DeviceBuffer<std::int32_t> dids(std::vector<std::int32_t>(ids.begin(), ids.end()));
    gpu::ExpertDispatch dispatch(E, rows);
    dispatch.route_ids(dids.data(), rows, nullptr);
    CPX_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<std::int32_t> perm(rows);
    std::iota(perm.begin(), perm.end(), 0);
    std::stable_sort(perm.begin(), perm.end(), [&](int a, int b) { return ids[a] < ids[b]; });
    CHECK(read_ints(dispatch.permutation(), rows) == perm);
}

TEST_CASE("the dispatch rejects more tokens or routes than it was sized for") {
    gpu::ExpertDispatch dispatch(4, 8);
    gpu::DeviceBuffer<std::int32_t> ids(16);
    CHECK_THROWS_AS(dispatch.route_ids(ids.data(), 9, nullptr), ShapeError);
    const auto two_routes = make_top_k_table(11, 4, 2, 5);
    gpu::DeviceRoutingTable dtable(TopKRouting(two_routes, 2, 4));
    gpu::DeviceBuffer<std::int64_t> tokens(std::vector<std::int64_t>(4, 1));
    CHECK_THROWS_AS(dispatch.route(tokens.data(), 4, dtable, nullptr), ShapeError);  // sized for one route
    CHECK_THROWS_AS(gpu::ExpertDispatch(4, 8, 5), ShapeError);                       // more routes than experts
}

// ---------------------------------------------------------------- top-k routing (docs/MODELS.md §8.5)

TEST_CASE("top-k routing sorts every (token, route) pair by expert; the sources are the pairs' tokens") {
    const int V = 101, E = 4, k = 3;
    const auto table = make_top_k_table(V, E, k, 3);
    gpu::DeviceRoutingTable dtable(TopKRouting(table, k, E));
    gpu::ExpertDispatch dispatch(E, 130, k);
    for (int rows : {1, 7, 65, 130}) {
        auto ids = testing::random_ints(rows, -3, V + 3, 200 + rows);  // a few ids outside [0, V): clamped
        const std::vector<std::int64_t> tokens(ids.begin(), ids.end());
        gpu::DeviceBuffer<std::int64_t> dtok(tokens);
        dispatch.route(dtok.data(), rows, dtable, nullptr);
        CPX_CUDA_CHECK(cudaDeviceSynchronize());
        REQUIRE(dispatch.count() == rows * k);

        // Pair p = r * rows + n is route r of token n.
        std::vector<int> expert(rows * k);
        for (int p = 0; p < rows * k; ++p) expert[p] = table[(p / rows) * V + clamp_token(tokens[p % rows], V)];
        std::vector<std::int32_t> perm(rows * k), sources(rows * k);
        std::iota(perm.begin(), perm.end(), 0);
        std::stable_sort(perm.begin(), perm.end(), [&](int a, int b) { return expert[a] < expert[b]; });
        for (int i = 0; i < rows * k; ++i) sources[i] = perm[i] % rows;
        std::vector<std::int32_t> offsets(E + 1, 0);
        for (int e : expert) ++offsets[e + 1];
        std::partial_sum(offsets.begin(), offsets.end(), offsets.begin());

        CHECK(read_ints(dispatch.permutation(), rows * k) == perm);
        CHECK(read_ints(dispatch.sources(), rows * k) == sources);
        CHECK(read_ints(dispatch.offsets(), E + 1) == offsets);
    }
}

// fp32 as above: each output sums top_k experts' products in a different order: ~1e-6.
TEST_CASE("the top-k MLP (route weights, output scales) matches the per-token reference for top_k 1, 2 and E") {
    const int V = 257, E = 4, d = 64, ie = 48, is = 40;
    const HostMlp host = make_host_mlp<float>(d, ie, is, E, 140);
    gpu::Blas blas;
    struct Case {
        int k;
        RouteMix mix;
    };
    // top-1 with a routed scale (the pair path with one route), top-2 0.7 / 0.3 with gates 0.6 / 1.3,
    // and every expert for every token with the default 0.95 primary weight.
    for (const Case c : {Case{1, {0.8f, 1.25f, 0.0f}}, Case{2, {0.6f, 1.3f * 0.7f, 1.3f * 0.3f}},
                         Case{E, {1.0f, 0.95f, 0.05f / 3}}}) {
        CAPTURE(c.k);
        const auto table = make_top_k_table(V, E, c.k, 141 + c.k);
        gpu::DeviceRoutingTable dtable(TopKRouting(table, c.k, E));
        gpu::ExpertDispatch dispatch(E, 150, c.k);
        DeviceMlp<float> weighted(host);
        weighted.weights.mix = c.mix;
        for (int rows : {1, 33, 150}) {
            const auto ids = testing::random_ints(rows, 0, V - 1, 150 + rows);
            const std::vector<std::int64_t> tokens(ids.begin(), ids.end());
            const auto m = testing::random_normal(rows * d, 160 + rows), h = testing::random_normal(rows * d, 170 + rows);
            const auto got = run_mlp<float>(blas, dispatch, dtable, weighted, host, tokens, m, h);
            std::vector<int> routes(rows * c.k);
            for (int n = 0; n < rows; ++n)
                for (int r = 0; r < c.k; ++r) routes[n * c.k + r] = table[r * V + tokens[n]];
            CHECK(testing::relative_error(got, host.apply_routes(m, h, routes, c.k, c.mix, rows)) < 1e-5);
        }
    }
}

// fp32: sums of at most a few hundred products, in a different order from the reference: ~1e-6.
TEST_CASE("the token-routed MLP (grouped experts + shared expert) matches the per-token reference in fp32") {
    const int V = 257, E = 4, d = 64, ie = 32, is = 32;
    const auto table = make_table(V, E, 1, 30);
    gpu::DeviceRoutingTable dtable(TokenRouting(table, E));
    const HostMlp host = make_host_mlp<float>(d, ie, is, E, 31);
    DeviceMlp<float> mlp(host);
    gpu::Blas blas;
    gpu::ExpertDispatch dispatch(E, 200);
    for (int rows : {1, 5, 70, 200}) {
        const auto ids = testing::random_ints(rows, 0, V - 1, 40 + rows);
        const std::vector<std::int64_t> tokens(ids.begin(), ids.end());
        const auto m = testing::random_normal(rows * d, 50 + rows);
        const auto h = testing::random_normal(rows * d, 60 + rows);
        const auto got = run_mlp<float>(blas, dispatch, dtable, mlp, host, tokens, m, h);
        CHECK(testing::relative_error(got, host.apply(m, h, host_experts(tokens, table), rows)) < 1e-5);
    }
}

TEST_CASE("the routed experts alone, with widths that are not multiples of the tiles, and no shared expert") {
    const int V = 64, E = 5, d = 72, ie = 100;
    const auto table = make_table(V, E, -1, 70);
    gpu::DeviceRoutingTable dtable(TokenRouting(table, E));
    const HostMlp host = make_host_mlp<float>(d, ie, 0, E, 71);
    DeviceMlp<float> mlp(host);
    gpu::Blas blas;
    gpu::ExpertDispatch dispatch(E, 131);
    const auto ids = testing::random_ints(131, 0, V - 1, 72);
    const std::vector<std::int64_t> tokens(ids.begin(), ids.end());
    const auto m = testing::random_normal(131 * d, 73), h = testing::random_normal(131 * d, 74);
    const auto got = run_mlp<float>(blas, dispatch, dtable, mlp, host, tokens, m, h);
    CHECK(testing::relative_error(got, host.apply(m, h, host_experts(tokens, table), 131)) < 1e-5);
}

TEST_CASE("the token-routed MLP in bf16 and fp16 stays within 2e-2") {
    const int V = 257, E = 4, d = 64, ie = 32, is = 32, rows = 77;
    const auto table = make_table(V, E, -1, 80);
    gpu::DeviceRoutingTable dtable(TokenRouting(table, E));
    const auto ids = testing::random_ints(rows, 0, V - 1, 81);
    const std::vector<std::int64_t> tokens(ids.begin(), ids.end());
    gpu::Blas blas;
    gpu::ExpertDispatch dispatch(E, rows);
    {
        const HostMlp host = make_host_mlp<bf16>(d, ie, is, E, 82);
        DeviceMlp<bf16> mlp(host);
        const auto m = testing::rounded<bf16>(testing::random_normal(rows * d, 83));
        const auto h = testing::rounded<bf16>(testing::random_normal(rows * d, 84));
        const auto got = run_mlp<bf16>(blas, dispatch, dtable, mlp, host, tokens, m, h);
        CHECK(testing::relative_error(got, host.apply(m, h, host_experts(tokens, table), rows)) < 2e-2);
    }
    {
        const HostMlp host = make_host_mlp<fp16>(d, ie, is, E, 85);
        DeviceMlp<fp16> mlp(host);
        const auto m = testing::rounded<fp16>(testing::random_normal(rows * d, 86));
        const auto h = testing::rounded<fp16>(testing::random_normal(rows * d, 87));
        const auto got = run_mlp<fp16>(blas, dispatch, dtable, mlp, host, tokens, m, h);
        CHECK(testing::relative_error(got, host.apply(m, h, host_experts(tokens, table), rows)) < 2e-2);
    }
}

// The WMMA kernels accumulate in fp32 like the SIMT ones; only the order of the sums and thus
// the last bit of some 16-bit outputs differ (2^-8 relative at most), hence 1e-2 between them.
// Both tiled kernels run at every count here (the row kernel is off).
TEST_CASE("the tensor-core grouped GEMMs (bf16, fp16) match the reference and the SIMT kernels") {
    const int V = 257, E = 4, d = 96, ie = 80, is = 32;  // widths that are not multiples of the 64-wide tiles
    const auto table = make_table(V, E, 3, 120);
    gpu::DeviceRoutingTable dtable(TokenRouting(table, E));
    gpu::Blas blas;
    gpu::ExpertDispatch dispatch(E, 150);
    const gpu::GroupedGemmChoice tiled_tc(gpu::GroupedGemmKernel::tensor_cores, 0),
        tiled_simt(gpu::GroupedGemmKernel::simt, 0);
    for (int rows : {1, 37, 150}) {
        const auto ids = testing::random_ints(rows, 0, V - 1, 121 + rows);
        const std::vector<std::int64_t> tokens(ids.begin(), ids.end());
        {
            const HostMlp host = make_host_mlp<bf16>(d, ie, is, E, 122);
            DeviceMlp<bf16> mlp(host);
            const auto m = testing::rounded<bf16>(testing::random_normal(rows * d, 123));
            const auto h = testing::rounded<bf16>(testing::random_normal(rows * d, 124));
            const auto tc = run_mlp<bf16>(blas, dispatch, dtable, mlp, host, tokens, m, h, tiled_tc);
            const auto simt = run_mlp<bf16>(blas, dispatch, dtable, mlp, host, tokens, m, h, tiled_simt);
            CHECK(testing::relative_error(tc, host.apply(m, h, host_experts(tokens, table), rows)) < 2e-2);
            CHECK(testing::relative_error(tc, simt) < 1e-2);
        }
        {
            const HostMlp host = make_host_mlp<fp16>(d, ie, is, E, 125);
            DeviceMlp<fp16> mlp(host);
            const auto m = testing::rounded<fp16>(testing::random_normal(rows * d, 126));
            const auto h = testing::rounded<fp16>(testing::random_normal(rows * d, 127));
            const auto tc = run_mlp<fp16>(blas, dispatch, dtable, mlp, host, tokens, m, h, tiled_tc);
            CHECK(testing::relative_error(tc, host.apply(m, h, host_experts(tokens, table), rows)) < 2e-2);
        }
    }
}

// The row kernel (calls of few rows) against the reference and the tiled kernels, on both of its
// epilogues: scatter-add onto the residual (top-1, unit factor) and per-pair rows (top-2, weighted).
// Up to 600 rows (300 tokens x 2 routes): the row kernel takes calls above the default threshold
// when a caller sets a higher one.
TEST_CASE("the row kernel matches the reference and the tiled kernels, fp32 and bf16, 1 to 600 rows") {
    const int V = 257, E = 5, d = 72, ie = 100, is = 40;  // widths that are not multiples of 64 or of 4 rows
    const gpu::GroupedGemmChoice rows_always(gpu::GroupedGemmKernel::simt, 1 << 20),
        tiled(gpu::GroupedGemmKernel::simt, 0);
    gpu::Blas blas;
    struct Case {
        int k;
        RouteMix mix;
    };
    for (const Case c : {Case{1, RouteMix{}}, Case{2, {0.6f, 1.3f * 0.7f, 1.3f * 0.3f}}}) {
        CAPTURE(c.k);
        const auto table = make_top_k_table(V, E, c.k, 180 + c.k);
        gpu::DeviceRoutingTable dtable(TopKRouting(table, c.k, E));
        gpu::ExpertDispatch dispatch(E, 300, c.k);
        const HostMlp host = make_host_mlp<float>(d, ie, is, E, 182);
        DeviceMlp<float> mlp(host);
        mlp.weights.mix = c.mix;
        for (int rows : {1, 3, 7, 40, 300}) {
            CAPTURE(rows);
            const auto ids = testing::random_ints(rows, 0, V - 1, 183 + rows);
            const std::vector<std::int64_t> tokens(ids.begin(), ids.end());
            const auto m = testing::random_normal(rows * d, 184 + rows), h = testing::random_normal(rows * d, 185 + rows);
            std::vector<int> routes(rows * c.k);
            for (int n = 0; n < rows; ++n)
                for (int r = 0; r < c.k; ++r) routes[n * c.k + r] = table[r * V + tokens[n]];
            const auto want = host.apply_routes(m, h, routes, c.k, c.mix, rows);
            const auto by_rows = run_mlp<float>(blas, dispatch, dtable, mlp, host, tokens, m, h, rows_always);
            const auto by_tiles = run_mlp<float>(blas, dispatch, dtable, mlp, host, tokens, m, h, tiled);
            CHECK(testing::relative_error(by_rows, want) < 1e-5);
            CHECK(testing::relative_error(by_rows, by_tiles) < 1e-5);
        }
    }
    const auto table = make_table(V, E, 2, 190);  // expert 2 gets no token: an empty segment
    gpu::DeviceRoutingTable dtable(TokenRouting(table, E));
    gpu::ExpertDispatch dispatch(E, 9);
    const HostMlp host = make_host_mlp<bf16>(d, ie, is, E, 191);
    DeviceMlp<bf16> mlp(host);
    for (int rows : {1, 9}) {
        const auto ids = testing::random_ints(rows, 0, V - 1, 192 + rows);
        const std::vector<std::int64_t> tokens(ids.begin(), ids.end());
        const auto m = testing::rounded<bf16>(testing::random_normal(rows * d, 193 + rows));
        const auto h = testing::rounded<bf16>(testing::random_normal(rows * d, 194 + rows));
        const auto by_rows = run_mlp<bf16>(blas, dispatch, dtable, mlp, host, tokens, m, h, rows_always);
        const auto by_tiles = run_mlp<bf16>(blas, dispatch, dtable, mlp, host, tokens, m, h, tiled);
        CHECK(testing::relative_error(by_rows, host.apply(m, h, host_experts(tokens, table), rows)) < 2e-2);
        CHECK(testing::relative_error(by_rows, by_tiles) < 1e-2);
    }
}

// The row kernel with K split over the blocks of a thread-block cluster (compute capability 9.0+):
// forced 2, 3 and 8 ways (chunks of unequal length; at K = 10 and 9, blocks with no rows of K at
// all) and the automatic choice, which splits one token's 256-deep gate/up 4 ways and its
// 200-deep down product 2 ways on a device of 132 multiprocessors. Against the reference, against
// the unsplit kernel (only the order of the fp32 sums differs), and bit-identical when run again.
TEST_CASE("the row kernel split over a thread-block cluster matches the unsplit kernel, deterministically") {
    const int V = 257, E = 5, d = 256, ie = 200, is = 40;  // ie: not a multiple of the 64-wide column tiles
    gpu::Blas blas;
    const auto table = make_top_k_table(V, E, 2, 200);
    gpu::DeviceRoutingTable dtable(TopKRouting(table, 2, E));
    gpu::ExpertDispatch dispatch(E, 40, 2);
    const HostMlp host = make_host_mlp<float>(d, ie, is, E, 201);
    DeviceMlp<float> mlp(host);
    mlp.weights.mix = {0.6f, 1.3f * 0.7f, 1.3f * 0.3f};
    const gpu::GroupedGemmChoice unsplit(gpu::GroupedGemmKernel::simt, 1 <<20, 1);
    const auto ids = testing::random_ints(40, 0, V - 1, 202);
    const std::vector<std::int64_t> all_tokens(ids.begin(), ids.end());
    if (gpu::current_device().major < 9) {
        const std::vector<std::int64_t> one(all_tokens.begin(), all_tokens.begin() + 1);
        const auto m = testing::random_normal(d, 203), h = testing::random_normal(d, 204);
        CHECK_THROWS_AS(run_mlp<float>(blas, dispatch, dtable, mlp, host, one, m, h,
                                       gpu::GroupedGemmChoice(gpu::GroupedGemmKernel::simt, 1 << 20, 2)),
                        ShapeError);
        MESSAGE("skipped: thread-block clusters need compute capability 9.0; the forced split is refused here");
        return;
    }
    for (int rows : {1, 3, 7, 40}) {
        CAPTURE(rows);
        const std::vector<std::int64_t> tokens(all_tokens.begin(), all_tokens.begin() + rows);
        const auto m = testing::random_normal(rows * d, 205 + rows), h = testing::random_normal(rows * d, 206 + rows);
        std::vector<int> routes(rows * 2);
        for (int n = 0; n < rows; ++n)
            for (int r = 0; r < 2; ++r) routes[n * 2 + r] = table[r * V + tokens[n]];
        const auto want = host.apply_routes(m, h, routes, 2, mlp.weights.mix, rows);
        const auto base = run_mlp<float>(blas, dispatch, dtable, mlp, host, tokens, m, h, unsplit);
        CHECK(testing::relative_error(base, want) < 1e-5);
        for (int split : {gpu::expert_row_split_auto, 2, 3, 8}) {
            CAPTURE(split);
            const gpu::GroupedGemmChoice choice(gpu::GroupedGemmKernel::simt, 1 << 20, split);
            const auto got = run_mlp<float>(blas, dispatch, dtable, mlp, host, tokens, m, h, choice);
            CHECK(testing::relative_error(got, want) < 1e-5);
            CHECK(testing::relative_error(got, base) < 1e-5);
            CHECK(run_mlp<float>(blas, dispatch, dtable, mlp, host, tokens, m, h, choice) == got);
        }
    }
    // Experts 10 wide on a 9-wide model: at 8 ways chunks of 2 rows, the last blocks' chunks empty.
    {
        const int small_d = 9, small_ie = 10;
        const HostMlp small = make_host_mlp<float>(small_d, small_ie, 0, E, 220);
        DeviceMlp<float> small_mlp(small);
        const auto table1 = make_table(V, E, -1, 221);
        gpu::DeviceRoutingTable small_table(TokenRouting(table1, E));
        gpu::ExpertDispatch small_dispatch(E, 7);
        const std::vector<std::int64_t> tokens(all_tokens.begin(), all_tokens.begin() + 7);
        const auto m = testing::random_normal(7 * small_d, 222), h = testing::random_normal(7 * small_d, 223);
        const auto want = small.apply(m, h, host_experts(tokens, table1), 7);
        for (int split : {2, 3, 8}) {
            CAPTURE(split);
            const auto got = run_mlp<float>(blas, small_dispatch, small_table, small_mlp, small, tokens, m, h,
                                            gpu::GroupedGemmChoice(gpu::GroupedGemmKernel::simt, 1 << 20, split));
            CHECK(testing::relative_error(got, want) < 1e-5);
        }
    }
    // bf16, one route: the scatter-add epilogue onto the residual.
    const auto table1 = make_table(V, E, -1, 210);
    gpu::DeviceRoutingTable dtable1(TokenRouting(table1, E));
    gpu::ExpertDispatch dispatch1(E, 9);
    const HostMlp host16 = make_host_mlp<bf16>(d, ie, is, E, 211);
    DeviceMlp<bf16> mlp16(host16);
    for (int rows : {1, 9}) {
        CAPTURE(rows);
        const std::vector<std::int64_t> tokens(all_tokens.begin(), all_tokens.begin() + rows);
        const auto m = testing::rounded<bf16>(testing::random_normal(rows * d, 212 + rows));
        const auto h = testing::rounded<bf16>(testing::random_normal(rows * d, 213 + rows));
        const auto base = run_mlp<bf16>(blas, dispatch1, dtable1, mlp16, host16, tokens, m, h, unsplit);
        for (int split : {gpu::expert_row_split_auto, 8}) {
            CAPTURE(split);
            const auto got = run_mlp<bf16>(blas, dispatch1, dtable1, mlp16, host16, tokens, m, h,
                                           gpu::GroupedGemmChoice(gpu::GroupedGemmKernel::simt, 1 << 20, split));
            CHECK(testing::relative_error(got, host16.apply(m, h, host_experts(tokens, table1), rows)) < 2e-2);
            CHECK(testing::relative_error(got, base) < 1e-2);
        }
    }
}

TEST_CASE("grouped GEMMs refuse tensor cores for fp32 operands and a row-kernel split outside 0 to 8") {
    gpu::ExpertDispatch dispatch(2, 4);
    gpu::DeviceBuffer<std::int32_t> ids(std::vector<std::int32_t>{0, 1, 1, 0});
    dispatch.route_ids(ids.data(), 4, nullptr);
    gpu::DeviceBuffer<float> x(4 * 16), w(2 * 16 * 16), act(4 * 16);
    const gpu::ExpertWeights<float> ew{w.data(), 2, 16, 16};
    auto call = [&](gpu::GroupedGemmChoice choice) {
        gpu::grouped_swiglu<float, float, float>(dispatch, StridedMatrix<const float>(x.data(), 4, 16, 16), ew, ew,
                                                 StridedMatrix<float>(act.data(), 4, 16, 16), nullptr, choice);
    };
    CHECK_THROWS_AS(call(gpu::GroupedGemmKernel::tensor_cores), ShapeError);
    for (int split : {-1, 9})
        CHECK_THROWS_AS(call(gpu::GroupedGemmChoice(gpu::GroupedGemmKernel::simt, 512, split)), ShapeError);
}

TEST_CASE("a decode step (routing + token-routed MLP) captured in a CUDA graph replays correctly on new tokens") {
    const int V = 257, E = 4, d = 64, ie = 32, is = 32, rows = 6;  // one token for each of 6 sequences
    const auto table = make_table(V, E, -1, 90);
    gpu::DeviceRoutingTable dtable(TokenRouting(table, E));
    const HostMlp host = make_host_mlp<float>(d, ie, is, E, 91);
    DeviceMlp<float> mlp(host);
    gpu::Blas blas;
    gpu::Stream stream;
    gpu::ExpertDispatch dispatch(E, rows);
    gpu::TokenRoutedMlpWorkspace<float> ws(rows, ie, is);
    gpu::DeviceBuffer<std::int64_t> dtok(rows);
    gpu::DeviceBuffer<float> dm(rows * d), dh(rows * d);

    auto step = [&] {
        dispatch.route(dtok.data(), rows, dtable, stream);
        gpu::token_routed_mlp_add<float>(blas, dispatch, StridedMatrix<const float>(dm.data(), rows, d, d), mlp.weights,
                                          ws, StridedMatrix<float>(dh.data(), rows, d, d), stream);
    };
    auto load = [&](std::uint64_t seed, std::vector<std::int64_t>& tokens, std::vector<float>& m, std::vector<float>& h) {
        const auto ids = testing::random_ints(rows, 0, V - 1, seed);
        tokens.assign(ids.begin(), ids.end());
        m = testing::random_normal(rows * d, seed + 1);
        h = testing::random_normal(rows * d, seed + 2);
        CPX_CUDA_CHECK(cudaMemcpyAsync(dtok.data(), tokens.data(), rows * sizeof(std::int64_t), cudaMemcpyHostToDevice, stream));
        CPX_CUDA_CHECK(cudaMemcpyAsync(dm.data(), m.data(), rows * d * sizeof(float), cudaMemcpyHostToDevice, stream));
        CPX_CUDA_CHECK(cudaMemcpyAsync(dh.data(), h.data(), rows * d * sizeof(float), cudaMemcpyHostToDevice, stream));
        stream.synchronize();  // the host vectors stay alive, but pageable copies are waited for anyway
    };

    std::vector<std::int64_t> tokens;
    std::vector<float> m, h;
    load(100, tokens, m, h);
    step();  // eager run first: initialises lazily loaded kernels outside the capture
    stream.synchronize();
    const auto eager = dh.download();
    CHECK(testing::relative_error(eager, host.apply(m, h, host_experts(tokens, table), rows)) < 1e-5);

    gpu::Graph graph = gpu::Graph::capture(stream, step);
    for (std::uint64_t seed : {100u, 200u, 300u}) {
        load(seed, tokens, m, h);
        graph.launch(stream);
        stream.synchronize();
        const auto replayed = dh.download();
        CHECK(testing::relative_error(replayed, host.apply(m, h, host_experts(tokens, table), rows)) < 1e-5);
        if (seed == 100u) CHECK(testing::relative_error(replayed, eager) < 1e-6);  // same inputs as the eager run
    }
}

// The learned-router ablation: top-1 of softmax(m W_r^T) per token, the expert output scaled by
// its probability, plus the shared expert. The experts use the fused [E, d, 2 I_e] gate/up layout.
TEST_CASE("the learned-router MLP runs each token's argmax expert, gated by its probability, plus the shared expert") {
    const int E = 4, d = 64, ie = 32, is = 32, rows = 90;
    const HostMlp host = make_host_mlp<float>(d, ie, is, E, 110);
    const auto router = testing::random_normal(E * d, 111, 0.5f);
    const auto m = testing::random_normal(rows * d, 112), h = testing::random_normal(rows * d, 113);

    // Host: routing decision and expected output.
    std::vector<int> expert(rows);
    std::vector<double> prob(rows);
    for (int r = 0; r < rows; ++r) {
        std::vector<double> logit(E, 0.0);
        for (int e = 0; e < E; ++e)
            for (int k = 0; k < d; ++k) logit[e] += double(m[r * d + k]) * router[e * d + k];
        const int best = static_cast<int>(std::max_element(logit.begin(), logit.end()) - logit.begin());
        double sum = 0;
        for (double l : logit) sum += std::exp(l - logit[best]);
        expert[r] = best;
        prob[r] = 1.0 / sum;
    }
    HostMlp routed_only = host, shared_only = host;
    routed_only.is = 0;
    const auto with_routed = routed_only.apply(m, std::vector<float>(rows * d, 0.0f), expert, rows);
    shared_only.down.assign(shared_only.down.size(), 0.0f);  // zero routed experts: h + S(m)
    const auto with_shared = shared_only.apply(m, h, expert, rows);
    std::vector<double> want(rows * d);
    for (int r = 0; r < rows; ++r)
        for (int n = 0; n < d; ++n) want[r * d + n] = with_shared[r * d + n] + prob[r] * with_routed[r * d + n];

    // Device: fused [E, d, 2 ie] gate/up tensor.
    std::vector<float> gate_up(static_cast<std::size_t>(E) * d * 2 * ie);
    for (int e = 0; e < E; ++e)
        for (int k = 0; k < d; ++k)
            for (int j = 0; j < ie; ++j) {
                gate_up[(e * d + k) * 2 * ie + j] = host.gate[(e * d + k) * ie + j];
                gate_up[(e * d + k) * 2 * ie + ie + j] = host.up[(e * d + k) * ie + j];
            }
    DeviceMlp<float> mlp(host);
    gpu::DeviceBuffer<float> dgu(gate_up), drouter(router);
    gpu::LearnedRouterMlpWeights<float> w{drouter.data(), mlp.weights};
    w.experts.gate = {dgu.data(), E, d, ie, 2 * ie, static_cast<index_t>(d) * 2 * ie};
    w.experts.up = {dgu.data() + ie, E, d, ie, 2 * ie, static_cast<index_t>(d) * 2 * ie};
    gpu::Blas blas;
    gpu::ExpertDispatch dispatch(E, rows);
    gpu::LearnedRouterWorkspace<float> ws(rows, E, ie, is);
    auto dm = testing::upload_as<float>(m), dh = testing::upload_as<float>(h);
    gpu::learned_router_mlp_add<float>(blas, dispatch, StridedMatrix<const float>(dm.data(), rows, d, d), w, ws,
                                       StridedMatrix<float>(dh.data(), rows, d, d), nullptr);
    CPX_CUDA_CHECK(cudaDeviceSynchronize());
    CHECK(read_ints(ws.ids(), rows) == std::vector<std::int32_t>(expert.begin(), expert.end()));
    CHECK(testing::relative_error(dh.download(), want) < 1e-5);
}
