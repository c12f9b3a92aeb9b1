// The --device cuda part of complexity_run_<Preset> and prism_run_<Preset>,
// compiled by nvcc when the program is built with CUDA: the host weights the
// program loaded (or drew) are uploaded to the GPU model of its family storing
// the same type (bf16 stays bf16), behind cuda::HostModel, so the program's
// prompt pass, logits dump and generate() run unchanged on the GPU.
#include <cpx/config/presets.hpp>
#include <cpx/models/complexity/model.cuh>
#include <cpx/cuda/runtime/device_query.cuh>
#include <cpx/models/host_model.cuh>
#include <cpx/models/prism/model.cuh>

#include <algorithm>
#include <memory>
#include <string>

#include "device_calls.hpp"
#include "run_options.hpp"

#ifndef CPX_PRESET
#error "define CPX_PRESET to a type name in cpx::presets"
#endif

using Config = cpx::presets::CPX_PRESET;

namespace cpx_example {
namespace {

/// The host weights and the GPU model of a configuration's family.
template <class C, class W, bool prism = cpx::PrismConfigType<C>>
struct Family {
    using Weights = cpx::ComplexityWeights<C, W>;
    using Gpu = cpx::cuda::ComplexityModel<C, W>;
};
template <class C, class W>
struct Family<C, W, true> {
    using Weights = cpx::PrismWeights<C, W>;
    using Gpu = cpx::cuda::PrismModel<C, W>;
};

template <class W>
class CudaCalls final : public DeviceCalls {
public:
    CudaCalls(const typename Family<Config, W>::Weights& weights, const std::string& kernels)
        : model_(weights, 1, max_rows) {
        if (kernels == "simt") model_.device().use_kernels(cpx::cuda::KernelChoice{});
        else if (kernels == "tensor-cores") model_.device().use_kernels(cpx::cuda::KernelChoice::tensor_cores());
    }

    void call(std::span<const cpx::TokenSpan> batch, std::span<cpx::SlotCache* const> caches, cpx::LogitsAt at,
              const cpx::StridedMatrix<float>& logits) override {
        if (caches.empty()) model_.forward(batch, at, logits);
        else model_.extend(caches, batch, at, logits);
    }

    std::string device() const override {
        int id = 0;
        cudaDeviceProp p{};
        CPX_CUDA_CHECK(cudaGetDevice(&id));
        CPX_CUDA_CHECK(cudaGetDeviceProperties(&p, id));
        const auto& k = model_.device().kernels();
        const auto name = [](bool tensor_cores) { return tensor_cores ? "tensor cores" : "SIMT"; };
        return std::string(p.name) + "; attention " + name(k.attention == cpx::cuda::AttentionKernel::tensor_cores) +
               ", experts " + name(k.experts == cpx::cuda::GroupedGemmKernel::tensor_cores);
    }

private:
    /// Tokens per device call: longer prompts run as chunked prefill (HostModel).
    static constexpr int max_rows = std::min(Config::max_positions, 2048);
    cpx::cuda::HostModel<typename Family<Config, W>::Gpu> model_;
};

template <class W>
std::unique_ptr<DeviceCalls> make(const typename Family<Config, W>::Weights& weights, const std::string& kernels) {
    const std::string why = cpx::cuda::no_device_reason();
    cpx::require<cpx::Error>(why.empty(), "--device cuda: no usable CUDA device (", why, ")");
    return std::make_unique<CudaCalls<W>>(weights, kernels);
}

}  // namespace

template <class Weights>
std::unique_ptr<DeviceCalls> make_cuda_model(const Weights& weights, const std::string& kernels) {
    return make<typename Weights::weight_type>(weights, kernels);
}

template std::unique_ptr<DeviceCalls> make_cuda_model(const Family<Config, float>::Weights&, const std::string&);
template std::unique_ptr<DeviceCalls> make_cuda_model(const Family<Config, cpx::bf16>::Weights&, const std::string&);

}  // namespace cpx_example
