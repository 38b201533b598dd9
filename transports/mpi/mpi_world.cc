// create_world for MPI: initialise (or adopt) MPI, make kolo's communicators, find
// the topology, make the control plane, the node layer through it
// (transports/shm), the peer monitor and point-to-point verbs, and have the
// registry build the transports from the MPI world's engines (MpiFactory).
#include "transports/mpi/mpi_world.h"

#include <mpi.h>
#include <signal.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/failpoint.h"
#include "transport/registry.h"
#include "transports/mpi/mpi_check.h"
#include "transports/mpi/mpi_comm.h"
#include "transports/mpi/mpi_control_plane.h"
#include "transports/mpi/mpi_factory.h"
#include "transports/mpi/mpi_point_to_point.h"
#include "transports/mpi/mpi_wait.h"
#include "transports/mpi/peer_monitor.h"
#include "transports/shm/collectives.h"
#include "transports/shm/node.h"

namespace kolo::mpi {
namespace {

// Whether kolo called MPI_Init_thread in this process. A later create_world (after
// a failed one, or after a shutdown that has not finalised yet) then knows that
// finalising is still kolo's job.
std::atomic<bool> kolo_initialized_mpi{false};
// Worlds alive whose finalize belongs to kolo: MPI_Finalize waits for the last.
std::atomic<int> kolo_owned_worlds{0};

std::string thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
  }
  return "thread level " + std::to_string(level);
}

Status require_thread_level(int provided) {
  // kolo's coordinator is not the main thread, so FUNNELED is not enough.
  if (provided >= MPI_THREAD_SERIALIZED) return Status::OK();
  return invalid_argument("MPI provides " + thread_level_name(provided) +
                          "; kolo calls MPI from its background thread and needs at least "
                          "MPI_THREAD_SERIALIZED (initialise MPI with MPI_Init_thread and "
                          "MPI_THREAD_MULTIPLE, or let kolo initialise it)");
}

// Note [Errors that reach MPI_COMM_WORLD]
// kolo's communicators have MPI_ERRORS_RETURN, but MPICH reports an error found
// while completing a request (MPI_Test on a truncated receive, say) through
// MPI_COMM_WORLD's handler, not the request's communicator's. When kolo
// initialises MPI, MPI is kolo's, so it sets MPI_ERRORS_RETURN on MPI_COMM_WORLD
// and MPI_COMM_SELF too and such errors come back as a Status. When the caller
// initialised MPI, its handlers are its own business: kolo does not change them,
// and with MPI's default (MPI_ERRORS_ARE_FATAL) such an error aborts.

// Note [SIGUSR1 and MPICH]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// Under mpiexec.mpich -disable-auto-cleanup, hydra tells the surviving ranks of a
// failure with SIGUSR1, and MPI_Init installs MPICH's handler for it, replacing
// the process's own; that handler crashed the survivors (segmentation fault)
// instead of letting kolo report the failure. When kolo initialises MPI it puts
// back whatever disposition the process had (the default ends the process; a
// program that wants kolo's KOLO_ERR_RANK_FAILED ignores or handles SIGUSR1).

// Note [MPI_Finalize at exit]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// MPI_Finalize (MPICH 4) waits until every rank has called it, so finalising in
// kolo_shutdown would make one rank's shutdown wait for the slowest rank's. When
// kolo initialised MPI it therefore finalises it at process exit (atexit, on the
// thread that exits, as MPI wants), once the last kolo world is gone; and not at
// all after a peer failed, since MPI_Finalize would then wait for the dead rank
// forever. Until exit MPI stays initialised, so kolo_init may run again. It is
// also registered as soon as kolo initialises MPI, so that a kolo_init that failed
// (on every rank alike, Note [One verdict at init]) finalises too: a process that
// exits with MPI unfinalised makes MPICH's launcher kill the other ranks, often
// before they have reported the error.
void finalize_at_exit() {
  if (kolo_owned_worlds.load() > 0 || peer_failed_in_this_process()) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

// Initialises MPI unless someone has; *kolo_owns says whether finalising is kolo's.
Status init_mpi(bool* kolo_owns) {
  int initialized = 0;
  int finalized = 0;
  KOLO_MPI_CHECK(MPI_Initialized(&initialized));
  KOLO_MPI_CHECK(MPI_Finalized(&finalized));
  if (finalized) {
    return invalid_argument("MPI was already finalised in this process; it cannot be "
                            "initialised again");
  }
  int provided = 0;
  if (!initialized) {
    // See Note [SIGUSR1 and MPICH].
    struct sigaction usr1;
    const bool saved = sigaction(SIGUSR1, nullptr, &usr1) == 0;
    KOLO_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided));
    if (saved) sigaction(SIGUSR1, &usr1, nullptr);
    kolo_initialized_mpi = true;
    std::atexit(finalize_at_exit);  // See Note [MPI_Finalize at exit].
    // See Note [Errors that reach MPI_COMM_WORLD].
    KOLO_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    KOLO_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
  } else {
    KOLO_MPI_CHECK(MPI_Query_thread(&provided));
  }
  *kolo_owns = kolo_initialized_mpi;
  return require_thread_level(provided);
}

