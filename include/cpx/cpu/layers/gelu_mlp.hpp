#pragma once
// The GPT-2 MLP on the CPU: c_proj(GELU(c_fc(x))), both Linears with optional
// biases, in the nn.Linear layout (weight [out, in], y = x W^T + b).

#include "cpx/cpu/runtime/eigen.hpp"

#include "cpx/core/error.hpp"
#include "cpx/core/tensor_view.hpp"
#include "cpx/cpu/runtime/eigen_view.hpp"
#include "cpx/cpu/kernels/gelu.hpp"
#include "cpx/cpu/kernels/linear.hpp"
#include "cpx/cpu/runtime/parallel.hpp"
#include "cpx/math/gelu.hpp"

namespace cpx::cpu {

/// Weights of one GPT-2 MLP, matrices stored as W (float or bf16). Empty bias
/// views mean the configuration has no biases.
template <class W = float>
struct GeluMlpWeights {
    Matrix<const W> c_fc_weight;        ///< [width, hidden]
    Vector<const float> c_fc_bias;      ///< [width] or empty
    Matrix<const W> c_proj_weight;      ///< [hidden, width]
    Vector<const float> c_proj_bias;    ///< [hidden] or empty
    /// Packed copies (out_in) for the chosen arithmetic (cpu/runtime/compute.hpp), or null.
    const PackedWeight* c_fc_packed = nullptr;
    const PackedWeight* c_proj_packed = nullptr;
};

/// out (= or +=, per `mode`) GELU(x W_fc^T + b_fc) W_proj^T + b_proj for the
/// rows of x; accumulating adds the MLP into a residual stream in place.
/// `hidden` is caller-owned scratch of [rows, width]. out must not alias x.
template <class W>
void gelu_mlp(Matrix<const float> x, const GeluMlpWeights<W>& w, Matrix<float> hidden, Matrix<float> out,
              LinearScratch& scratch, Write mode = Write::overwrite) {
    const index_t rows = x.extent(0), d = x.extent(1), width = w.c_fc_weight.extent(0);
    require<ShapeError>(w.c_fc_weight.extent(1) == d, "gelu_mlp: c_fc.weight is [", width, ", ",
                        w.c_fc_weight.extent(1), "] for inputs of width ", d);
    require<ShapeError>(w.c_proj_weight.extent(0) == d && w.c_proj_weight.extent(1) == width,
                        "gelu_mlp: c_proj.weight is [", w.c_proj_weight.extent(0), ", ", w.c_proj_weight.extent(1),
                        "], expected [", d, ", ", width, "]");
    require<ShapeError>(w.c_fc_bias.empty() || w.c_fc_bias.extent(0) == width, "gelu_mlp: c_fc.bias has ",
                        w.c_fc_bias.extent(0), " elements, expected ", width);
    require<ShapeError>(w.c_proj_bias.empty() || w.c_proj_bias.extent(0) == d, "gelu_mlp: c_proj.bias has ",
                        w.c_proj_bias.extent(0), " elements, expected ", d);
    require<ShapeError>(hidden.extent(0) >= rows && hidden.extent(1) == width, "gelu_mlp: scratch is [",
                        hidden.extent(0), ", ", hidden.extent(1), "], needs [", rows, ", ", width, "]");
    require<ShapeError>(out.extent(0) == rows && out.extent(1) == d, "gelu_mlp: output is [", out.extent(0), ", ",
                        out.extent(1), "], expected [", rows, ", ", d, "]");
    if (rows == 0) return;

    const Matrix<float> h_view = hidden.rows(0, rows);
    linear<W>(rows_of(x), w.c_fc_weight, rows_of(h_view), Write::overwrite, scratch, w.c_fc_packed);
    // Bias and GELU row by row on every thread (Eigen runs coefficient-wise
    // expressions on one thread), vectorised (cpu/kernels/gelu.hpp): one scalar erf per
    // value was this layer's largest cost after its GEMMs.
    const float* b_fc = w.c_fc_bias.empty() ? nullptr : w.c_fc_bias.data();
    parallel_for(rows, rows * width > 65536, [&](index_t r) {
        gelu_erf_inplace(h_view.data() + r * width, b_fc, width);
    });

    linear<W>(rows_of(Matrix<const float>(h_view)), w.c_proj_weight, rows_of(out), mode, scratch, w.c_proj_packed);
    if (!w.c_proj_bias.empty()) {
        const float* b = w.c_proj_bias.data();
        parallel_for(rows, rows * d > 65536, [&](index_t r) {
            float* o = out.data() + r * d;
            for (index_t j = 0; j < d; ++j) o[j] += b[j];
        });
    }
}

}  // namespace cpx::cpu
