#pragma once
// A configuration written out with its field names, for messages:
//   describe(C::dims) == "ComplexityDims{.hidden_size = 768, .num_hidden_layers = 18, ...}"
// (compiler diagnostics print the same template argument positionally).

#include <charconv>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>

#include "cpx/config/complexity_config.hpp"
#include "cpx/config/prism_config.hpp"

namespace cpx {

namespace detail {
class FieldWriter {
public:
    explicit FieldWriter(const char* type) { out_ << type << '{'; }
    template <class T>
    FieldWriter& operator()(const char* name, const T& value) {
        out_ << (first_ ? "." : ", .") << name << " = ";
        if constexpr (std::is_floating_point_v<T>) {  // the shortest text that reads back exactly: 1e-06, not 9.99...e-07
            char buf[32];
            out_ << std::string_view(buf, static_cast<std::size_t>(std::to_chars(buf, buf + sizeof buf, value).ptr - buf));
        } else {
            out_ << value;
        }
        first_ = false;
        return *this;
    }
    std::string str() { return out_.str() + '}'; }

private:
    std::ostringstream out_;
    bool first_ = true;
};

inline const char* name_of(MlpKind k) {
    switch (k) {
        case MlpKind::dense_swiglu: return "MlpKind::dense_swiglu";
        case MlpKind::token_routed: return "MlpKind::token_routed";
        case MlpKind::learned_router: return "MlpKind::learned_router";
    }
    return "?";
}
inline const char* name_of(AttentionKind k) {
    return k == AttentionKind::prism ? "AttentionKind::prism" : "AttentionKind::mu_gqa";
}
inline const char* name_of(RopeConvention c) {
    return c == RopeConvention::rotate_half ? "RopeConvention::rotate_half" : "RopeConvention::interleaved_pairs";
}
}  // namespace detail

inline std::string describe(const ComplexityDims& d) {
    detail::FieldWriter w("ComplexityDims");
    w("hidden_size", d.hidden_size)("num_hidden_layers", d.num_hidden_layers)(
        "num_attention_heads", d.num_attention_heads)("num_key_value_heads", d.num_key_value_heads)(
        "intermediate_size", d.intermediate_size)("vocab_size", d.vocab_size)(
        "max_position_embeddings", d.max_position_embeddings)("mlp", detail::name_of(d.mlp))(
        "num_experts", d.num_experts)("expert_intermediate_size", d.expert_intermediate_size)(
        "shared_expert", d.shared_expert ? "true" : "false")("shared_intermediate_size", d.shared_intermediate_size);
    w("use_mu_guidance", d.use_mu_guidance ? "true" : "false");
    // The later models' MLP knobs, in declaration order, when any departs from the paper's MLP.
    if (uses_later_mlp_knobs(d)) {
        w("top_k", d.top_k)("top_k_primary_weight", d.top_k_primary_weight)("routed_output_scale",
                                                                             d.routed_output_scale)(
            "shared_output_scale", d.shared_output_scale)("use_shared_routed_gates",
                                                          d.use_shared_routed_gates ? "true" : "false");
        if (d.use_shared_routed_gates) w("shared_gate_init", d.shared_gate_init)("routed_gate_init", d.routed_gate_init);
    }
    w("rope_theta", d.rope_theta)(
        "rope_scaling", d.rope_scaling)("norm_eps", d.norm_eps)("attention", detail::name_of(d.attention));
    if (d.attention == AttentionKind::prism)
        w("prism_expansion_ratio", d.prism_expansion_ratio)("prism_freq_multiplier", d.prism_freq_multiplier);
    return w.str();
}

inline std::string describe(const PrismDims& d) {
    detail::FieldWriter w("PrismDims");
    w("n_layer", d.n_layer)("n_head", d.n_head)("n_embd", d.n_embd)("vocab_size", d.vocab_size)(
        "block_size", d.block_size)("prism_expansion_ratio", d.prism_expansion_ratio)(
        "prism_freq_multiplier", d.prism_freq_multiplier)("rope_theta", d.rope_theta)(
        "rope_convention", detail::name_of(d.rope_convention))("bias", d.bias ? "true" : "false")(
        "layer_norm_eps", d.layer_norm_eps);
    return w.str();
}

}  // namespace cpx
