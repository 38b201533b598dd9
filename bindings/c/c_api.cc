// The C API (include/kolo/kolo.h) over core::Runtime and the MPI or socket world:
// its lifecycle (init, shutdown, the topology, errors, kolo memory). The
// operations are in c_api_collectives.cc, handles in c_api_handles.cc, process
// sets in c_api_sets.cc.
//
// Every entry point runs inside guarded() (firewall.h): no exception crosses this
// boundary. Bad input is refused before anything is touched: a NULL handle or
// out-pointer, a negative length or a NaN timeout gets KOLO_ERR_INVALID_ARGUMENT
// naming the argument, and a call that produces a handle sets *handle to NULL
// first, so that every failure leaves it NULL.
#include "kolo/kolo.h"

#include <cstdint>
#include <chrono>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <string>

#include "bindings/c/c_api_state.h"
#include "bindings/c/firewall.h"
#include "common/dtype.h"
#include "common/knobs.h"
#include "common/logging.h"
#include "common/status.h"
#include "core/init_agreement.h"
#include "core/runtime.h"
#include "kolo_build_config.h"
#include "transport/registry.h"
#include "transports/mpi/mpi_world.h"
#include "transports/shm/shared_alloc.h"
#include "transports/socket/launch_env.h"
#include "transports/socket/socket_world.h"

namespace kolo::c_api {
std::mutex g_lifecycle_mu;
std::unique_ptr<core::Runtime> g_runtime;

kolo_status_t not_initialized() {
  return report(Code::kNotInitialized, "kolo is not initialised (call kolo_init first)");
}

kolo_status_t invalid(const std::string& message) {
  return report(Code::kInvalidArgument, message);
}
}  // namespace kolo::c_api

