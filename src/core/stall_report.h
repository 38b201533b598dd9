// StallReport: what each rank tells rank 0 when a stall is being reported, and the
// warning rank 0 writes from it.
//
// Rank 0's MessageTable knows which ranks have not submitted a stalled name, but
// not what those ranks are doing instead: requests waiting in their response cache
// never reach it, and it cannot tell a busy rank from an idle one. So when rank 0
// reports a stall it asks every rank, within one negotiation cycle, for a
// RankReport (see Note [Stall reports] in negotiator.h): the names the rank has in
// flight and how long ago it last submitted. Built and sent only then — never on
// the fast path.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/message_table.h"

namespace kolo::core {

struct RankReport {
  // Seconds since this rank's last submission; negative when it has submitted nothing.
  double idle_seconds = -1;
  // Names in flight on this rank (submitted, not yet completed), oldest first: at
  // most kMaxReportedNames of them, out of pending_total.
  std::vector<std::string> pending;
  uint32_t pending_total = 0;
};

constexpr size_t kMaxReportedNames = 256;

// The stall warning: describe_stalls()' "Missing ranks: ..." and then, per missing
// rank, the names it has in flight that some other rank does not (up to a few)
// and how long it has been idle. `reports` is indexed by rank; an empty vector
// gives describe_stalls()' text alone.
std::string describe_stalls(const std::vector<MessageTable::Stall>& stalls,
                            const std::vector<RankReport>& reports);

}  // namespace kolo::core
