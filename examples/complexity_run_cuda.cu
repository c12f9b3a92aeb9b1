// The --device cuda part of complexity_run_<Preset>, compiled by nvcc when the
// program is built with CUDA: the host weights the program loaded (or drew)
// are uploaded to a cuda::ComplexityModel storing the same type (bf16 stays
// bf16), behind cuda::HostModel, so the program's prompt pass, logits dump and
// generate() run unchanged on the GPU.
#include <cpx/config/presets.hpp>
#include <cpx/cuda/complexity_model.cuh>
#include <cpx/cuda/device_query.cuh>
#include <cpx/cuda/host_model.cuh>

#include <algorithm>
#include <memory>
#include <string>

#include "device_calls.hpp"
#include "run_options.hpp"

#ifndef CPX_PRESET
#error "define CPX_PRESET to a COMPLEXITY-DEEP type name in cpx::presets"
#endif

using Config = cpx::presets::CPX_PRESET;

namespace cpx_example {
namespace {

template <class W>
class CudaCalls final : public DeviceCalls {
public:
    explicit CudaCalls(const cpx::ComplexityWeights<Config, W>& weights) : model_(weights, 1, max_rows) {}

    void call(std::span<const cpx::TokenSpan> batch, std::span<cpx::SlotCache* const> caches, cpx::LogitsAt at,
              const cpx::cpu::RowBlock<float>& logits) override {
        if (caches.empty()) model_.forward(batch, at, logits);
        else model_.extend(caches, batch, at, logits);
    }

    std::string device() const override {
        int id = 0;
        cudaDeviceProp p{};
        CPX_CUDA_CHECK(cudaGetDevice(&id));
        CPX_CUDA_CHECK(cudaGetDeviceProperties(&p, id));
        return p.name;
    }

private:
    /// Tokens per device call: longer prompts run as chunked prefill (HostModel).
    static constexpr int max_rows = std::min(Config::max_positions, 2048);
    cpx::cuda::HostModel<cpx::cuda::ComplexityModel<Config, W>> model_;
};

}  // namespace

template <class C, class W>
std::unique_ptr<DeviceCalls> make_cuda_model(const cpx::ComplexityWeights<C, W>& weights) {
    if constexpr (!cpx::cuda::runs_on_gpu<C>) {
        (void)weights;
        throw UsageError("--device cuda: the GPU model runs mu-guided GQA attention with the paper's MLP (top_k 1, "
                         "unit output scales, no learned gates); this preset needs the CPU model");
    } else {
        const std::string why = cpx::cuda::no_device_reason();
        cpx::require<cpx::Error>(why.empty(), "--device cuda: no usable CUDA device (", why, ")");
        return std::make_unique<CudaCalls<W>>(weights);
    }
}

template std::unique_ptr<DeviceCalls> make_cuda_model<Config, float>(const cpx::ComplexityWeights<Config, float>&);
template std::unique_ptr<DeviceCalls> make_cuda_model<Config, cpx::bf16>(const cpx::ComplexityWeights<Config, cpx::bf16>&);

}  // namespace cpx_example