namespace {

using kolo::Code;
using kolo::Status;
using kolo::c_api::g_lifecycle_mu;
using kolo::c_api::g_runtime;
using kolo::c_api::guarded;
using kolo::c_api::invalid;
using kolo::c_api::not_initialized;
using kolo::c_api::report;

// The C API casts between kolo.h's enums and these; a value that drifts fails the
// build here. (tests/python/test_abi.py checks the Python copies against kolo.h.)
template <typename Internal>
constexpr bool same(Internal internal, int c_value) {
  return static_cast<int>(internal) == c_value;
}
static_assert(same(Code::kOk, KOLO_OK) && same(Code::kInProgress, KOLO_IN_PROGRESS) &&
              same(Code::kInvalidArgument, KOLO_ERR_INVALID_ARGUMENT) &&
              same(Code::kNotInitialized, KOLO_ERR_NOT_INITIALIZED) &&
              same(Code::kAlreadyInitialized, KOLO_ERR_ALREADY_INITIALIZED) &&
              same(Code::kDuplicateName, KOLO_ERR_DUPLICATE_NAME) &&
              same(Code::kMismatch, KOLO_ERR_MISMATCH) && same(Code::kShutdown, KOLO_ERR_SHUTDOWN) &&
              same(Code::kTimeout, KOLO_ERR_TIMEOUT) && same(Code::kStalled, KOLO_ERR_STALLED) &&
              same(Code::kUnsupported, KOLO_ERR_UNSUPPORTED) &&
              same(Code::kTransport, KOLO_ERR_TRANSPORT) && same(Code::kInternal, KOLO_ERR_INTERNAL) &&
              same(Code::kRankFailed, KOLO_ERR_RANK_FAILED) && same(Code::kLast, KOLO_ERR_RANK_FAILED),
              "kolo::Code and kolo_status_t differ");
static_assert(same(kolo::DataType::kUint8, KOLO_UINT8) && same(kolo::DataType::kInt8, KOLO_INT8) &&
              same(kolo::DataType::kUint16, KOLO_UINT16) &&
              same(kolo::DataType::kInt16, KOLO_INT16) && same(kolo::DataType::kInt32, KOLO_INT32) &&
              same(kolo::DataType::kInt64, KOLO_INT64) &&
              same(kolo::DataType::kFloat16, KOLO_FLOAT16) &&
              same(kolo::DataType::kBfloat16, KOLO_BFLOAT16) &&
              same(kolo::DataType::kFloat32, KOLO_FLOAT32) &&
              same(kolo::DataType::kFloat64, KOLO_FLOAT64) && same(kolo::DataType::kBool, KOLO_BOOL) &&
              kolo::kNumDataTypes == KOLO_BOOL + 1,
              "kolo::DataType and kolo_dtype_t differ");
static_assert(same(kolo::ReduceOp::kSum, KOLO_OP_SUM) &&
              same(kolo::ReduceOp::kAverage, KOLO_OP_AVERAGE) &&
              same(kolo::ReduceOp::kMin, KOLO_OP_MIN) && same(kolo::ReduceOp::kMax, KOLO_OP_MAX) &&
              same(kolo::ReduceOp::kProduct, KOLO_OP_PRODUCT) &&
              same(kolo::ReduceOp::kAdasum, KOLO_OP_ADASUM) &&
              kolo::kNumReduceOps == KOLO_OP_ADASUM + 1,
              "kolo::ReduceOp and kolo_op_t differ");
static_assert(same(kolo::DeviceKind::kCpu, KOLO_DEVICE_CPU) &&
              same(kolo::DeviceKind::kCuda, KOLO_DEVICE_CUDA),
              "kolo::DeviceKind and kolo_device_kind_t differ");


// What every rank must have alike (see Note [Knobs that must agree]): the knobs that
// must agree, and what else decides which transports exist and how buckets travel.
kolo::core::Fingerprint fingerprint_of(const kolo::Config& config) {
  kolo::core::Fingerprint f = kolo::core::fingerprint_of(config);
  std::string built;
  for (const kolo::transport::TransportInfo& t : kolo::transport::known_transports())
    if (t.built) built += (built.empty() ? "" : ",") + t.name;
  f.entries.push_back({"kolo version", KOLO_VERSION_STRING});
  f.entries.push_back({"transports built into kolo", built});
  return f;
}


// Note [kolo_init on a stopped kolo]
// Another rank's shutdown (or a failure) stops this rank's coordinator, but this
// rank's runtime stays until its own kolo_shutdown releases it. kolo_init then
// answers KOLO_ERR_SHUTDOWN, not KOLO_ERR_ALREADY_INITIALIZED: "already
// initialised" is what a binding may treat as success (kolo.init() does, as
// Horovod's hvd.init() does), and a stopped kolo must not pass for a running one.
// The socket world's options, from the configuration (kolo_init: from the
// environment; kolo_init_store: from its arguments). Empty: the MPI world.
using SocketOptions =
    std::function<Status(const kolo::Config&, kolo::socket::SocketWorldOptions*)>;

// Which world kolo_init starts (Note [Which world kolo_init starts] in
// transports/socket/launch_env.h): the socket world's options, or empty for MPI.
SocketOptions chosen_world(const kolo::Config& config) {
  std::string why;
  const bool socket = kolo::socket::choose_world(config, kolo::process_env(), &why) ==
                      kolo::socket::WorldChoice::kSocket;
  KOLO_LOG(kDebug) << "kolo_init: the " << (socket ? "socket" : "MPI") << " world (" << why << ")";
  if (!socket) return nullptr;
  return [](const kolo::Config& c, kolo::socket::SocketWorldOptions* o) {
    return kolo::socket::options_from_env(c, kolo::process_env(), o);
  };
}

// `socket` set: the socket world with those options; else the MPI world with
// `options`; `choose` (kolo_init): KOLO_WORLD and the launcher's variables decide.
kolo_status_t init_with(const kolo::mpi::WorldOptions& options, SocketOptions socket = nullptr,
                        bool choose = false) {
  std::lock_guard<std::mutex> lock(g_lifecycle_mu);
  if (g_runtime && g_runtime->running())
    return report(Code::kAlreadyInitialized, "kolo is already initialised in this process");
  if (g_runtime) {  // See Note [kolo_init on a stopped kolo]
    return report(Code::kShutdown,
                  "kolo was shut down by another rank (or stopped by a failure) and is not "
                  "running here; call kolo_shutdown on this rank before kolo_init");
  }
  // What this rank can check alone, it checks before anything is built; a failure
  // here is reported to every rank at the first exchange (Note [One verdict at init]).
  kolo::Config config;
  Status local = kolo::load_config(kolo::process_env(), &config);
  if (local.ok()) local = kolo::transport::validate_preference(config.transport);
  if (local.ok()) local = kolo::transport::validate_rules(config.select);
  if (local.ok()) kolo::log::set_level(config.log_level);
  kolo::transport::World world;
  kolo::mpi::WorldOptions with_config = options;
  with_config.test_node_size = config.test_node_size;
  with_config.build.fusion_bytes = kolo::core::fusion_capacity(config);
  with_config.build.shm_slot_bytes = kolo::core::shm_slot_capacity(config);
  with_config.build.hierarchical_allreduce = config.hierarchical_allreduce;
  with_config.peer_timeout = std::chrono::milliseconds(
      static_cast<int64_t>(config.peer_timeout_seconds * 1000.0));
  const kolo::core::Fingerprint fingerprint = fingerprint_of(config);
  with_config.agree = [&local, &fingerprint](kolo::transport::ControlPlane& control) {
    return kolo::core::agree_at_init(control, local, fingerprint);
  };
  // How this rank finds the others, even when another knob is bad.
  kolo::Config meeting = config;
  if (!local.ok() && !kolo::load_config(kolo::socket::meeting_env(kolo::process_env()), &meeting).ok())
    meeting = kolo::Config();
  if (choose) socket = chosen_world(meeting);
  if (socket) {
    kolo::socket::SocketWorldOptions socket_options;
    Status s = socket(meeting, &socket_options);
    if (!s.ok()) return report(s);
    socket_options.build = with_config.build;
    socket_options.agree = with_config.agree;
    s = kolo::socket::create_world(socket_options, &world);
    if (!s.ok()) return report(s);
  } else if (Status s = kolo::mpi::create_world(with_config, &world); !s.ok()) {
    return report(s);
  }
  std::unique_ptr<kolo::core::Runtime> runtime;
  if (Status s = kolo::core::Runtime::start(std::move(world), config, &runtime); !s.ok())
    return report(s);
  g_runtime = std::move(runtime);
  return report(Status::OK());
}


int topology_value(int kolo::transport::Topology::*field) {
  return guarded(-1, [&] {
    if (!g_runtime) {
      not_initialized();
      return -1;
    }
    return g_runtime->topology().*field;
  });
}

}  // namespace

