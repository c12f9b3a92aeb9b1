#pragma once
// Rewriting a saved checkpoint tensor by tensor, for tests of the layouts and
// the malformed files a loader must handle: rename, reshape, drop or add
// tensors, and convert the routed experts to the other layouts the authors use.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <cpx/io/checkpoint.hpp>
#include <cpx/io/safetensors_writer.hpp>

namespace cpx::testing {

/// One tensor as a rewrite sees it: its values as float (or int64 for integer tensors).
struct Tensor {
    std::string name;
    std::vector<std::int64_t> shape;
    std::vector<float> f;
    std::vector<std::int64_t> i;
};

using TensorEdit = std::function<void(Tensor&, std::vector<Tensor>&)>;

inline bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// Copies the checkpoint directory `from` to `to` (model.safetensors and
/// config.json), passing every tensor through `edit`, which may rename,
/// reshape or drop it (empty name) and may add tensors to `extra`. Tensors are
/// visited in name order.
inline void rewrite(const std::filesystem::path& from, const std::filesystem::path& to, const TensorEdit& edit) {
    const auto ckpt = io::Checkpoint::open(from);
    std::vector<Tensor> out;
    for (const std::string& name : ckpt.names()) {
        const auto& info = ckpt.get(name);
        Tensor t{name, info.shape, {}, {}};
        if (info.dtype == DType::i64) t.i = ckpt.read_vector<std::int64_t>(name);
        else t.f = ckpt.read_vector<float>(name);
        std::vector<Tensor> extra;
        edit(t, extra);
        if (!t.name.empty()) out.push_back(std::move(t));
        for (auto& e : extra) out.push_back(std::move(e));
    }
    io::SafetensorsWriter w;
    for (const Tensor& t : out) {
        if (!t.i.empty()) w.add(t.name, t.shape, t.i);
        else w.add(t.name, t.shape, t.f);
    }
    std::filesystem::create_directories(to);
    w.write(to / "model.safetensors");
    std::filesystem::copy_file(from / "config.json", to / "config.json",
                               std::filesystem::copy_options::overwrite_existing);
}

/// An edit storing the framework's split experts (gate_proj_w / up_proj_w /
/// down_proj_w) as mlp.gate_up_proj [E, d, 2 I] and mlp.down_proj; other
/// tensors pass unchanged.
inline TensorEdit fuse_experts(std::int64_t E, std::int64_t d, std::int64_t I) {
    auto gates = std::make_shared<std::map<std::string, std::vector<float>>>();
    return [=](Tensor& t, std::vector<Tensor>& extra) {
        if (ends_with(t.name, "mlp.gate_proj_w")) {
            (*gates)[t.name.substr(0, t.name.size() - 11)] = t.f;
            t.name.clear();
        } else if (ends_with(t.name, "mlp.up_proj_w")) {
            const std::string p = t.name.substr(0, t.name.size() - 9);
            const auto& g = gates->at(p);  // names are sorted: down, gate, ..., up
            Tensor gu{p + "gate_up_proj", {E, d, 2 * I}, std::vector<float>(E * d * 2 * I), {}};
            for (std::int64_t r = 0; r < E * d; ++r)
                for (std::int64_t j = 0; j < I; ++j) {
                    gu.f[r * 2 * I + j] = g[r * I + j];
                    gu.f[r * 2 * I + I + j] = t.f[r * I + j];
                }
            extra.push_back(std::move(gu));
            t.name.clear();
        } else if (ends_with(t.name, "mlp.down_proj_w")) {
            t.name = t.name.substr(0, t.name.size() - 2);  // mlp.down_proj
        }
    };
}

/// An edit storing the split experts as mlp.experts.{e}.{gate,up,down}_proj.weight
/// in nn.Linear layout ([out, in]), under `prefix`. A consumed tensor's name is
/// cleared, so a caller can chain further edits on the others.
inline TensorEdit per_expert_linear(std::int64_t E, std::int64_t d, std::int64_t I, std::string prefix = "") {
    return [=](Tensor& t, std::vector<Tensor>& extra) {
        const bool gate = ends_with(t.name, "mlp.gate_proj_w"), up = ends_with(t.name, "mlp.up_proj_w"),
                   down = ends_with(t.name, "mlp.down_proj_w");
        if (!(gate || up || down)) return;
        const std::string p = t.name.substr(0, t.name.rfind("mlp.") + 4);
        for (std::int64_t e = 0; e < E; ++e) {
            Tensor x{prefix + p + "experts." + std::to_string(e) +
                         (gate ? ".gate_proj" : up ? ".up_proj" : ".down_proj") + ".weight",
                     down ? std::vector<std::int64_t>{d, I} : std::vector<std::int64_t>{I, d},
                     std::vector<float>(d * I), {}};
            for (std::int64_t i = 0; i < (down ? I : d); ++i)      // input-major [in, out] ...
                for (std::int64_t o = 0; o < (down ? d : I); ++o)  // ... to nn.Linear [out, in]
                    x.f[o * (down ? I : d) + i] = t.f[(e * (down ? I : d) + i) * (down ? d : I) + o];
            extra.push_back(std::move(x));
        }
        t.name.clear();
    };
}

}  // namespace cpx::testing
