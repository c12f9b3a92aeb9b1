// cuda::linear (cuBLAS) against a double-precision product of the same
// (storage-rounded) inputs, in both weight layouts, with outputs poisoned.
#include <doctest/doctest.h>

#include <cpx/cuda/runtime/blas.cuh>

#include "cuda_test_support.cuh"
#include "test_support.hpp"

using namespace cpx;
using cuda::WeightLayout;

namespace {

// y[m][n] = alpha * sum_k x[m][k] * W(n, k) + beta * y0[m][n], W(n, k) read in the given layout.
std::vector<double> reference(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& y0,
                              int M, int K, int N, WeightLayout layout, double alpha, double beta) {
    std::vector<double> y(static_cast<std::size_t>(M) * N);
    for (int m = 0; m < M; ++m)
        for (int n = 0; n < N; ++n) {
            double s = 0;
            for (int k = 0; k < K; ++k)
                s += double(x[m * K + k]) * (layout == WeightLayout::out_in ? w[n * K + k] : w[k * N + n]);
            y[m * N + n] = alpha * s + (beta != 0.0 ? beta * y0[m * N + n] : 0.0);
        }
    return y;
}

template <class T, class Out>
double run_linear(cuda::Blas& blas, int M, int K, int N, WeightLayout layout, float alpha, float beta,
                  std::uint64_t seed) {
    const auto x = testing::rounded<T>(testing::random_normal(M * K, seed));
    const auto w = testing::rounded<T>(testing::random_normal(K * N, seed + 1, 0.2f));
    const auto y0 = testing::rounded<Out>(testing::random_normal(M * N, seed + 2));
    auto dx = testing::upload_as<T>(x), dw = testing::upload_as<T>(w);
    cuda::DeviceBuffer<Out> dy = beta != 0.0f ? testing::upload_as<Out>(y0) : testing::poisoned_device<Out>(M * N);
    const index_t wr = layout == WeightLayout::out_in ? N : K, wc = layout == WeightLayout::out_in ? K : N;
    cuda::linear(blas, Matrix<const T>(dx.data(), M, K), Matrix<const T>(dw.data(), wr, wc), layout,
                 Matrix<Out>(dy.data(), M, N), alpha, beta);
    CPX_CUDA_CHECK(cudaDeviceSynchronize());
    return testing::relative_error(testing::download_floats(dy), reference(x, w, y0, M, K, N, layout, alpha, beta));
}

}  // namespace

TEST_CASE("fp32 linear is exact fp32 arithmetic in both weight layouts (within 1e-5)") {
    cuda::Blas blas;
    for (auto layout : {WeightLayout::out_in, WeightLayout::in_out}) {
        CHECK(run_linear<float, float>(blas, 37, 96, 70, layout, 1.0f, 0.0f, 1) < 1e-5);
        CHECK(run_linear<float, float>(blas, 1, 768, 256, layout, 1.0f, 0.0f, 2) < 1e-5);
    }
}

TEST_CASE("alpha scales the product and beta = 1 adds it to the existing output (residual in place)") {
    cuda::Blas blas;
    CHECK(run_linear<float, float>(blas, 19, 64, 48, WeightLayout::out_in, 1.0f, 1.0f, 3) < 1e-5);
    CHECK(run_linear<float, float>(blas, 19, 64, 48, WeightLayout::in_out, 0.25f, 1.0f, 4) < 1e-5);
}

TEST_CASE("tf32 linear stays within the tf32 tolerance 5e-4") {
    cuda::Blas blas(cuda::Fp32Math::tf32);
    CHECK(run_linear<float, float>(blas, 64, 256, 96, WeightLayout::out_in, 1.0f, 0.0f, 5) < 5e-4);
}

TEST_CASE("bf16 and fp16 linear accumulate in fp32 (within 2e-2), with 16-bit or fp32 outputs") {
    cuda::Blas blas;
    for (auto layout : {WeightLayout::out_in, WeightLayout::in_out}) {
        CHECK(run_linear<bf16, bf16>(blas, 33, 128, 80, layout, 1.0f, 0.0f, 6) < 2e-2);
        CHECK(run_linear<fp16, fp16>(blas, 33, 128, 80, layout, 1.0f, 0.0f, 7) < 2e-2);
        // fp32 output of a 16-bit product (the fp32 logits of the tied head): products of bf16
        // values are exact in fp32, so only accumulation order remains; 1e-4 leaves room for the
        // tensor cores' adder without approaching the 16-bit tolerance.
        CHECK(run_linear<bf16, float>(blas, 33, 128, 80, layout, 1.0f, 0.0f, 8) < 1e-4);
        CHECK(run_linear<bf16, bf16>(blas, 33, 128, 80, layout, 1.0f, 1.0f, 9) < 2e-2);
    }
}

TEST_CASE("linear writes a block of columns of a wider output and reads a block of a wider input") {
    cuda::Blas blas;
    const int M = 9, K = 32, N = 24, wide = 80, col0 = 40;
    const auto xw = testing::random_normal(M * wide, 10);
    const auto w = testing::random_normal(N * K, 11, 0.3f);
    auto dx = testing::upload_as<float>(xw), dw = testing::upload_as<float>(w);
    auto dy = testing::poisoned_device<float>(M * wide);
    cuda::linear(blas, StridedMatrix<const float>(dx.data() + 8, M, K, wide),
                 StridedMatrix<const float>(dw.data(), N, K, K), WeightLayout::out_in,
                 StridedMatrix<float>(dy.data() + col0, M, N, wide));
    CPX_CUDA_CHECK(cudaDeviceSynchronize());
    const auto got = dy.download();
    std::vector<float> block, x(M * K);
    for (int m = 0; m < M; ++m)
        for (int k = 0; k < K; ++k) x[m * K + k] = xw[m * wide + 8 + k];
    for (int m = 0; m < M; ++m)
        for (int n = 0; n < N; ++n) block.push_back(got[m * wide + col0 + n]);
    CHECK(testing::relative_error(block, reference(x, w, {}, M, K, N, WeightLayout::out_in, 1.0, 0.0)) < 1e-5);
    // Columns outside the block were not touched: still NaN.
    for (int m = 0; m < M; ++m) {
        CHECK(std::isnan(got[m * wide + col0 - 1]));
        CHECK(std::isnan(got[m * wide + col0 + N]));
    }
}

TEST_CASE("linear rejects mismatched shapes with a ShapeError") {
    cuda::Blas blas;
    cuda::DeviceBuffer<float> a(64), b(64), c(64);
    CHECK_THROWS_AS(cuda::linear(blas, Matrix<const float>(a.data(), 4, 8), Matrix<const float>(b.data(), 8, 7),
                                 WeightLayout::out_in, Matrix<float>(c.data(), 4, 8)),
                    ShapeError);
    CHECK_THROWS_AS(cuda::linear(blas, Matrix<const float>(a.data(), 4, 8), Matrix<const float>(b.data(), 8, 8),
                                 WeightLayout::in_out, Matrix<float>(c.data(), 4, 7)),
                    ShapeError);
}