extern "C" {

kolo_status_t kolo_init(void) {
  return guarded([] {
    kolo::mpi::WorldOptions options;
    return init_with(options, nullptr, true);
  });
}

kolo_status_t kolo_init_store(const char* address, int port, int rank, int size,
                              const char* job_token, int64_t generation) {
  return guarded([&] {
    if (address == nullptr) return invalid("address is NULL (the store's host, or file:<directory>)");
    const std::string where = address;
    const std::string token = job_token == nullptr ? std::string() : std::string(job_token);
    return init_with(kolo::mpi::WorldOptions{}, [=](const kolo::Config& c,
                                                    kolo::socket::SocketWorldOptions* o) {
      return kolo::socket::options_for_store(c, kolo::process_env(), where, port, rank, size,
                                             token, generation, o);
    });
  });
}

kolo_status_t kolo_init_comm(int64_t mpi_comm_fortran_handle) {
  return guarded([&] {
    // MPI_Fint is a C int in MPICH and Open MPI; a wider value would be truncated
    // into some other communicator.
    if (mpi_comm_fortran_handle < std::numeric_limits<int32_t>::min() ||
        mpi_comm_fortran_handle > std::numeric_limits<int32_t>::max())
      return invalid("communicator handle " + std::to_string(mpi_comm_fortran_handle) +
                     " is not a Fortran handle (MPI_Comm_c2f gives a 32-bit MPI_Fint)");
    kolo::mpi::WorldOptions options;
    options.comm_fortran_handle = mpi_comm_fortran_handle;
    return init_with(options);
  });
}

kolo_status_t kolo_shutdown(void) {
  return guarded([] {
    std::lock_guard<std::mutex> lock(g_lifecycle_mu);
    if (g_runtime) {
      g_runtime->shutdown();
      g_runtime.reset();
    }
    return report(Status::OK());
  });
}

int kolo_is_initialized(void) {
  return guarded(0, [] { return g_runtime && g_runtime->running() ? 1 : 0; });
}

int kolo_rank(void) { return topology_value(&kolo::transport::Topology::rank); }
int kolo_size(void) { return topology_value(&kolo::transport::Topology::size); }
int kolo_local_rank(void) { return topology_value(&kolo::transport::Topology::local_rank); }
int kolo_local_size(void) { return topology_value(&kolo::transport::Topology::local_size); }
int kolo_cross_rank(void) { return topology_value(&kolo::transport::Topology::cross_rank); }
int kolo_cross_size(void) { return topology_value(&kolo::transport::Topology::cross_size); }

const char* kolo_status_string(kolo_status_t status) {
  return guarded("KOLO_ERR_UNKNOWN", [&] { return kolo::code_name(static_cast<Code>(status)); });
}

const char* kolo_last_error(void) {
  return guarded("", [] { return kolo::c_api::last_error(); });
}

size_t kolo_dtype_size(kolo_dtype_t dtype) {
  return guarded(size_t{0}, [&] { return kolo::dtype_size(static_cast<kolo::DataType>(dtype)); });
}

kolo_status_t kolo_alloc(size_t bytes, void** out) {
  return guarded([&] {
    if (out == nullptr) return report(kolo::invalid_argument("kolo_alloc: out is NULL"));
    return report(kolo::shm::shared_alloc(bytes, out));
  });
}

kolo_status_t kolo_free(void* ptr) {
  return guarded([&] { return report(kolo::shm::shared_free(ptr)); });
}
}  // extern "C"
