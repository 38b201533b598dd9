// Init agreement: the step of kolo_init where the ranks compare notes.
//
// Every rank runs its local init steps (reading and checking the knobs, building what
// it can alone) and then calls agree_at_init() with its status so far and the
// fingerprint of its configuration. The call is collective over the control plane
// (coordinator-less: it runs before the coordinator thread exists, on the thread
// that calls kolo_init) and returns the same verdict on every rank: OK only if every
// rank's status is OK and every rank's fingerprint is equal; otherwise an error that
// names the ranks that failed and their messages, or each setting that differs with
// its distinct values and the ranks that hold each. See Note [One verdict at init].
#pragma once

#include <string>
#include <vector>

#include "common/knobs.h"
#include "common/status.h"
#include "transport/control_plane.h"

namespace kolo::core {

// What must be equal on every rank: named canonical values (the knobs that must
// agree, the library version, build features that change the data path). Ranks of
// one build list the same names in the same order.
struct Fingerprint {
  std::vector<KnobValue> entries;
};

// The knobs that must agree (agreed_knob_values); the caller adds what only the
// edge knows (library version, build features).
Fingerprint fingerprint_of(const Config& config);

// The verdict from every rank's status and fingerprint (index = rank). Pure, so every
// rank computes the same one. Failed statuses win over differing fingerprints (a rank
// whose knobs did not parse has no fingerprint worth comparing).
Status init_verdict(const std::vector<Status>& statuses,
                    const std::vector<Fingerprint>& fingerprints);

// Exchanges every rank's report (wire.h: encode_init_report) and returns init_verdict;
// a report that does not decode (another kolo build) fails the verdict too.
// Collective over `control`.
Status agree_at_init(transport::ControlPlane& control, const Status& mine,
                     const Fingerprint& fingerprint);

// "rank 3", "ranks 0-2", "ranks 0, 2, 5-9" (sorted, distinct ranks).
std::string describe_ranks(const std::vector<int>& ranks);

// Note [One verdict at init]
// A rank whose kolo_init fails and returns alone leaves the others waiting: they go
// on into their first negotiation, while it (releasing what it had built) waits in a
// collective free (the MPI world's communicators) that they skip. So no init
// failure is returned alone. Each rank first checks what it can without its peers
// (the knobs' values, the transport's name); then every rank's status and
// configuration fingerprint go through one exchange, before any transport is built
// (a rank whose knobs differ would build different transports, whose collective
// set-up would hang); and once the runtime is set up (the transports checked against
// the preference, rank 0's timeline opened), every rank's status goes through a
// second exchange before the coordinator thread starts. All fail or none, with the
// same message, and those that fail release what they built in the same order.

}  // namespace kolo::core
