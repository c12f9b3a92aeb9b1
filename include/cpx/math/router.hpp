#pragma once
// The learned top-1 router of the Mixtral-style ablation (docs/MODELS.md
// §10.2): p = softmax(router logits), expert = argmax p (the first on ties,
// as torch.argmax returns), gate = p[expert]. Written once for both code paths.

#include <cmath>

#include "cpx/core/host_device.hpp"

namespace cpx {

struct RouterChoice {
    int expert;
    float probability;
};

/// Top-1 choice over `experts` logits: the first maximum and its softmax probability
/// 1 / sum_e exp(logit_e - logit_max).
CPX_HD_INLINE RouterChoice router_top1(const float* logits, int experts) {
    int best = 0;
    for (int e = 1; e < experts; ++e)
        if (logits[e] > logits[best]) best = e;
    float sum = 0.0f;
    for (int e = 0; e < experts; ++e) sum += expf(logits[e] - logits[best]);
    return {best, 1.0f / sum};
}

}  // namespace cpx
