// The mesh: one TCP connection per pair of ranks, each opened with a handshake.
//
// Rule: rank i connects to every rank j < i and accepts a connection from every
// rank k > i. Rank 0 only accepts, so every rank's connects are answered once
// the ranks below it have made theirs: no cycle, whatever the order ranks
// arrive in. Both ends send a Hello (frame.h) carrying the job token, the
// sender's rank (in the header), world size, generation (in the header), pid
// and host. The accepting end checks the connector's first:
//   - no Hello, or the wrong token: the connection is closed without a word
//     (Note [The job token]) and this rank goes on waiting for its peers;
//   - another world size or generation, a rank that is not one this rank
//     expects (or a second connection from one): a kReject naming what differs,
//     and this rank fails too, with the same words — both sides fail clearly.
// The connecting end then checks the answer the same way (token, rank, size,
// generation). Every step is bounded by the deadline; a timeout names the ranks
// still missing and, for each, the last thing seen from it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "transports/socket/engine.h"
#include "transports/socket/net.h"

namespace kolo::socket {

struct MeshIdentity {
  int rank = 0;
  int size = 1;
  uint64_t generation = 0;
  std::string token;
  std::string host;  // this host's name, for peers' messages
};

// Where to reach rank r: endpoints[r] (this rank's own is not used).
// `listener` listens on this rank's published endpoint (net.h listen_on).
Status form_mesh(const MeshIdentity& me, const Fd& listener, const std::vector<Endpoint>& endpoints,
                 Clock::time_point deadline, std::vector<PeerLink>* links);

}  // namespace kolo::socket