Status duplicate(MPI_Comm base, MPI_Comm* out, Liveness* alive) {
  MPI_Request request;
  KOLO_MPI_CHECK(MPI_Comm_idup(base, out, &request));
  KOLO_RETURN_IF_ERROR_AS_IS(wait(&request, alive));
  KOLO_MPI_CHECK(MPI_Comm_set_errhandler(*out, MPI_ERRORS_RETURN));
  return Status::OK();
}

// The node communicator (local) and the communicator of equal local ranks
// (cross). MPI has no non-blocking split; these two blocking calls run once, at
// init. With test_node_size > 0 (tests only, KOLO_TEST_NODE_SIZE) consecutive
// ranks form pretend nodes of that many ranks, so that one machine can exercise
// multi-node code paths. Each blocking split starts once every rank has arrived
// (mpi::arrive with `alive`).
// `world_rank` is this rank in the global world (pretend nodes are cut from it).
Status split_topology(int test_node_size, int world_rank, Comms* comms,
                      transport::Topology* topology, Liveness* alive) {
  MPI_Comm base = comms->control;
  KOLO_RETURN_IF_ERROR_AS_IS(arrive(base, alive));
  if (test_node_size > 0) {
    KOLO_MPI_CHECK(MPI_Comm_split(base, world_rank / test_node_size, topology->rank,
                                  &comms->local));
  } else {
    KOLO_MPI_CHECK(MPI_Comm_split_type(base, MPI_COMM_TYPE_SHARED, topology->rank,
                                       MPI_INFO_NULL, &comms->local));
  }
  KOLO_MPI_CHECK(MPI_Comm_set_errhandler(comms->local, MPI_ERRORS_RETURN));
  KOLO_MPI_CHECK(MPI_Comm_rank(comms->local, &topology->local_rank));
  KOLO_MPI_CHECK(MPI_Comm_size(comms->local, &topology->local_size));
  KOLO_RETURN_IF_ERROR_AS_IS(arrive(base, alive));
  KOLO_MPI_CHECK(MPI_Comm_split(base, topology->local_rank, topology->rank, &comms->cross));
  KOLO_MPI_CHECK(MPI_Comm_set_errhandler(comms->cross, MPI_ERRORS_RETURN));
  KOLO_MPI_CHECK(MPI_Comm_rank(comms->cross, &topology->cross_rank));
  KOLO_MPI_CHECK(MPI_Comm_size(comms->cross, &topology->cross_size));
  // The node's index: its local rank 0's among the local ranks 0 (ordered by
  // their ranks), told to the node's other ranks.
  topology->node = topology->cross_rank;
  MPI_Request request;
  KOLO_MPI_CHECK(MPI_Ibcast(&topology->node, 1, MPI_INT, 0, comms->local, &request));
  return wait(&request, alive);
}

Status make_comms(const WorldOptions& options, Comms* comms, transport::Topology* topology) {
  MPI_Comm base = MPI_COMM_WORLD;
  if (options.comm_fortran_handle) {
    base = MPI_Comm_f2c(static_cast<MPI_Fint>(*options.comm_fortran_handle));
    if (base == MPI_COMM_NULL) {
      return invalid_argument("communicator handle " +
                              std::to_string(*options.comm_fortran_handle) +
                              " is MPI_COMM_NULL");
    }
  }
  // The first duplicate waits for every rank to reach kolo_init, however late
  // (ranks start at their own pace); each later step is bounded by the peer
  // timeout, then watched by the PeerMonitor.
  KOLO_RETURN_IF_ERROR_AS_IS(duplicate(base, &comms->control, nullptr));
  Deadline deadline(options.peer_timeout, "kolo_init");
  KOLO_RETURN_IF_ERROR_AS_IS(duplicate(base, &comms->data, &deadline));
  KOLO_MPI_CHECK(MPI_Comm_rank(comms->control, &topology->rank));
  KOLO_MPI_CHECK(MPI_Comm_size(comms->control, &topology->size));
  return split_topology(options.test_node_size, topology->rank, comms, topology, &deadline);
}

