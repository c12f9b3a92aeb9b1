#pragma once
// The CPU layers' views (cpu::PrismAttentionWeights, cpu::GeluMlpWeights) of a
// PRISM block's tensors (models/prism/weights.hpp, shared with the GPU model).

#include "cpx/cpu/layers/gelu_mlp.hpp"
#include "cpx/cpu/layers/prism_attention.hpp"
#include "cpx/models/prism/weights.hpp"

namespace cpx {

template <PrismConfigType C, class W>
cpu::PrismAttentionWeights<W> cpu_attention_view(const PrismLayerWeights<C, W>& l) {
    return {Matrix<const W>(l.u.data(), C::u_rows, C::hidden), l.lambda};
}

template <PrismConfigType C, class W>
cpu::GeluMlpWeights<W> cpu_mlp_view(const PrismLayerWeights<C, W>& l) {
    return {Matrix<const W>(l.c_fc_weight.data(), C::mlp_width, C::hidden), detail::bias_view(l.c_fc_bias),
            Matrix<const W>(l.c_proj_weight.data(), C::hidden, C::mlp_width), detail::bias_view(l.c_proj_bias)};
}

}  // namespace cpx
