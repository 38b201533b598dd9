#include "common/collective.h"

namespace kolo {

const char* collective_name(Collective c) {
  switch (c) {
    case Collective::kAllreduce: return "allreduce";
    case Collective::kAllgather: return "allgather";
    case Collective::kBroadcast: return "broadcast";
    case Collective::kAlltoall: return "alltoall";
    case Collective::kReducescatter: return "reducescatter";
    case Collective::kBarrier: return "barrier";
    case Collective::kJoin: return "join";
    case Collective::kGroupedAllreduce: return "grouped allreduce";
    case Collective::kGroupedAllgather: return "grouped allgather";
    case Collective::kGroupedReducescatter: return "grouped reducescatter";
  }
  return "invalid";
}

}  // namespace kolo
