#pragma once
// Non-owning, row-major views over contiguous buffers. Each extent is either a
// compile-time constant or `dynamic`; the same view type is usable on host and
// device, and layers take views so that callers' buffers are used in place.
// This is deliberately not a tensor library: no strides, no expressions.

#include <array>
#include <cstdint>
#include <type_traits>

#include "cpx/core/error.hpp"
#include "cpx/core/host_device.hpp"

namespace cpx {

using index_t = std::int64_t;
inline constexpr index_t dynamic = -1;

template <class T, index_t... Extents>
class View {
public:
    static constexpr int rank = sizeof...(Extents);
    static_assert(rank >= 1, "a View needs at least one extent");
    static_assert(((Extents == dynamic || Extents > 0) && ...),
                  "static View extents must be positive (or cpx::dynamic)");

    using element_type = T;
    static constexpr std::array<index_t, rank> static_extents{Extents...};
    static constexpr int rank_dynamic = ((Extents == dynamic ? 1 : 0) + ...);

    CPX_HOST_DEVICE View() : data_(nullptr), extents_{Extents...} {
        for (int i = 0; i < rank; ++i)
            if (extents_[i] == dynamic) extents_[i] = 0;
    }

    /// Only the dynamic extents are given, in order.
    template <class... Dyn>
    CPX_HOST_DEVICE explicit View(T* data, Dyn... dynamic_extents)
        requires(sizeof...(Dyn) == rank_dynamic && (std::is_integral_v<Dyn> && ...))
        : data_(data), extents_{Extents...} {
        const index_t given[] = {static_cast<index_t>(dynamic_extents)..., 0};
        int next = 0;
        for (int i = 0; i < rank; ++i)
            if (extents_[i] == dynamic) extents_[i] = given[next++];
    }

    /// All extents given; static ones must agree (host-side check with a clear error).
    static View checked(T* data, const std::array<index_t, rank>& extents) {
        View v;
        v.data_ = data;
        for (int i = 0; i < rank; ++i) {
            if (static_extents[i] != dynamic && static_extents[i] != extents[i])
                raise<ShapeError>("view extent ", i, " is ", extents[i], " but the configuration fixes it at ",
                                  static_extents[i]);
            if (extents[i] < 0) raise<ShapeError>("view extent ", i, " is negative (", extents[i], ")");
            v.extents_[i] = extents[i];
        }
        return v;
    }

    /// A view of const elements from a view of mutable ones, over the same memory.
    template <class U>
    CPX_HOST_DEVICE View(const View<U, Extents...>& other)
        requires(std::is_same_v<const U, T> && !std::is_same_v<U, T>)
        : data_(other.data_), extents_(other.extents_) {}

    CPX_HD_INLINE T* data() const { return data_; }
    /// Extent i (static extents are stored too, so this is one load).
    CPX_HD_INLINE index_t extent(int i) const { return extents_[i]; }
    template <int I>
    CPX_HD_INLINE index_t extent() const {
        constexpr index_t known = std::array<index_t, rank>{Extents...}[I];
        if constexpr (known != dynamic) return known;
        else return extents_[I];
    }
    CPX_HD_INLINE index_t size() const {
        index_t n = 1;
        for (int i = 0; i < rank; ++i) n *= extent(i);
        return n;
    }
    CPX_HD_INLINE bool empty() const { return size() == 0; }

    /// Row-major element access.
    template <class... Idx>
    CPX_HD_INLINE T& operator()(Idx... idx) const
        requires(sizeof...(Idx) == rank)
    {
        const index_t i[] = {static_cast<index_t>(idx)...};
        index_t off = i[0];
        for (int d = 1; d < rank; ++d) off = off * extent(d) + i[d];
        return data_[off];
    }

    /// The sub-view at index i of the leading dimension.
    CPX_HD_INLINE auto operator[](index_t i) const
        requires(rank > 1)
    {
        return slice_leading_(i, std::integer_sequence<index_t, Extents...>{});
    }

    /// Rows [begin, begin+count) of the leading dimension, which becomes dynamic.
    CPX_HD_INLINE auto rows(index_t begin, index_t count) const {
        return rows_(begin, count, std::integer_sequence<index_t, Extents...>{});
    }

    template <class U, index_t... E> friend class View;

private:
    CPX_HOST_DEVICE void assign_(T* d, const std::array<index_t, rank>& e) { data_ = d; extents_ = e; }

    template <index_t Lead, index_t... Rest>
    CPX_HD_INLINE View<T, Rest...> slice_leading_(index_t i, std::integer_sequence<index_t, Lead, Rest...>) const {
        View<T, Rest...> v;
        std::array<index_t, rank - 1> e{};
        index_t inner = 1;
        for (int d = 1; d < rank; ++d) { e[d - 1] = extent(d); inner *= extent(d); }
        v.assign_(data_ + i * inner, e);
        return v;
    }
    template <index_t Lead, index_t... Rest>
    CPX_HD_INLINE View<T, dynamic, Rest...> rows_(index_t begin, index_t count,
                                                  std::integer_sequence<index_t, Lead, Rest...>) const {
        View<T, dynamic, Rest...> v;
        std::array<index_t, rank> e{};
        index_t inner = 1;
        for (int d = 1; d < rank; ++d) { e[d] = extent(d); inner *= extent(d); }
        e[0] = count;
        v.assign_(data_ + begin * inner, e);
        return v;
    }

    T* data_;
    std::array<index_t, rank> extents_;
};

template <class T> using Vector = View<T, dynamic>;
template <class T> using Matrix = View<T, dynamic, dynamic>;

}  // namespace cpx
