// The C API (include/kolo/kolo.h) over core::Runtime and the MPI world.
//
// No exception crosses this boundary: every entry point catches and reports
// KOLO_ERR_INTERNAL. The calling thread's last error message is kept in a
// thread-local string.
#include "kolo/kolo.h"

#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <string>

#include "common/knobs.h"
#include "common/status.h"
#include "core/collective_args.h"
#include "core/runtime.h"
#include "transports/mpi/mpi_world.h"

struct kolo_handle {
  std::shared_ptr<kolo::core::HandleState> state;
};

namespace {

using kolo::Code;
using kolo::Status;

thread_local std::string t_last_error;
std::mutex g_lifecycle_mu;                        // kolo_init / kolo_shutdown
std::unique_ptr<kolo::core::Runtime> g_runtime;  // set while initialised

kolo_status_t report(const Status& s) {
  t_last_error = s.ok() ? std::string() : s.message();
  return static_cast<kolo_status_t>(s.code());
}

kolo_status_t report(Code code, const std::string& message) { return report(Status(code, message)); }

template <typename F>
kolo_status_t guarded(F&& f) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return report(Code::kInternal, "out of memory");
  } catch (const std::exception& e) {
    return report(Code::kInternal, std::string("unexpected exception: ") + e.what());
  } catch (...) {
    return report(Code::kInternal, "unexpected exception");
  }
}

kolo_status_t not_initialized() {
  return report(Code::kNotInitialized, "kolo is not initialised (call kolo_init first)");
}

kolo_status_t init_with(const kolo::mpi::WorldOptions& options) {
  std::lock_guard<std::mutex> lock(g_lifecycle_mu);
  if (g_runtime) {
    return report(Code::kAlreadyInitialized,
                  g_runtime->running()
                      ? "kolo is already initialised"
                      : "kolo was shut down by another rank; call kolo_shutdown before kolo_init");
  }
  kolo::Config config;
  if (Status s = kolo::load_config(kolo::process_env(), &config); !s.ok()) return report(s);
  kolo::transport::World world;
  kolo::mpi::WorldOptions with_config = options;
  with_config.fusion_bytes = static_cast<size_t>(config.fusion_threshold_bytes);
  with_config.hierarchical_allreduce = config.hierarchical_allreduce;
  if (Status s = kolo::mpi::create_world(with_config, &world); !s.ok()) return report(s);
  std::unique_ptr<kolo::core::Runtime> runtime;
  if (Status s = kolo::core::Runtime::start(std::move(world), config, &runtime); !s.ok())
    return report(s);
  g_runtime = std::move(runtime);
  return report(Status::OK());
}

// KOLO_TEST_NODE_SIZE: test-only; see transports/mpi/mpi_world.h.
int test_node_size() {
  const char* v = std::getenv("KOLO_TEST_NODE_SIZE");
  return v ? std::atoi(v) : 0;
}

kolo::Device device_of(kolo_device_t d) {
  return kolo::Device{static_cast<kolo::DeviceKind>(d.kind), d.index, d.stream};
}

// Enqueues `args` and hands back a new handle.
kolo_status_t submit(kolo::core::CollectiveArgs args, kolo_handle_t* handle) {
  if (handle == nullptr) return report(Code::kInvalidArgument, "handle pointer is NULL");
  *handle = nullptr;
  if (!g_runtime) return not_initialized();
  std::shared_ptr<kolo::core::HandleState> state;
  if (Status s = g_runtime->submit(std::move(args), &state); !s.ok()) return report(s);
  *handle = new kolo_handle{std::move(state)};
  return report(Status::OK());
}

// The collectives' common preamble: checks the name, fills the fields every
// collective has, lets `fill` set the rest, and submits.
template <typename Fill>
kolo_status_t submit_named(kolo::core::Collective collective, const char* name,
                           kolo_dtype_t dtype, kolo_device_t device, kolo_handle_t* handle,
                           Fill fill) {
  if (name == nullptr) return report(Code::kInvalidArgument, "name is NULL");
  kolo::core::CollectiveArgs a;
  a.collective = collective;
  a.name = name;
  a.dtype = static_cast<kolo::DataType>(dtype);
  a.device = device_of(device);
  fill(a);
  return submit(std::move(a), handle);
}

// Submits and waits; for the blocking calls (barrier, join).
kolo_status_t submit_and_wait(kolo::core::CollectiveArgs args, kolo_handle_t* out) {
  kolo_handle_t h = nullptr;
  kolo_status_t s = submit(std::move(args), &h);
  if (s != KOLO_OK) return s;
  h->state->wait(-1.0);
  *out = h;
  return report(Status(h->state->code(), h->state->message()));
}

