#pragma once
// Which rows of a GPU model call get logits.

namespace cpx::cuda {

enum class LogitRows {
    all,   ///< every input row
    last,  ///< the last row of each sequence's chunk (the next-token distribution)
};

}  // namespace cpx::cuda
