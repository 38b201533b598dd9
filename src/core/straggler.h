// The timeline's exchange of submit times: who came last to each name of a
// cycle. See Note [Who came last] in timeline.h.
//
// Wire layout of one rank's part (little-endian, like wire.h): magic "KOLS" (u32)
// | count (u32) | count ages (i64, microseconds since this rank submitted the
// name; -1: this rank did not submit it). Decoding checks the magic, the count
// against what the cycle expects and the length, so a short or corrupt part is
// an error, never a crash.
// Coordinator thread only; collective (every rank calls exchange_stragglers in a
// cycle where Negotiator::someone_recording() is true).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "core/timeline.h"
#include "transport/control_plane.h"

namespace kolo::core {

std::string encode_submit_ages(const std::vector<int64_t>& ages);
Status decode_submit_ages(const std::string& bytes, size_t expected, std::vector<int64_t>* ages);

// The straggler of item `i` given every rank's ages (by rank): the rank with the
// smallest non-negative age (the lowest such rank on a tie), and the largest
// age minus the smallest. Rank -1 when no rank submitted it.
Timeline::Straggler straggler_of(const std::vector<std::vector<int64_t>>& ages, size_t i);

// Allgathers `mine` and returns the straggler of each item, in order.
Status exchange_stragglers(transport::ControlPlane& control, const std::vector<int64_t>& mine,
                           std::vector<Timeline::Straggler>* out);

}  // namespace kolo::core
