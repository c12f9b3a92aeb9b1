#pragma once
// Byte-pair encoding of one pre-tokenized piece: start from one symbol per
// byte and repeatedly merge the adjacent pair with the lowest merge rank,
// leftmost first among equal ranks, until no adjacent pair has a merge. A heap
// of candidate pairs keeps long pieces (runs of thousands of characters) at
// O(n log n) instead of O(n^2).

#include <cstdint>
#include <queue>
#include <unordered_map>
#include <vector>

namespace cpx::text {

/// Merge table: (left id, right id) -> (rank, merged id).
class MergeTable {
public:
    struct Merge {
        std::int32_t rank;
        std::int32_t id;
    };

    /// Returns false when the pair is already in the table (the first rank wins).
    bool add(std::int32_t left, std::int32_t right, std::int32_t rank, std::int32_t id) {
        return table_.emplace(key(left, right), Merge{rank, id}).second;
    }
    const Merge* find(std::int32_t left, std::int32_t right) const {
        const auto it = table_.find(key(left, right));
        return it == table_.end() ? nullptr : &it->second;
    }
    std::size_t size() const noexcept { return table_.size(); }

private:
    static std::uint64_t key(std::int32_t a, std::int32_t b) {
        return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
    }
    std::unordered_map<std::uint64_t, Merge> table_;
};

/// Merges `ids` (the piece's initial symbols) in place.
inline void bpe_merge(std::vector<std::int32_t>& ids, const MergeTable& merges) {
    const int n = static_cast<int>(ids.size());
    if (n < 2) return;
    std::vector<int> prev(n), next(n);
    std::vector<char> alive(n, 1);
    for (int i = 0; i < n; ++i) {
        prev[i] = i - 1;
        next[i] = i + 1 < n ? i + 1 : -1;
    }
    struct Candidate {
        std::int32_t rank;
        int pos;
        std::int32_t left, right;  // the pair when pushed; stale if the symbols changed since
        bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
    };
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
    const auto push = [&](int pos) {
        if (pos < 0 || next[pos] < 0) return;
        if (const MergeTable::Merge* m = merges.find(ids[pos], ids[next[pos]])) heap.push({m->rank, pos, ids[pos], ids[next[pos]]});
    };
    for (int i = 0; i + 1 < n; ++i) push(i);
    while (!heap.empty()) {
        const Candidate c = heap.top();
        heap.pop();
        const int r = next[c.pos];
        if (!alive[c.pos] || r < 0 || ids[c.pos] != c.left || ids[r] != c.right) continue;
        ids[c.pos] = merges.find(c.left, c.right)->id;
        alive[r] = 0;
        next[c.pos] = next[r];
        if (next[r] >= 0) prev[next[r]] = c.pos;
        push(prev[c.pos]);
        push(c.pos);
    }
    int out = 0;
    for (int i = 0; i >= 0; i = next[i]) ids[out++] = ids[i];
    ids.resize(static_cast<std::size_t>(out));
}

}  // namespace cpx::text
