#pragma once
// Reading safetensors checkpoints: one include for a model loader.
//   SafetensorsFile      one validated, memory-mapped file   (safetensors_file.hpp)
//   read_tensor          typed, converting reads               (tensor_read.hpp)
//   Checkpoint           a file, a directory or a sharded index (checkpoint.hpp)
//   CheckpointValidator  every mismatch reported at once      (checkpoint_validator.hpp)

#include "cpx/io/checkpoint.hpp"
#include "cpx/io/checkpoint_validator.hpp"
#include "cpx/io/safetensors_file.hpp"
#include "cpx/io/tensor_read.hpp"
