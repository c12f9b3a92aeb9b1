// The host side of test_complexity_model.cu: random named weights and a plain
// double-precision forward pass of COMPLEXITY-DEEP, written from the spec.
#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include "complexity_cpu_reference.hpp"

namespace cpx::testing {

namespace {

using Vec = std::vector<double>;

// y[r][o] = sum_i x[r][i] * W[o][i] (nn.Linear, W [out, in]).
Vec linear(const Vec& x, int rows, int in, const std::vector<float>& w, int out) {
    Vec y(static_cast<std::size_t>(rows) * out, 0.0);
    for (int r = 0; r < rows; ++r)
        for (int o = 0; o < out; ++o) {
            double s = 0;
            for (int i = 0; i < in; ++i) s += x[r * in + i] * w[static_cast<std::size_t>(o) * in + i];
            y[r * out + o] = s;
        }
    return y;
}

// y = x . W[e] with W [E, in, out] input-major, for one row.
Vec expert_row(const double* x, int in, const std::vector<float>& w, int e, int out) {
    Vec y(out, 0.0);
    for (int i = 0; i < in; ++i)
        for (int o = 0; o < out; ++o) y[o] += x[i] * w[(static_cast<std::size_t>(e) * in + i) * out + o];
    return y;
}

Vec rmsnorm(const Vec& x, int rows, int n, const std::vector<float>& w, double eps) {
    Vec y(x.size());
    for (int r = 0; r < rows; ++r) {
        double ss = 0;
        for (int i = 0; i < n; ++i) ss += x[r * n + i] * x[r * n + i];
        const double inv = 1.0 / std::sqrt(ss / n + eps);
        for (int i = 0; i < n; ++i) y[r * n + i] = w[i] * x[r * n + i] * inv;
    }
    return y;
}

double silu(double z) { return z / (1.0 + std::exp(-z)); }

// QK-norm then rotate-half RoPE of one head in place, at position pos.
void norm_rope(double* x, int hd, const std::vector<float>& w, int pos, double theta) {
    double ss = 0;
    for (int j = 0; j < hd; ++j) ss += x[j] * x[j];
    const double inv = 1.0 / std::sqrt(ss / hd + 1e-6);
    for (int j = 0; j < hd; ++j) x[j] = w[j] * x[j] * inv;
    for (int i = 0; i < hd / 2; ++i) {
        const double angle = pos * std::pow(theta, -2.0 * i / hd);
        const double a = x[i], b = x[i + hd / 2];
        x[i] = a * std::cos(angle) - b * std::sin(angle);
        x[i + hd / 2] = b * std::cos(angle) + a * std::sin(angle);
    }
}

template <class C>
Vec sequence_logits(const NamedTensors& W, const std::vector<std::int32_t>& table, const std::int32_t* tok, int T) {
    constexpr int d = C::hidden, hd = C::head_dim, H = C::heads, KV = C::kv_heads, G = C::groups;
    const auto& emb = W.at("embed_tokens.weight");
    Vec h(static_cast<std::size_t>(T) * d), mu(static_cast<std::size_t>(T) * d, 0.0);
    for (int t = 0; t < T; ++t)
        for (int i = 0; i < d; ++i) {
            h[t * d + i] = emb[static_cast<std::size_t>(tok[t]) * d + i];
            if (C::use_mu) mu[t * d + i] = W.at("mu_init")[i];
        }
    for (int l = 0; l < C::layers; ++l) {
        const std::string p = "layers." + std::to_string(l) + ".";
        const auto& at = [&](const std::string& n) -> const std::vector<float>& { return W.at(p + n); };
        const Vec a = rmsnorm(h, T, d, at("input_layernorm.weight"), C::dims.norm_eps);
        Vec q = linear(a, T, d, at("self_attn.q_proj.weight"), C::q_width);
        Vec k = linear(a, T, d, at("self_attn.k_proj.weight"), C::kv_width);
        Vec v = linear(a, T, d, at("self_attn.v_proj.weight"), C::kv_width);
        if (C::use_mu) {
            const Vec mq = linear(mu, T, d, at("self_attn.mu_to_q.weight"), C::q_width);
            const Vec mk = linear(mu, T, d, at("self_attn.mu_to_k.weight"), C::kv_width);
            const Vec mv = linear(mu, T, d, at("self_attn.mu_to_v.weight"), C::kv_width);
            for (std::size_t i = 0; i < q.size(); ++i) q[i] += mq[i];
            for (std::size_t i = 0; i < k.size(); ++i) {
                k[i] += mk[i];
                v[i] += mv[i];
            }
        }
        for (int t = 0; t < T; ++t) {
            for (int j = 0; j < H; ++j) norm_rope(&q[t * C::q_width + j * hd], hd, at("self_attn.q_norm.weight"), t, C::dims.rope_theta);
            for (int j = 0; j < KV; ++j) norm_rope(&k[t * C::kv_width + j * hd], hd, at("self_attn.k_norm.weight"), t, C::dims.rope_theta);
        }
        Vec o(static_cast<std::size_t>(T) * C::q_width, 0.0);
        for (int t = 0; t < T; ++t)
            for (int j = 0; j < H; ++j) {
                const int g = j / G;
                Vec s(t + 1);
                double mx = -1e300;
                for (int u = 0; u <= t; ++u) {
                    double dot = 0;
                    for (int c = 0; c < hd; ++c) dot += q[t * C::q_width + j * hd + c] * k[u * C::kv_width + g * hd + c];
                    s[u] = dot / std::sqrt(double(hd));
                    mx = std::max(mx, s[u]);
                }
                double sum = 0;
                for (double& e : s) sum += (e = std::exp(e - mx));
                for (int u = 0; u <= t; ++u)
                    for (int c = 0; c < hd; ++c) o[t * C::q_width + j * hd + c] += s[u] / sum * v[u * C::kv_width + g * hd + c];
            }
        const Vec attn = linear(o, T, C::q_width, at("self_attn.o_proj.weight"), d);
        for (std::size_t i = 0; i < h.size(); ++i) h[i] += attn[i];

        const Vec m = rmsnorm(h, T, d, at("post_attention_layernorm.weight"), C::dims.norm_eps);
        Vec mlp(h.size(), 0.0);
        if constexpr (C::routed) {
            constexpr int ie = C::expert_width;
            for (int t = 0; t < T; ++t) {
                const int e = table[static_cast<std::size_t>(tok[t])];
                const Vec g = expert_row(&m[t * d], d, at("mlp.gate_proj_w"), e, ie);
                const Vec u = expert_row(&m[t * d], d, at("mlp.up_proj_w"), e, ie);
                Vec act(ie);
                for (int j = 0; j < ie; ++j) act[j] = silu(g[j]) * u[j];
                const Vec r = expert_row(act.data(), ie, at("mlp.down_proj_w"), e, d);
                for (int i = 0; i < d; ++i) mlp[t * d + i] += r[i];
            }
            if constexpr (C::has_shared_expert) {
                const Vec g = linear(m, T, d, at("mlp.shared_gate.weight"), C::shared_width);
                const Vec u = linear(m, T, d, at("mlp.shared_up.weight"), C::shared_width);
                Vec act(g.size());
                for (std::size_t i = 0; i < g.size(); ++i) act[i] = silu(g[i]) * u[i];
                const Vec s = linear(act, T, C::shared_width, at("mlp.shared_down.weight"), d);
                for (std::size_t i = 0; i < mlp.size(); ++i) mlp[i] += s[i];
            }
        } else {
            const Vec g = linear(m, T, d, at("mlp.gate_proj.weight"), C::intermediate);
            const Vec u = linear(m, T, d, at("mlp.up_proj.weight"), C::intermediate);
            Vec act(g.size());
            for (std::size_t i = 0; i < g.size(); ++i) act[i] = silu(g[i]) * u[i];
            mlp = linear(act, T, C::intermediate, at("mlp.down_proj.weight"), d);
        }
        for (std::size_t i = 0; i < h.size(); ++i) h[i] += mlp[i];
        if (C::use_mu) {
            const Vec proj = linear(h, T, d, at("mu_guidance.mu_proj.weight"), d);
            const auto& param = at("mu_guidance.mu");
            for (int t = 0; t < T; ++t)
                for (int i = 0; i < d; ++i)
                    mu[t * d + i] = std::clamp(std::clamp<double>(param[i], 0.0, 2.0) + proj[t * d + i], -2.0, 2.0);
        }
    }
    const Vec hf = rmsnorm(h, T, d, W.at("norm.weight"), C::dims.norm_eps);
    return linear(hf, T, d, emb, C::vocab);
}

}  // namespace

template <class C>
NamedTensors complexity_weights(std::uint64_t seed) {
    constexpr int d = C::hidden, hd = C::head_dim;
    std::mt19937_64 gen(seed);
    NamedTensors w;
    const auto normal = [&](const std::string& name, std::size_t n, double mean, double sd) {
        std::normal_distribution<float> dist(static_cast<float>(mean), static_cast<float>(sd));
        std::vector<float> v(n);
        for (auto& x : v) x = dist(gen);
        w.emplace(name, std::move(v));
    };
    const double in_sd = 1.0 / std::sqrt(double(d));
    normal("embed_tokens.weight", std::size_t{C::vocab} * d, 0.0, 1.0);
    normal("norm.weight", d, 1.0, 0.2);
    if (C::use_mu) normal("mu_init", d, 0.0, 0.7);
    for (int l = 0; l < C::layers; ++l) {
        const std::string p = "layers." + std::to_string(l) + ".";
        normal(p + "input_layernorm.weight", d, 1.0, 0.2);
        normal(p + "post_attention_layernorm.weight", d, 1.0, 0.2);
        normal(p + "self_attn.q_proj.weight", std::size_t{C::q_width} * d, 0.0, in_sd);
        normal(p + "self_attn.k_proj.weight", std::size_t{C::kv_width} * d, 0.0, in_sd);
        normal(p + "self_attn.v_proj.weight", std::size_t{C::kv_width} * d, 0.0, in_sd);
        normal(p + "self_attn.o_proj.weight", std::size_t{d} * C::q_width, 0.0, 1.0 / std::sqrt(double(C::q_width)));
        normal(p + "self_attn.mu_to_q.weight", std::size_t{C::q_width} * d, 0.0, in_sd);
        normal(p + "self_attn.mu_to_k.weight", std::size_t{C::kv_width} * d, 0.0, in_sd);
        normal(p + "self_attn.mu_to_v.weight", std::size_t{C::kv_width} * d, 0.0, in_sd);
        normal(p + "self_attn.q_norm.weight", hd, 1.0, 0.2);
        normal(p + "self_attn.k_norm.weight", hd, 1.0, 0.2);
        if (C::use_mu) {
            normal(p + "mu_guidance.mu", d, 1.0, 1.0);  // beyond [0, 2] often: the parameter clamp matters
            normal(p + "mu_guidance.mu_proj.weight", std::size_t{d} * d, 0.0, 0.5 * in_sd);  // mu beyond +-2 at times
        }
        if constexpr (C::routed) {
            constexpr int E = C::experts, ie = C::expert_width, is = C::shared_width;
            normal(p + "mlp.gate_proj_w", std::size_t{E} * d * ie, 0.0, in_sd);
            normal(p + "mlp.up_proj_w", std::size_t{E} * d * ie, 0.0, in_sd);
            normal(p + "mlp.down_proj_w", std::size_t{E} * ie * d, 0.0, 1.0 / std::sqrt(double(ie)));
            if (C::has_shared_expert) {
                normal(p + "mlp.shared_gate.weight", std::size_t{is} * d, 0.0, in_sd);
                normal(p + "mlp.shared_up.weight", std::size_t{is} * d, 0.0, in_sd);
                normal(p + "mlp.shared_down.weight", std::size_t{d} * is, 0.0, 1.0 / std::sqrt(double(is)));
            }
        } else {
            constexpr int I = C::intermediate;
            normal(p + "mlp.gate_proj.weight", std::size_t{I} * d, 0.0, in_sd);
            normal(p + "mlp.up_proj.weight", std::size_t{I} * d, 0.0, in_sd);
            normal(p + "mlp.down_proj.weight", std::size_t{d} * I, 0.0, 1.0 / std::sqrt(double(I)));
        }
    }
    return w;
}

template <class C>
std::vector<std::int32_t> complexity_routing(std::uint64_t seed) {
    std::vector<std::int32_t> table(C::vocab);
    std::mt19937_64 gen(seed);
    std::uniform_int_distribution<int> dist(0, C::experts - 1);
    for (int t = 0; t < C::vocab; ++t) table[t] = t < C::experts ? t : dist(gen);  // every expert appears
    return table;
}

template <class C>
std::vector<double> complexity_reference_logits(const NamedTensors& weights, const std::vector<std::int32_t>& table,
                                                const std::vector<std::int32_t>& tokens, int batch) {
    const int T = static_cast<int>(tokens.size()) / batch;
    std::vector<double> out;
    for (int b = 0; b < batch; ++b) {
        const auto l = sequence_logits<C>(weights, table, tokens.data() + static_cast<std::size_t>(b) * T, T);
        out.insert(out.end(), l.begin(), l.end());
    }
    return out;
}

#define CPX_COMPLEXITY_REFERENCE(C)                                                                                      \
    template NamedTensors complexity_weights<C>(std::uint64_t);                                                          \
    template std::vector<std::int32_t> complexity_routing<C>(std::uint64_t);                                             \
    template std::vector<double> complexity_reference_logits<C>(const NamedTensors&, const std::vector<std::int32_t>&,   \
                                                                const std::vector<std::int32_t>&, int);
CPX_COMPLEXITY_REFERENCE(ComplexityTiny)
CPX_COMPLEXITY_REFERENCE(ComplexityDenseTiny)
CPX_COMPLEXITY_REFERENCE(ComplexityWide)

}  // namespace cpx::testing
