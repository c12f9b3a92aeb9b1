// The bridge between a run program (host compiler, Eigen) and its --device
// cuda part (run_cuda.cu, nvcc): calls cross it in the CPU
// call contract's own types (token spans, SlotCache handles, host logits
// rows), so neither side parses the other's headers.
#pragma once

#include <cpx/cpu/runtime/strided.hpp>
#include <cpx/config/prism_config.hpp>
#include <cpx/models/sequence_batch.hpp>
#include <cpx/models/sequence_model.hpp>
#include <cpx/models/slot_cache.hpp>

#include <memory>
#include <span>
#include <string>
#include <utility>

namespace cpx_example {

/// One model on a device: a call of the CPU contract (no caches: forward; caches: extend).
struct DeviceCalls {
    virtual ~DeviceCalls() = default;
    virtual void call(std::span<const cpx::TokenSpan> batch, std::span<cpx::SlotCache* const> caches,
                      cpx::LogitsAt at, const cpx::StridedMatrix<float>& logits) = 0;
    /// The device, in words (for the run report).
    virtual std::string device() const = 0;
};

/// A model of configuration C on a device, with the CPU models' methods (forward,
/// extend, decode; SlotCache as its cache), so run_model and generate() drive it as they
/// drive the CPU model.
template <class C>
class DeviceModel : public cpx::SequenceModel<DeviceModel<C>, C, cpx::SlotCache> {
public:
    using Config = C;
    using Cache = cpx::SlotCache;
    explicit DeviceModel(std::unique_ptr<DeviceCalls> calls) : calls_(std::move(calls)) {}
    std::string device() const { return calls_->device(); }

private:
    friend cpx::SequenceModel<DeviceModel, C, cpx::SlotCache>;
    void forward_pass(std::span<const cpx::TokenSpan> batch, std::span<Cache* const> caches, cpx::LogitsAt at,
                      const cpx::StridedMatrix<float>& logits, cpx::CallSize) {
        calls_->call(batch, caches, at, logits);
    }
    std::unique_ptr<DeviceCalls> calls_;
};

/// The model of `weights` (ComplexityWeights or PrismWeights of the program's preset, fp32 or
/// bf16) on the first CUDA device, running `kernels` (--gpu-kernels: default, simt or
/// tensor-cores): defined in run_cuda.cu, compiled for the preset when the program is built
/// with CUDA. Throws when the preset has no GPU model, no device is usable, or the model's
/// storage type or head dim cannot take the kernels asked for.
template <class Weights>
std::unique_ptr<DeviceCalls> make_cuda_model(const Weights& weights, const std::string& kernels);

}  // namespace cpx_example
