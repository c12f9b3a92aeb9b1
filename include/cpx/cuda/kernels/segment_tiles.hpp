#pragma once
// The tile schedule of the grouped expert GEMMs, as plain host/device
// arithmetic (no CUDA types, so a CPU unit test checks it). Tokens sorted by
// expert form E contiguous segments [offsets[e], offsets[e+1]); each segment is
// cut into tiles of `tile_rows` rows. A launch has one block per possible tile
// (the host knows only the token count, never the split, so no host sync is
// needed): block t walks the device-side offsets to find its (expert, rows), and
// blocks past the last tile return at once.

#include <cstdint>

#include "cpx/core/host_device.hpp"

namespace cpx::cuda {

/// Rows [row_begin, row_begin + rows) of the sorted order, all routed to `expert`.
struct SegmentTile {
    int expert = -1;
    int row_begin = 0;
    int rows = 0;
};

/// The tile-th non-empty tile over the segments in expert order; false when
/// `tile` is past the last one. offsets has experts + 1 nondecreasing entries.
CPX_HD_INLINE bool find_segment_tile(const std::int32_t* offsets, int experts, long long tile, int tile_rows,
                                     SegmentTile& out) {
    for (int e = 0; e < experts; ++e) {
        const int count = offsets[e + 1] - offsets[e];
        const long long tiles = (static_cast<long long>(count) + tile_rows - 1) / tile_rows;
        if (tile < tiles) {
            const int first = static_cast<int>(tile) * tile_rows;
            out.expert = e;
            out.row_begin = offsets[e] + first;
            out.rows = count - first < tile_rows ? count - first : tile_rows;
            return true;
        }
        tile -= tiles;
    }
    return false;
}

/// An upper bound on the tiles of any split of `tokens` rows into `experts`
/// segments: sum_e ceil(c_e / T) <= sum_e (c_e / T + 1) <= ceil(tokens / T) + experts.
CPX_HD_INLINE long long max_segment_tiles(long long tokens, int experts, int tile_rows) {
    return (tokens + tile_rows - 1) / tile_rows + experts;
}

}  // namespace cpx::cuda