// A kolo-owned world's finalize: see Note [MPI_Finalize at exit]. (Registered here
// too: a world released by a static destructor at exit must still be finalised
// after it, and a function registered during exit runs after those before it.)
void release_owned_world() {
  static std::once_flag registered;
  --kolo_owned_worlds;
  std::call_once(registered, [] { std::atexit(finalize_at_exit); });
}

// The node layer's regions: the same on every rank (Node::create checks), so
// decided from what every rank knows alike — one node or several — and sized for
// the engines the registry may ask for there ("shm"; "hierarchical").
shm::NodeOptions node_options(const transport::Topology& topology, const WorldOptions& options) {
  shm::NodeOptions o;
  const bool one_node = topology.local_size == topology.size;
  o.allreduce_slot_bytes = one_node ? options.build.shm_slot_bytes : transport::hierarchical_slot_bytes();
  o.collectives_slot_bytes = shm::ShmCollectives::kDefaultSlotBytes;
  o.node_and = one_node && topology.size > 1;
  return o;
}

// The control plane over `comms`, the node layer made through it, and the peer
// monitor that watches both the node (the node layer's board) and the other
// nodes; until the monitor runs, the world's waits are bounded by the peer
// timeout.
Status connect(const SharedComms& comms, const transport::Topology& topology,
               const WorldOptions& options, std::unique_ptr<MpiControlPlane>* control,
               std::shared_ptr<shm::Node>* node) {
  comms->liveness = std::make_shared<Deadline>(options.peer_timeout, "kolo_init");
  KOLO_RETURN_IF_ERROR(MpiControlPlane::create(comms, topology, control));
  KOLO_RETURN_IF_ERROR_AS_IS(shm::Node::create(**control, node_options(topology, options), node));
  std::unique_ptr<PeerMonitor> monitor;
  KOLO_RETURN_IF_ERROR_AS_IS(
      PeerMonitor::create(comms->control, topology, *node, options.peer_timeout, &monitor));
  comms->liveness = std::move(monitor);
  return Status::OK();
}

// The world over a connected control plane and node layer: the node's doorbell
// and AND wired in, the agreement, point-to-point verbs and the transports.
Status assemble(SharedComms comms, std::unique_ptr<MpiControlPlane> control,
                std::shared_ptr<shm::Node> node, const transport::Topology& topology,
                const WorldOptions& options, transport::World* built) {
  KOLO_RETURN_IF_ERROR(control->use_node(node));
  if (options.agree) KOLO_RETURN_IF_ERROR_AS_IS(options.agree(*control));
  built->control = std::move(control);
  built->p2p = std::make_unique<MpiPointToPoint>(comms);
  // Which transports this world offers is the registry's decision.
  MpiFactory factory(comms, std::move(node), *built->control);
  return transport::build_transports(factory, topology, options.build, built);
}

// The communicator that process sets are cut from: a duplicate used only by the
// (serialised) kolo_process_set_add calls, so that making a set's communicator
// never runs beside the coordinator's collectives on the same communicator.
struct SetsComm {
  MPI_Comm comm = MPI_COMM_NULL;
  SetsComm() = default;
  SetsComm(const SetsComm&) = delete;
  SetsComm& operator=(const SetsComm&) = delete;
  ~SetsComm() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
  }
};

