#pragma once
// A plain double-precision COMPLEXITY-DEEP forward pass written directly from
// docs/MODELS.md (§4-§8, §10), for the tests. It reads the weights by their
// checkpoint names in the checkpoint layout, so it shares nothing with the
// library's compute layout, and it uses no library code beyond the config.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <cpx/config/complexity_config.hpp>

#include "prism_reference.hpp"

namespace cpx::testing {

/// Named tensors (checkpoint names, row-major checkpoint layout) and the routing tables.
struct ReferenceWeights {
    std::map<std::string, std::vector<double>> tensors;
    /// Integer tables by checkpoint name: layers.{i}.mlp.topk_token_to_expert [top_k, V]
    /// and/or layers.{i}.mlp.token_to_expert [V].
    std::map<std::string, std::vector<int>> tables;
    /// The primary table of every layer without one in `tables` (the paper's shared table).
    std::vector<int> token_to_expert;
    const std::vector<double>& operator[](const std::string& name) const { return tensors.at(name); }
};

namespace ref {
inline std::vector<double> rmsnorm(const std::vector<double>& x, const std::vector<double>& w, double eps) {
    double ss = 0;
    for (double v : x) ss += v * v;
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
    std::vector<double> y(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) y[i] = w[i] * x[i] * inv;
    return y;
}
/// y = W x with W [out, in] (nn.Linear).
inline std::vector<double> linear(const std::vector<double>& w, const std::vector<double>& x, std::size_t out) {
    const std::size_t in = x.size();
    std::vector<double> y(out, 0.0);
    for (std::size_t o = 0; o < out; ++o)
        for (std::size_t i = 0; i < in; ++i) y[o] += w[o * in + i] * x[i];
    return y;
}
/// y = x W[e] with W [E, in, out] (input-major experts).
inline std::vector<double> expert_matmul(const std::vector<double>& w, int e, const std::vector<double>& x,
                                         std::size_t out) {
    const std::size_t in = x.size();
    std::vector<double> y(out, 0.0);
    for (std::size_t i = 0; i < in; ++i)
        for (std::size_t o = 0; o < out; ++o) y[o] += x[i] * w[(e * in + i) * out + o];
    return y;
}
inline double silu(double z) { return z / (1.0 + std::exp(-z)); }
inline std::vector<double> swiglu(const std::vector<double>& g, const std::vector<double>& u) {
    std::vector<double> y(g.size());
    for (std::size_t i = 0; i < g.size(); ++i) y[i] = silu(g[i]) * u[i];
    return y;
}
inline void add(std::vector<double>& a, const std::vector<double>& b, double s = 1.0) {
    for (std::size_t i = 0; i < a.size(); ++i) a[i] += s * b[i];
}
/// Rotate-half RoPE of one head at position p, with the spec's fp32 angle p * inv_freq.
inline void rope(double* x, int dim, long p, double theta) {
    for (int i = 0; i < dim / 2; ++i) {
        const float inv = static_cast<float>(1.0 / std::pow(theta, 2.0 * i / dim));
        const double a = static_cast<double>(static_cast<float>(p) * inv);
        const double x1 = x[i], x2 = x[i + dim / 2];
        x[i] = x1 * std::cos(a) - x2 * std::sin(a);
        x[i + dim / 2] = x2 * std::cos(a) + x1 * std::sin(a);
    }
}
}  // namespace ref

/// The MLP of layer `p` ("layers.{i}.") on one normalised row x with input token `token`.
template <ComplexityConfigType C>
std::vector<double> reference_mlp(const ReferenceWeights& w, const std::string& p, const std::vector<double>& x,
                                  std::int64_t token) {
    using namespace ref;
    const std::size_t d = C::hidden;
    std::vector<double> y(d, 0.0);
    if constexpr (C::mlp == MlpKind::dense_swiglu) {
        const std::size_t I = C::intermediate;
        y = linear(w[p + "mlp.down_proj.weight"],
                   swiglu(linear(w[p + "mlp.gate_proj.weight"], x, I), linear(w[p + "mlp.up_proj.weight"], x, I)), d);
    } else {
        const std::size_t I = C::expert_width;
        const auto expert = [&](int e) {
            std::vector<double> g, u;
            if (w.tensors.count(p + "mlp.gate_proj_w")) {
                g = expert_matmul(w[p + "mlp.gate_proj_w"], e, x, I);
                u = expert_matmul(w[p + "mlp.up_proj_w"], e, x, I);
                return expert_matmul(w[p + "mlp.down_proj_w"], e, swiglu(g, u), d);
            }
            const auto gu = expert_matmul(w[p + "mlp.gate_up_proj"], e, x, 2 * I);
            g.assign(gu.begin(), gu.begin() + I);
            u.assign(gu.begin() + I, gu.end());
            return expert_matmul(w[p + "mlp.down_proj"], e, swiglu(g, u), d);
        };
        std::vector<double> shared(d, 0.0);  // the shared expert (zero without one)
        if constexpr (C::has_shared_expert) {
            const std::size_t S = C::shared_width;
            shared = linear(w[p + "mlp.shared_down.weight"],
                            swiglu(linear(w[p + "mlp.shared_gate.weight"], x, S),
                                   linear(w[p + "mlp.shared_up.weight"], x, S)),
                            d);
        }
        if constexpr (C::mlp == MlpKind::token_routed) {
            // The later models' MLP (docs/MODELS.md §8.5), which with top_k = 1 and
            // unit scales is the paper's Expert_{e(t)}(x) + Shared(x).
            const int k = C::dims.top_k, E = C::experts;
            const auto V = static_cast<std::size_t>(C::vocab), t = static_cast<std::size_t>(token);
            std::vector<int> routes(static_cast<std::size_t>(k));
            if (w.tables.count(p + "mlp.topk_token_to_expert")) {
                for (int r = 0; r < k; ++r) routes[r] = w.tables.at(p + "mlp.topk_token_to_expert").at(r * V + t);
            } else {
                const int primary = w.tables.count(p + "mlp.token_to_expert")
                                        ? w.tables.at(p + "mlp.token_to_expert").at(t)
                                        : w.token_to_expert.at(t);
                for (int r = 0; r < k; ++r) routes[r] = (primary + r) % E;
            }
            const double given = C::dims.top_k_primary_weight;
            const double pw = k == 1 ? 1.0 : std::clamp(given < 0 ? 0.95 : given, 0.0, 1.0);
            std::vector<double> routed(d, 0.0);
            for (int r = 0; r < k; ++r) add(routed, expert(routes[r]), r == 0 ? pw : (1.0 - pw) / (k - 1));
            const bool gates = C::dims.use_shared_routed_gates;
            const double gs = gates ? w[p + "mlp.shared_output_gate"][0] : C::dims.shared_output_scale;
            const double gr = gates ? w[p + "mlp.routed_output_gate"][0] : C::dims.routed_output_scale;
            add(y, routed, gr);
            add(y, shared, gs);
        } else {
            const auto z = linear(w[p + "mlp.router.weight"], x, C::experts);
            const double mx = *std::max_element(z.begin(), z.end());
            double sum = 0;
            for (double v : z) sum += std::exp(v - mx);
            const int e = static_cast<int>(std::max_element(z.begin(), z.end()) - z.begin());
            add(y, expert(e), std::exp(z[e] - mx) / sum);
            add(y, shared);
        }
    }
    return y;
}

/// Attention of layer `p` for a whole sequence: rows a (normalised inputs) and
/// mu_prev (empty without mu guidance), positions 0..T-1. Returns o . W_o^T per row.
template <ComplexityConfigType C>
std::vector<std::vector<double>> reference_attention(const ReferenceWeights& w, const std::string& p,
                                                     const std::vector<std::vector<double>>& a,
                                                     const std::vector<std::vector<double>>& mu) {
    using namespace ref;
    const std::size_t T = a.size(), hd = C::head_dim;
    std::vector<std::vector<double>> q(T), k(T), v(T), out(T);
    for (std::size_t t = 0; t < T; ++t) {
        q[t] = linear(w[p + "self_attn.q_proj.weight"], a[t], C::q_width);
        k[t] = linear(w[p + "self_attn.k_proj.weight"], a[t], C::kv_width);
        v[t] = linear(w[p + "self_attn.v_proj.weight"], a[t], C::kv_width);
        if (!mu.empty()) {
            add(q[t], linear(w[p + "self_attn.mu_to_q.weight"], mu[t], C::q_width));
            add(k[t], linear(w[p + "self_attn.mu_to_k.weight"], mu[t], C::kv_width));
            add(v[t], linear(w[p + "self_attn.mu_to_v.weight"], mu[t], C::kv_width));
        }
        for (int h = 0; h < C::heads; ++h) {
            std::vector<double> head(q[t].begin() + h * hd, q[t].begin() + (h + 1) * hd);
            head = rmsnorm(head, w[p + "self_attn.q_norm.weight"], 1e-6);
            rope(head.data(), C::head_dim, static_cast<long>(t), C::rope.theta);
            std::copy(head.begin(), head.end(), q[t].begin() + h * hd);
        }
        for (int h = 0; h < C::kv_heads; ++h) {
            std::vector<double> head(k[t].begin() + h * hd, k[t].begin() + (h + 1) * hd);
            head = rmsnorm(head, w[p + "self_attn.k_norm.weight"], 1e-6);
            rope(head.data(), C::head_dim, static_cast<long>(t), C::rope.theta);
            std::copy(head.begin(), head.end(), k[t].begin() + h * hd);
        }
    }
    const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
    for (std::size_t t = 0; t < T; ++t) {
        std::vector<double> o(C::q_width, 0.0);
        for (int h = 0; h < C::heads; ++h) {
            const int kh = h / C::groups;
            std::vector<double> s(t + 1);
            double mx = -1e300;
            for (std::size_t j = 0; j <= t; ++j) {
                double dot = 0;
                for (std::size_t i = 0; i < hd; ++i) dot += q[t][h * hd + i] * k[j][kh * hd + i];
                mx = std::max(mx, s[j] = dot * scale);
            }
            double sum = 0;
            for (double& x : s) sum += (x = std::exp(x - mx));
            for (std::size_t j = 0; j <= t; ++j)
                for (std::size_t i = 0; i < hd; ++i) o[h * hd + i] += s[j] / sum * v[j][kh * hd + i];
        }
        out[t] = linear(w[p + "self_attn.o_proj.weight"], o, C::hidden);
    }
    return out;
}

/// PRISM attention of layer `p` (a decoder with AttentionKind::prism): the
/// double reference of prism_reference.hpp on the rows a, positions 0..T-1.
template <ComplexityConfigType C>
std::vector<std::vector<double>> reference_prism_attention(const ReferenceWeights& w, const std::string& p,
                                                           const std::vector<std::vector<double>>& a) {
    const int T = static_cast<int>(a.size()), d = C::hidden;
    const reference::PrismShape shape{d, C::heads, C::dims.prism_expansion_ratio,
                                      C::dims.rope_theta * C::dims.prism_freq_multiplier,
                                      C::dims.rope_theta / C::dims.prism_freq_multiplier, true};
    std::vector<double> x;
    for (const auto& row : a) x.insert(x.end(), row.begin(), row.end());
    const auto& u = w[p + "self_attn.u_proj.weight"];
    const auto y = reference::prism_attention(shape, x, T, std::vector<float>(u.begin(), u.end()),
                                              w[p + "self_attn.lambda_q"][0]);
    std::vector<std::vector<double>> out(T);
    for (int t = 0; t < T; ++t) out[t].assign(y.begin() + t * d, y.begin() + (t + 1) * d);
    return out;
}

/// Logits [T, V] of one sequence starting at position 0.
template <ComplexityConfigType C>
std::vector<double> reference_logits(const ReferenceWeights& w, const std::vector<std::int64_t>& tokens) {
    using namespace ref;
    const std::size_t T = tokens.size(), d = C::hidden;
    const auto& emb = w["embed_tokens.weight"];
    std::vector<std::vector<double>> h(T), mu;
    for (std::size_t t = 0; t < T; ++t) h[t].assign(emb.begin() + tokens[t] * d, emb.begin() + (tokens[t] + 1) * d);
    if constexpr (C::use_mu) mu.assign(T, w["mu_init"]);  // not clamped
    for (int l = 0; l < C::layers; ++l) {
        const std::string p = "layers." + std::to_string(l) + ".";
        std::vector<std::vector<double>> a(T);
        for (std::size_t t = 0; t < T; ++t) a[t] = rmsnorm(h[t], w[p + "input_layernorm.weight"], C::dims.norm_eps);
        std::vector<std::vector<double>> attn;
        if constexpr (C::attention == AttentionKind::prism) attn = reference_prism_attention<C>(w, p, a);
        else attn = reference_attention<C>(w, p, a, mu);
        for (std::size_t t = 0; t < T; ++t) {
            add(h[t], attn[t]);
            add(h[t], reference_mlp<C>(w, p, rmsnorm(h[t], w[p + "post_attention_layernorm.weight"], C::dims.norm_eps),
                                       tokens[t]));
            if constexpr (C::use_mu) {
                auto m = linear(w[p + "mu_guidance.mu_proj.weight"], h[t], d);
                for (std::size_t i = 0; i < d; ++i)
                    m[i] = std::clamp(std::clamp(w[p + "mu_guidance.mu"][i], 0.0, 2.0) + m[i], -2.0, 2.0);
                mu[t] = m;
            }
        }
    }
    std::vector<double> logits(T * C::vocab);
    for (std::size_t t = 0; t < T; ++t) {
        const auto hf = rmsnorm(h[t], w["norm.weight"], C::dims.norm_eps);
        const auto z = linear(emb, hf, C::vocab);
        std::copy(z.begin(), z.end(), logits.begin() + t * C::vocab);
    }
    return logits;
}

}  // namespace cpx::testing
