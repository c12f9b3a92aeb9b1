// Naive double-precision PRISM, written from docs/MODELS.md §15-§19 alone (loops, no
// library code), the yardstick of the PRISM layer, model and composition tests.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include <cpx/config/rope.hpp>

namespace cpx::reference {

struct PrismShape {
    int d, heads, expansion;
    double signal_base, noise_base;
    bool interleaved;
    int D() const { return d / heads * expansion; }
    int width() const { return 2 * heads * D(); }
};

/// The spec's numbers for a shape type with `dims` (PrismAttentionDims).
template <class S>
PrismShape prism_shape() {
    return {S::dims.hidden, S::dims.heads, S::dims.expansion_ratio, S::dims.rope_theta * S::dims.freq_multiplier,
            S::dims.rope_theta / S::dims.freq_multiplier, S::dims.rope_convention == RopeConvention::interleaved_pairs};
}

/// RoPE of one head vector at a position.
inline std::vector<double> rope(const std::vector<double>& x, double base, long pos, bool interleaved) {
    const int D = static_cast<int>(x.size());
    std::vector<double> y = x;
    for (int i = 0; i < D / 2; ++i) {
        const double angle = pos * std::pow(base, -2.0 * i / D);
        const int a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + D / 2;
        y[a] = x[a] * std::cos(angle) - x[b] * std::sin(angle);
        y[b] = x[a] * std::sin(angle) + x[b] * std::cos(angle);
    }
    return y;
}

/// The PRISM attention layer over one sequence at positions 0..T-1: x [T, d],
/// u [2HD, d]. mean_distance, when given, receives per physical head the mean
/// over queries of sum_j p_ij (i - j).
inline std::vector<double> prism_attention(const PrismShape& s, const std::vector<double>& x, int T,
                                           const std::vector<float>& u, double lambda,
                                           std::vector<double>* mean_distance = nullptr) {
    const int d = s.d, H = s.heads, D = s.D(), W = s.width();
    std::vector<double> h(std::size_t(T) * W);
    for (int t = 0; t < T; ++t)
        for (int j = 0; j < W; ++j) {
            double acc = 0;
            for (int i = 0; i < d; ++i) acc += x[t * d + i] * u[j * d + i];
            h[t * W + j] = acc;
        }
    std::vector<double> y(std::size_t(T) * W, 0.0);
    if (mean_distance) mean_distance->assign(2 * H, 0.0);
    for (int p = 0; p < 2 * H; ++p) {
        const bool signal = p < H;
        std::vector<std::vector<double>> q(T);
        for (int t = 0; t < T; ++t) {
            std::vector<double> v(h.begin() + t * W + p * D, h.begin() + t * W + (p + 1) * D);
            q[t] = rope(v, signal ? s.signal_base : s.noise_base, t, s.interleaved);
        }
        for (int t = 0; t < T; ++t) {
            std::vector<double> sc(t + 1);
            double mx = -1e300;
            for (int j = 0; j <= t; ++j) {
                double dot = 0;
                for (int i = 0; i < D; ++i) dot += q[t][i] * q[j][i];
                sc[j] = dot / std::sqrt(double(D));
                mx = std::max(mx, sc[j]);
            }
            double z = 0;
            for (auto& v : sc) z += (v = std::exp(v - mx));
            const double weight = signal ? 1.0 : -lambda;
            for (int j = 0; j <= t; ++j) {
                const double pr = sc[j] / z;
                if (mean_distance) (*mean_distance)[p] += pr * (t - j) / T;
                for (int i = 0; i < D; ++i) y[t * W + p * D + i] += weight * pr * h[j * W + p * D + i];
            }
        }
    }
    std::vector<double> out(std::size_t(T) * d, 0.0);
    const double scale = 1.0 / std::sqrt(2.0 * H * s.expansion);
    for (int t = 0; t < T; ++t)
        for (int i = 0; i < d; ++i) {
            double acc = 0;
            for (int j = 0; j < W; ++j) acc += y[t * W + j] * u[j * d + i];
            out[t * d + i] = acc * scale;
        }
    return out;
}

inline std::vector<double> widen(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

/// LayerNorm of the rows of x [rows, n]; an empty bias means none.
template <class W>
std::vector<double> layernorm(const std::vector<double>& x, int n, const W& w, const W& b, double eps) {
    const int rows = static_cast<int>(x.size()) / n;
    std::vector<double> y(x.size());
    for (int r = 0; r < rows; ++r) {
        double mean = 0, var = 0;
        for (int i = 0; i < n; ++i) mean += x[r * n + i];
        mean /= n;
        for (int i = 0; i < n; ++i) var += (x[r * n + i] - mean) * (x[r * n + i] - mean);
        var /= n;
        for (int i = 0; i < n; ++i)
            y[r * n + i] = (x[r * n + i] - mean) / std::sqrt(var + eps) * w[i] + (b.empty() ? 0.0 : double(b[i]));
    }
    return y;
}

/// y = x W^T + b for W [out, in] (nn.Linear layout); an empty bias means none.
template <class W, class B>
std::vector<double> linear(const std::vector<double>& x, int in, const W& w, const B& b, int out) {
    const int rows = static_cast<int>(x.size()) / in;
    std::vector<double> y(std::size_t(rows) * out);
    for (int r = 0; r < rows; ++r)
        for (int o = 0; o < out; ++o) {
            double acc = b.empty() ? 0.0 : double(b[o]);
            for (int i = 0; i < in; ++i) acc += x[r * in + i] * w[std::size_t(o) * in + i];
            y[r * out + o] = acc;
        }
    return y;
}

inline double gelu(double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }  // 1 + erf(x/sqrt 2) without its cancellation

/// The whole GPT-2-style PRISM model on one sequence at positions 0..T-1:
/// logits [T, vocab]. `Weights` is cpx::PrismWeights<C> (read as plain data).
template <class Shape, class Weights>
std::vector<double> prism_model(const Weights& w, const std::vector<std::int64_t>& tokens, int d, int vocab,
                                double eps) {
    const int T = static_cast<int>(tokens.size()), width = 4 * d;
    std::vector<double> x(std::size_t(T) * d);
    for (int t = 0; t < T; ++t)
        for (int i = 0; i < d; ++i) x[t * d + i] = double(w.wte[std::size_t(tokens[t]) * d + i]) + w.wpe[t * d + i];
    const PrismShape s = prism_shape<Shape>();
    for (const auto& l : w.layers) {
        const auto a = prism_attention(s, layernorm(x, d, l.ln_1_weight, l.ln_1_bias, eps), T,
                                       std::vector<float>(l.u.begin(), l.u.end()), l.lambda);
        for (std::size_t i = 0; i < x.size(); ++i) x[i] += a[i];
        auto h = linear(layernorm(x, d, l.ln_2_weight, l.ln_2_bias, eps), d, l.c_fc_weight, l.c_fc_bias, width);
        for (auto& v : h) v = gelu(v);
        const auto m = linear(h, width, l.c_proj_weight, l.c_proj_bias, d);
        for (std::size_t i = 0; i < x.size(); ++i) x[i] += m[i];
    }
    x = layernorm(x, d, w.ln_f_weight, w.ln_f_bias, eps);
    const decltype(w.wte) no_bias;
    return linear(x, d, w.wte, no_bias, vocab);
}

}  // namespace cpx::reference
