// Rendezvous: how the ranks of a socket world find each other through a store
// (store.h) before any connection between them exists.
//
// Each rank writes one record under "<scope>rank/<r>": its world size, host,
// the address and port it listens on, its pid — or, when this rank failed before
// it could listen, the error (so that every rank fails with it, not with a
// timeout: Note [One verdict at init] in core/init_agreement.h). Each rank then
// waits for all records, in slices, checking as they come:
//   - a record with another world size fails this rank at once, naming both;
//   - a record with an error fails this rank with that error;
//   - a rank missing at the deadline fails it with kTimeout naming the ranks
//     missing, and for each the generation it last joined if it joined another.
// Besides its record, each rank writes its generation under
// "kolo/generation/rank/<r>" (outside every generation's keys): a rank that
// finds a peer at a newer generation fails at once (it is stale: the job has
// re-formed without it), one that finds an older one waits for it.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "transports/socket/store.h"

namespace kolo::socket {

struct RankRecord {
  int32_t size = 0;
  int32_t pid = 0;
  std::string host;     // host name (ranks with one host name share a node)
  std::string address;  // numeric, where it listens
  uint16_t port = 0;
  std::string node;     // which node it is on (Note [Hosts in the socket world])
  std::string error;    // non-empty: the rank failed before listening
};

std::string encode_record(const RankRecord& r);
Status decode_record(const std::string& text, RankRecord* out);

// `base` is the whole store (for the generation marks); `scope` the prefix of
// this world's keys ("kolo/g<generation>/w<attempt>/"). Publishes `mine` and
// fills `all` (by rank) once every rank's record is there, or fails as above.
Status exchange_records(Store& base, const std::string& scope, int rank, int size,
                        uint64_t generation, const RankRecord& mine,
                        std::chrono::steady_clock::time_point deadline,
                        std::vector<RankRecord>* all);

}  // namespace kolo::socket
