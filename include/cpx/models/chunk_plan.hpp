#pragma once
// Chunked prefill under a token budget: a call whose sequences hold more tokens
// than one device call has rows for runs in rounds of at most `budget` tokens,
// each sequence's tokens in order. A round shares the budget equally among the
// sequences with tokens left; a sequence that needs less than its share passes
// the rest on to the others (water-filling). Every round but the last is full,
// so a call takes ceil(total / budget) rounds, the fewest possible: one long
// prompt among short ones no longer waits behind a fixed budget / B share per
// sequence. Host-only and free of Eigen and CUDA (models/host_model.cuh uses it).

#include <cstddef>
#include <span>

#include "cpx/core/error.hpp"

namespace cpx {

/// The next round: sequence b has run `done[b]` of its `lengths[b]` tokens;
/// writes the tokens it runs now to `count[b]` (from token done[b] on) and
/// returns their sum, at most `budget` (0: every token has run). Shares are
/// equal up to one token; the first sequences in call order get the odd ones.
inline std::size_t next_chunk(std::span<const std::size_t> lengths, std::span<const std::size_t> done,
                              std::size_t budget, std::span<std::size_t> count) {
    require<ShapeError>(done.size() == lengths.size() && count.size() == lengths.size(), "next_chunk: ",
                        lengths.size(), " lengths, ", done.size(), " progress counts and ", count.size(),
                        " outputs");
    require<ShapeError>(budget >= 1, "next_chunk: a budget of 0 tokens per round");
    std::size_t active = 0;  // sequences still owed tokens beyond count[b]
    for (std::size_t b = 0; b < lengths.size(); ++b) {
        require<ShapeError>(done[b] <= lengths[b], "next_chunk: sequence ", b, " has run ", done[b], " of its ",
                            lengths[b], " tokens");
        count[b] = 0;
        active += done[b] < lengths[b];
    }
    std::size_t left = budget, total = 0;
    const auto owed = [&](std::size_t b) { return lengths[b] - done[b] - count[b]; };
    while (active > 0 && left > 0) {
        const std::size_t share = left / active;
        // Sequences whose whole rest fits in an equal share take it and leave the round.
        std::size_t finished = 0;
        for (std::size_t b = 0; b < lengths.size(); ++b) {
            const std::size_t want = owed(b);
            if (want > 0 && want <= share) {
                count[b] += want, left -= want, total += want;
                ++finished;
            }
        }
        if (finished > 0) {
            active -= finished;
            continue;  // a larger share for the rest
        }
        // Every sequence wants more than the share: each takes it, the first `left % active` one more.
        std::size_t extra = left % active;
        for (std::size_t b = 0; b < lengths.size(); ++b) {
            if (owed(b) == 0) continue;
            const std::size_t take = share + (extra > 0 ? 1 : 0);
            extra -= extra > 0 ? 1 : 0;
            count[b] += take, left -= take, total += take;
        }
        break;  // the budget is spent
    }
    return total;
}

}  // namespace cpx
