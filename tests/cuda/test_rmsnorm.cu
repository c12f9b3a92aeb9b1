// The CUDA RMSNorm against the CPU path, with outputs poisoned before launch.
#include <doctest/doctest.h>

#include <cpx/cpu/layers/rmsnorm.hpp>
#include <cpx/cuda/runtime/device_buffer.cuh>
#include <cpx/cuda/kernels/rmsnorm.cuh>

#include "test_support.hpp"

using namespace cpx;

TEST_CASE("cuda rmsnorm equals the CPU path (fp32 within 1e-5, bf16 within 2e-2)") {
    for (int n : {64, 768, 1000}) {
        const int rows = 37;
        auto x = testing::random_normal(rows * n, 100 + n, 2.0f);
        auto w = testing::random_normal(n, 200 + n, 0.5f, 1.0f);
        std::vector<float> want(rows * n);
        cpu::rmsnorm(Matrix<const float>(x.data(), rows, n), Vector<const float>(w.data(), n),
                     Matrix<float>(want.data(), rows, n), 1e-6f);

        cuda::DeviceBuffer<float> dx(x), dw(w), dy(rows * n);
        dy.fill_bytes(0xff);  // NaN everywhere: unwritten elements fail the comparison
        cuda::rmsnorm(Matrix<const float>(dx.data(), rows, n), Vector<const float>(dw.data(), n),
                      Matrix<float>(dy.data(), rows, n), 1e-6f);
        CHECK(testing::relative_error(dy.download(), want) < 1e-5);

        std::vector<bf16> xb(x.size());
        for (std::size_t i = 0; i < x.size(); ++i) xb[i] = bf16::from_float(x[i]);
        cuda::DeviceBuffer<bf16> dxb(xb), dyb(rows * n);
        dyb.fill_bytes(0xff);
        cuda::rmsnorm(Matrix<const bf16>(dxb.data(), rows, n), Vector<const float>(dw.data(), n),
                      Matrix<bf16>(dyb.data(), rows, n), 1e-6f);
        auto got = dyb.download();
        std::vector<float> gotf(got.size());
        for (std::size_t i = 0; i < got.size(); ++i) gotf[i] = got[i].to_float();
        CHECK(testing::relative_error(gotf, want) < 2e-2);
    }
}
