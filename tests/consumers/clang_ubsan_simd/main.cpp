// Every function of cpx with a `#pragma omp simd` loop, instantiated for each storage type and
// run on a small case against a plain double-precision loop: built by clang with UBSan at -O1
// and -Werror (CMakeLists.txt), where none of those loops can be vectorised.
#include <cpx/cpu/kernels/linear.hpp>
#include <cpx/cpu/kernels/row_norms.hpp>
#include <cpx/cpu/layers/layernorm.hpp>
#include <cpx/cpu/layers/rmsnorm.hpp>

#include <cmath>
#include <cstdio>
#include <type_traits>
#include <vector>

namespace {
using cpx::index_t;
namespace cpu = cpx::cpu;

int failures = 0;
void expect_near(const char* what, double got, double want, double tol = 1e-5) {
    if (std::abs(got - want) > tol * (1.0 + std::abs(want))) {
        std::printf("consumer: %s: %g, expected %g\n", what, got, want);
        ++failures;
    }
}

// Values exact in every storage type (small multiples of 1/8), 7 wide: not a lane multiple.
float value(index_t i) { return static_cast<float>(static_cast<int>(i % 13) - 6) / 8.0f; }

template <class W>
void products() {
    constexpr index_t rows = 3, in = 7, out = 6;  // 6 outputs: one block of four and two single
    std::vector<float> x(rows * in), y(rows * out), acc(rows * out);
    std::vector<W> w_nt(out * in), w_nn(in * out);
    for (index_t i = 0; i < rows * in; ++i) x[i] = value(i + 3);
    for (index_t i = 0; i < out * in; ++i) w_nt[i] = cpx::from_float<W>(value(i));
    for (index_t i = 0; i < in * out; ++i) w_nn[i] = cpx::from_float<W>(value(2 * i + 1));
    const auto xs = cpu::rows_of<const float>(x.data(), rows, in);
    const auto ys = cpu::rows_of(y.data(), rows, out);
    cpu::detail::gemv_rows_nt(xs, cpu::rows_of<const W>(w_nt.data(), out, in), ys, 0, out, cpu::Write::overwrite);
    for (index_t m = 0; m < rows; ++m)
        for (index_t o = 0; o < out; ++o) {
            double want = 0;
            for (index_t i = 0; i < in; ++i) want += double(x[m * in + i]) * value(o * in + i);
            expect_near("gemv_rows_nt", y[m * out + o], want);
        }
    cpu::detail::gemv_rows_nn(xs, cpu::rows_of<const W>(w_nn.data(), in, out), ys, 0, out, cpu::Write::overwrite,
                              acc.data());
    for (index_t m = 0; m < rows; ++m)
        for (index_t o = 0; o < out; ++o) {
            double want = 0;
            for (index_t i = 0; i < in; ++i) want += double(x[m * in + i]) * value(2 * (i * out + o) + 1);
            expect_near("gemv_rows_nn", y[m * out + o], want);
        }
}

double rms_scale(const float* x, index_t n, double eps) {
    double s = 0;
    for (index_t i = 0; i < n; ++i) s += double(x[i]) * x[i];
    return 1.0 / std::sqrt(s / n + eps);
}

template <class T>
void norms() {
    constexpr index_t rows = 2, n = 7;
    std::vector<T> x(rows * n), w(n), b(n), y(rows * n);
    std::vector<float> xf(rows * n);
    for (index_t i = 0; i < rows * n; ++i) xf[i] = value(i) + 0.25f, x[i] = cpx::from_float<T>(xf[i]);
    for (index_t i = 0; i < n; ++i) w[i] = cpx::from_float<T>(1.0f + value(i)), b[i] = cpx::from_float<T>(value(i + 5));
    const cpx::Matrix<const T> xv(x.data(), rows, n);
    const cpx::Vector<const T> wv(w.data(), n), bv(b.data(), n);
    const cpx::Matrix<T> yv(y.data(), rows, n);
    // T's rounding of the result is the only difference from the double loops.
    const double tol = std::is_same_v<T, float> ? 1e-5 : 1e-2;
    auto check = [&](const char* what, index_t i, double want) { expect_near(what, cpx::to_float(y[i]), want, tol); };
    cpu::rmsnorm<T, T, T>(xv, wv, yv, 1e-6f);
    for (index_t r = 0; r < rows; ++r) {
        const double s = rms_scale(xf.data() + r * n, n, 1e-6);
        for (index_t i = 0; i < n; ++i) check("rmsnorm", r * n + i, (1.0 + value(i)) * xf[r * n + i] * s);
    }
    cpu::layernorm<T, T, T>(xv, wv, bv, yv, 1e-5f);
    for (index_t r = 0; r < rows; ++r) {
        double mean = 0, var = 0;
        for (index_t i = 0; i < n; ++i) mean += xf[r * n + i];
        mean /= n;
        for (index_t i = 0; i < n; ++i) var += (xf[r * n + i] - mean) * (xf[r * n + i] - mean);
        const double inv = 1.0 / std::sqrt(var / n + 1e-5);
        for (index_t i = 0; i < n; ++i)
            check("layernorm", r * n + i, (xf[r * n + i] - mean) * inv * (1.0 + value(i)) + value(i + 5));
    }
}

void fp32_row_norms() {
    constexpr int heads = 2, head_dim = 7;
    constexpr index_t rows = 2, n = heads * head_dim;
    std::vector<float> x(rows * n), y(rows * n), w(n);
    for (index_t i = 0; i < rows * n; ++i) x[i] = value(i) + 0.25f;
    for (index_t i = 0; i < n; ++i) w[i] = 1.0f + value(i);
    cpu::rmsnorm_rows(cpu::rows_of<const float>(x.data(), rows, n), w.data(), cpu::rows_of(y.data(), rows, n), 1e-6f);
    for (index_t r = 0; r < rows; ++r)
        for (index_t i = 0; i < n; ++i)
            expect_near("rmsnorm_rows", y[r * n + i], w[i] * x[r * n + i] * rms_scale(x.data() + r * n, n, 1e-6));
    cpu::rmsnorm_rows(cpu::rows_of<n>(static_cast<const float*>(x.data()), rows), w.data(),
                      cpu::rows_of<n>(y.data(), rows), 1e-6f);
    expect_near("rmsnorm_rows (constant width)", y[n + 3], w[3] * x[n + 3] * rms_scale(x.data() + n, n, 1e-6));
    const std::vector<float> before = x;
    cpu::rmsnorm_heads(cpu::packed_heads(x.data(), rows, heads, head_dim), w.data(), 1e-6f);
    for (index_t r = 0; r < rows; ++r)
        for (int h = 0; h < heads; ++h) {
            const float* head = before.data() + r * n + h * head_dim;
            for (index_t i = 0; i < head_dim; ++i)
                expect_near("rmsnorm_heads", x[r * n + h * head_dim + i], w[i] * head[i] * rms_scale(head, head_dim, 1e-6));
        }
}
}  // namespace

int main() {
    products<float>();
    products<cpx::bf16>();
    products<cpx::fp16>();
    norms<float>();
    norms<cpx::bf16>();
    fp32_row_norms();
    std::printf("consumer: clang + UBSan build of the omp simd loops %s\n", failures == 0 ? "runs (ok)" : "FAILED");
    return failures == 0 ? 0 : 1;
}
