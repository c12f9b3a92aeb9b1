#pragma once
// Collects every way a checkpoint differs from what a loader expects, then
// reports them all in one exception, so a user sees the whole mismatch (every
// missing tensor, every wrong shape) instead of the first one.
//
//   CheckpointValidator v(ckpt);
//   v.expect("embed_tokens.weight", {V, d});
//   v.expect_dtype_in("layers.0.mlp.token_to_expert", {DType::i64, DType::i32});
//   v.throw_if_errors("COMPLEXITY-DEEP 187M");   // ShapeError listing all problems

#include <cstdint>
#include <initializer_list>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "cpx/core/dtype.hpp"
#include "cpx/core/error.hpp"
#include "cpx/io/checkpoint.hpp"

namespace cpx::io {

class CheckpointValidator {
public:
    explicit CheckpointValidator(const Checkpoint& checkpoint) : checkpoint_(&checkpoint) {}

    /// Records a missing tensor or a wrong shape. Returns the tensor when it
    /// exists with exactly `shape`, nullptr otherwise.
    const TensorInfo* expect(std::string_view name, const std::vector<std::int64_t>& shape) {
        const TensorInfo* t = lookup(name);
        if (!t) return nullptr;
        if (t->shape != shape) {
            add("tensor '" + printable(name) + "': expected shape " + shape_string(shape) + ", found " +
                t->shape_str());
            return nullptr;
        }
        return t;
    }

    /// Records a missing tensor or a dtype outside `allowed`. Returns the tensor
    /// when it exists with an allowed dtype, nullptr otherwise.
    const TensorInfo* expect_dtype_in(std::string_view name, std::initializer_list<DType> allowed) {
        const TensorInfo* t = lookup(name);
        if (!t) return nullptr;
        for (DType d : allowed)
            if (t->dtype == d) return t;
        std::string list;
        for (DType d : allowed) list += (list.empty() ? "" : ", ") + std::string(dtype_name(d));
        add("tensor '" + printable(name) + "': dtype " + printable(t->dtype_name) + " is not one of " + list);
        return nullptr;
    }

    /// Records a problem the loader found itself (a mismatch with the compiled configuration).
    void note(std::string problem) { add(std::move(problem)); }
    /// Records a problem with the file's content itself: throw_if_errors then raises FormatError.
    void note_format(std::string problem) {
        format_problem_ = true;
        add(std::move(problem));
    }

    bool ok() const noexcept { return problems_.empty(); }
    const std::vector<std::string>& problems() const noexcept { return problems_; }

    /// Checkpoint tensors never named in expect()/expect_dtype_in(), sorted.
    std::vector<std::string> unexpected_names() const {
        std::vector<std::string> out;
        for (const std::string& n : checkpoint_->names())
            if (!seen_.contains(n)) out.push_back(n);
        return out;
    }

    /// Throws, if any problem was recorded, one exception listing all of them:
    /// FormatError if any came from note_format(), ShapeError otherwise.
    void throw_if_errors(std::string_view context) const {
        if (problems_.empty()) return;
        std::string msg = std::string(context) + ": checkpoint '" + printable(checkpoint_->path().string()) + "' has " +
                          std::to_string(problems_.size()) + (problems_.size() == 1 ? " problem:" : " problems:");
        for (const std::string& p : problems_) msg += "\n  " + p;
        if (format_problem_) throw FormatError(msg);
        throw ShapeError(msg);
    }

private:
    const Checkpoint* checkpoint_;
    std::vector<std::string> problems_;
    std::set<std::string, std::less<>> seen_;
    std::set<std::string, std::less<>> reported_missing_;
    bool format_problem_ = false;

    void add(std::string problem) { problems_.push_back(std::move(problem)); }

    const TensorInfo* lookup(std::string_view name) {
        seen_.emplace(name);
        const TensorInfo* t = checkpoint_->find(name);
        if (!t && reported_missing_.emplace(name).second) add("missing tensor '" + printable(name) + "'");
        return t;
    }
};

}  // namespace cpx::io
