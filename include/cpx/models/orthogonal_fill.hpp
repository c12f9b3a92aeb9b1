#pragma once
// The orthogonal initialisation of PRISM's dictionary U for the slot walker
// (models/initialize_slots.hpp): the one part of initialisation that needs
// Eigen (a Householder QR, cpu/layers/orthogonal_init.hpp).

#include "cpx/cpu/layers/orthogonal_init.hpp"
#include "cpx/models/initialize_slots.hpp"
#include "cpx/models/seeded_normal.hpp"

namespace cpx {

template <class T>
struct OrthogonalFill {
    void operator()(Matrix<float> w, SeededRandom& rng) const {
        cpu::orthogonal_init(w, [&] { return rng.normal(); });
    }
};

}  // namespace cpx