int topology_value(int kolo::transport::Topology::*field) {
  if (!g_runtime) {
    not_initialized();
    return -1;
  }
  return g_runtime->topology().*field;
}

}  // namespace

extern "C" {

kolo_status_t kolo_init(void) {
  return guarded([] {
    kolo::mpi::WorldOptions options;
    options.test_node_size = test_node_size();
    return init_with(options);
  });
}

kolo_status_t kolo_init_comm(int64_t mpi_comm_fortran_handle) {
  return guarded([&] {
    kolo::mpi::WorldOptions options;
    options.comm_fortran_handle = mpi_comm_fortran_handle;
    options.test_node_size = test_node_size();
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

int kolo_is_initialized(void) { return g_runtime && g_runtime->running() ? 1 : 0; }

int kolo_rank(void) { return topology_value(&kolo::transport::Topology::rank); }
int kolo_size(void) { return topology_value(&kolo::transport::Topology::size); }
int kolo_local_rank(void) { return topology_value(&kolo::transport::Topology::local_rank); }
int kolo_local_size(void) { return topology_value(&kolo::transport::Topology::local_size); }
int kolo_cross_rank(void) { return topology_value(&kolo::transport::Topology::cross_rank); }
int kolo_cross_size(void) { return topology_value(&kolo::transport::Topology::cross_size); }

const char* kolo_status_string(kolo_status_t status) {
  return kolo::code_name(static_cast<Code>(status));
}

const char* kolo_last_error(void) { return t_last_error.c_str(); }

size_t kolo_dtype_size(kolo_dtype_t dtype) {
  return kolo::dtype_size(static_cast<kolo::DataType>(dtype));
}

kolo_status_t kolo_allreduce_async(const char* name, const void* input, void* output,
                                   int64_t count, kolo_dtype_t dtype, kolo_op_t op,
                                   double prescale, double postscale, kolo_device_t device,
                                   kolo_handle_t* handle) {
  return guarded([&] {
    return submit_named(kolo::core::Collective::kAllreduce, name, dtype, device, handle,
                        [&](kolo::core::CollectiveArgs& a) {
                          a.input = input;
                          a.output = output;
                          a.rows = count;
                          a.op = static_cast<kolo::ReduceOp>(op);
                          a.prescale = prescale;
                          a.postscale = postscale;
                        });
  });
}

kolo_status_t kolo_allgather_async(const char* name, const void* input, int64_t rows,
                                   int64_t row_count, kolo_dtype_t dtype, kolo_device_t device,
                                   kolo_handle_t* handle) {
  return guarded([&] {
    return submit_named(kolo::core::Collective::kAllgather, name, dtype, device, handle,
                        [&](kolo::core::CollectiveArgs& a) {
                          a.input = input;
                          a.rows = rows;
                          a.row_count = row_count;
                        });
  });
}

kolo_status_t kolo_broadcast_async(const char* name, const void* input, void* output, int64_t count,
                                   kolo_dtype_t dtype, int root, kolo_device_t device,
                                   kolo_handle_t* handle) {
  return guarded([&] {
    return submit_named(kolo::core::Collective::kBroadcast, name, dtype, device, handle,
                        [&](kolo::core::CollectiveArgs& a) {
                          a.input = input;
                          a.output = output;
                          a.rows = count;
                          a.root = root;
                        });
  });
}

kolo_status_t kolo_alltoall_async(const char* name, const void* input, int64_t rows,
                                  int64_t row_count, const int64_t* send_splits, kolo_dtype_t dtype,
                                  kolo_device_t device, kolo_handle_t* handle) {
  return guarded([&] {
    return submit_named(kolo::core::Collective::kAlltoall, name, dtype, device, handle,
                        [&](kolo::core::CollectiveArgs& a) {
                          a.input = input;
                          a.rows = rows;
                          a.row_count = row_count;
                          a.splits = send_splits;
                        });
  });
}

kolo_status_t kolo_reducescatter_async(const char* name, const void* input, void* output,
                                       int64_t rows, int64_t row_count, kolo_dtype_t dtype,
                                       kolo_op_t op, double prescale, double postscale,
                                       kolo_device_t device, kolo_handle_t* handle) {
  return guarded([&] {
    return submit_named(kolo::core::Collective::kReducescatter, name, dtype, device, handle,
                        [&](kolo::core::CollectiveArgs& a) {
                          a.input = input;
                          a.output = output;
                          a.rows = rows;
                          a.row_count = row_count;
                          a.op = static_cast<kolo::ReduceOp>(op);
                          a.prescale = prescale;
                          a.postscale = postscale;
                        });
  });
}

int64_t kolo_reducescatter_shard_rows(int64_t rows, int rank, int size) {
  if (rows < 0 || size <= 0 || rank < 0 || rank >= size) return -1;
  return kolo::core::shard_rows(rows, rank, size);
}

kolo_status_t kolo_grouped_allreduce_async(int n, const char* const* names,
                                           const void* const* inputs, void* const* outputs,
                                           const int64_t* counts, kolo_dtype_t dtype, kolo_op_t op,
                                           double prescale, double postscale, kolo_device_t device,
                                           kolo_handle_t* handle) {
  return guarded([&] {
    if (n < 0) return report(Code::kInvalidArgument, "negative group size");
    if (n > 0 && (names == nullptr || inputs == nullptr || outputs == nullptr || counts == nullptr))
      return report(Code::kInvalidArgument, "names, inputs, outputs and counts must not be NULL");
    kolo::core::CollectiveArgs a;
    a.collective = kolo::core::Collective::kGroupedAllreduce;
    for (int i = 0; i < n; ++i) {
      if (names[i] == nullptr) return report(Code::kInvalidArgument, "a group member's name is NULL");
      a.member_names.emplace_back(names[i]);
      a.members.push_back({inputs[i], outputs[i], counts[i]});
    }
    a.dtype = static_cast<kolo::DataType>(dtype);
    a.op = static_cast<kolo::ReduceOp>(op);
    a.prescale = prescale;
    a.postscale = postscale;
    a.device = device_of(device);
    return submit(std::move(a), handle);
  });
}

kolo_status_t kolo_barrier(void) {
  return guarded([&] {
    if (!g_runtime) return not_initialized();
    kolo::core::CollectiveArgs a;
    a.collective = kolo::core::Collective::kBarrier;
    a.name = g_runtime->next_barrier_name();
    kolo_handle_t h = nullptr;
    kolo_status_t s = submit_and_wait(std::move(a), &h);
    kolo_handle_release(h);
    return s;
  });
}

kolo_status_t kolo_join(int* last_rank) {
  return guarded([&] {
    if (!g_runtime) return not_initialized();
    kolo::core::CollectiveArgs a;
    a.collective = kolo::core::Collective::kJoin;
    a.name = "kolo.join";
    kolo_handle_t h = nullptr;
    kolo_status_t s = submit_and_wait(std::move(a), &h);
    if (s == KOLO_OK && last_rank != nullptr && !h->state->splits.empty())
      *last_rank = static_cast<int>(h->state->splits[0]);
    kolo_handle_release(h);
    return s;
  });
}

kolo_status_t kolo_handle_output(kolo_handle_t handle, const void** data, int64_t* bytes) {
  if (handle == nullptr) return report(Code::kInvalidArgument, "handle is NULL");
  if (!handle->state->done())
    return report(Code::kInvalidArgument, "the operation has not completed yet");
  if (data) *data = handle->state->output.data();
  if (bytes) *bytes = static_cast<int64_t>(handle->state->output.size());
  return KOLO_OK;
}

kolo_status_t kolo_handle_stream_wait(kolo_handle_t handle, void* stream) {
  if (handle == nullptr) return report(Code::kInvalidArgument, "handle is NULL");
  if (!g_runtime) return not_initialized();
  return report(g_runtime->stream_wait(*handle->state, stream));
}

kolo_status_t kolo_handle_splits(kolo_handle_t handle, int64_t* splits, int n) {
  if (handle == nullptr) return report(Code::kInvalidArgument, "handle is NULL");
  if (!handle->state->done())
    return report(Code::kInvalidArgument, "the operation has not completed yet");
  const auto& s = handle->state->splits;
  for (int i = 0; i < n && i < static_cast<int>(s.size()); ++i) splits[i] = s[i];
  return KOLO_OK;
}

kolo_status_t kolo_poll(kolo_handle_t handle, int* done) {
  if (handle == nullptr || done == nullptr)
    return report(Code::kInvalidArgument, handle ? "done pointer is NULL" : "handle is NULL");
  *done = handle->state->done() ? 1 : 0;
  return KOLO_OK;
}

kolo_status_t kolo_wait(kolo_handle_t handle, double timeout_seconds) {
  return guarded([&] {
    if (handle == nullptr) return report(Code::kInvalidArgument, "handle is NULL");
    if (!handle->state->wait(timeout_seconds))
      return report(Code::kTimeout, "the operation did not complete within " +
                                        std::to_string(timeout_seconds) + " s");
    return report(Status(handle->state->code(), handle->state->message()));
  });
}

kolo_status_t kolo_handle_status(kolo_handle_t handle) {
  if (handle == nullptr) return report(Code::kInvalidArgument, "handle is NULL");
  return static_cast<kolo_status_t>(handle->state->code());
}

const char* kolo_handle_message(kolo_handle_t handle) {
  if (handle == nullptr) return "";
  return handle->state->message().c_str();
}

void kolo_handle_release(kolo_handle_t handle) { delete handle; }

}  // extern "C"