// A process set's world (transport::MakeSubset): MPI_Comm_create_group over the
// members of `sets` (collective over the members only), then the same steps as
// the global world on that communicator — its nodes, its own node layer, its own
// peer monitor (a monitor is checked by one coordinator thread).
Status make_set_world(const SetsComm& sets, const WorldOptions& options, int world_rank,
                      int32_t id, const std::vector<int>& ranks, transport::World* out) {
  auto comms = std::make_shared<Comms>();
  MPI_Group all = MPI_GROUP_NULL;
  MPI_Group members = MPI_GROUP_NULL;
  KOLO_MPI_CHECK(MPI_Comm_group(sets.comm, &all));
  int made = MPI_Group_incl(all, static_cast<int>(ranks.size()), ranks.data(), &members);
  MPI_Group_free(&all);
  KOLO_MPI_CHECK(made);
  made = MPI_Comm_create_group(sets.comm, members, id, &comms->control);
  MPI_Group_free(&members);
  KOLO_MPI_CHECK(made);
  KOLO_MPI_CHECK(MPI_Comm_set_errhandler(comms->control, MPI_ERRORS_RETURN));
  Deadline deadline(options.peer_timeout, "kolo_process_set_add");
  KOLO_RETURN_IF_ERROR_AS_IS(duplicate(comms->control, &comms->data, &deadline));
  transport::Topology topology;
  KOLO_MPI_CHECK(MPI_Comm_rank(comms->control, &topology.rank));
  KOLO_MPI_CHECK(MPI_Comm_size(comms->control, &topology.size));
  KOLO_RETURN_IF_ERROR_AS_IS(
      split_topology(options.test_node_size, world_rank, comms.get(), &topology, &deadline));
  std::unique_ptr<MpiControlPlane> control;
  std::shared_ptr<shm::Node> node;
  KOLO_RETURN_IF_ERROR_AS_IS(connect(comms, topology, options, &control, &node));
  transport::World built;
  KOLO_RETURN_IF_ERROR_AS_IS(
      assemble(comms, std::move(control), std::move(node), topology, options, &built));
  *out = std::move(built);
  return Status::OK();
}

// What create_world hands the world for its process sets: they need MPI calls
// from a user thread beside the coordinator, so MPI_THREAD_MULTIPLE.
Status subset_maker(const SharedComms& comms, const WorldOptions& options, int world_rank,
                    transport::MakeSubset* out) {
  int provided = 0;
  KOLO_MPI_CHECK(MPI_Query_thread(&provided));
  if (provided < MPI_THREAD_MULTIPLE) {
    *out = [provided](int32_t, const std::vector<int>&, transport::World*) {
      return unsupported("process sets need MPI_THREAD_MULTIPLE (MPI provides " +
                         thread_level_name(provided) + "; let kolo initialise MPI, or "
                         "initialise it with MPI_Init_thread and MPI_THREAD_MULTIPLE)");
    };
    return Status::OK();
  }
  auto sets = std::make_shared<SetsComm>();
  KOLO_RETURN_IF_ERROR_AS_IS(duplicate(comms->control, &sets->comm, nullptr));
  WorldOptions set_options = options;
  set_options.agree = nullptr;  // kolo_init's (it refers to its frame); a set agrees itself
  *out = [sets, set_options, world_rank](int32_t id, const std::vector<int>& ranks,
                                     transport::World* world) {
    return make_set_world(*sets, set_options, world_rank, id, ranks, world);
  };
  return Status::OK();
}

}  // namespace

Status create_world(const WorldOptions& options, transport::World* world) {
  if (options.test_node_size < 0) {
    return invalid_argument("test_node_size must be 0 or positive, not " +
                            std::to_string(options.test_node_size));
  }
  bool kolo_owns = false;
  KOLO_RETURN_IF_ERROR(init_mpi(&kolo_owns));

  auto comms = std::make_shared<Comms>();
  transport::Topology topology;
  KOLO_RETURN_IF_ERROR(make_comms(options, comms.get(), &topology));

  std::unique_ptr<MpiControlPlane> control;
  std::shared_ptr<shm::Node> node;
  KOLO_RETURN_IF_ERROR_AS_IS(connect(comms, topology, options, &control, &node));
  failpoint("init");  // once the peer monitor runs
  transport::World built;
  KOLO_RETURN_IF_ERROR_AS_IS(
      assemble(comms, std::move(control), std::move(node), topology, options, &built));
  KOLO_RETURN_IF_ERROR_AS_IS(subset_maker(comms, options, topology.rank, &built.make_subset));
  if (kolo_owns) {
    ++kolo_owned_worlds;
    built.finalize = release_owned_world;
  }
  *world = std::move(built);
  built.finalize = nullptr;  // a moved-from std::function need not be empty
  return Status::OK();
}

}  // namespace kolo::mpi
