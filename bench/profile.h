// Gradient-set profiles: the named tensors one training step of a model hands to
// kolo, shipped as text under bench/profiles/ (e.g. resnet50.txt).
//
// Format: one tensor per line, `name elements shape` (shape informative only), in
// layer order as the model's parameters are listed (forward order). Lines starting
// with '#' are comments; the first comment states the totals,
//   # <anything>: <N> tensors, <M> <dtype> (<B> bytes)
// and load_profile() checks the tensors it read against them, so a truncated or
// edited file is an error, not a silently different benchmark.
//
// Used by kolo-allreduce-perf (-m) and by the micro-benchmarks; no MPI, no kolo calls.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/dtype.h"

namespace kolo::bench {

struct ProfileTensor {
  std::string name;
  int64_t elements = 0;
};

struct Profile {
  std::string name;  // "resnet50"
  DataType dtype = DataType::kFloat32;
  std::vector<ProfileTensor> tensors;  // forward (layer) order
  int64_t total_elements = 0;
  int64_t total_bytes() const { return total_elements * static_cast<int64_t>(dtype_size(dtype)); }
};

// Finds a profile by name ("resnet50") in the shipped profile folders, or opens
// `name_or_path` directly when it names an existing file. Returns false and sets
// *error when it is not found, malformed, or its totals do not match its header.
bool load_profile(const std::string& name_or_path, Profile* profile, std::string* error);

// Parses profile text (exposed for tests and for callers that embed a profile).
bool parse_profile(const std::string& text, const std::string& name, Profile* profile,
                   std::string* error);

// The folders searched for <name>.txt, in order: <executable dir>/../share/kolo/profiles,
// then the source tree's bench/profiles.
std::vector<std::string> profile_search_path();

}  // namespace kolo::bench
