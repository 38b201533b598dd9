#include "bench/perf_kolo.h"

#include <kolo/kolo.h>

#include <cstdlib>

#include "bench/perf_breakdown.h"
#include "bench/perf_mpi.h"

namespace kolo::bench {
namespace {

std::string describe(kolo_status_t status, const char* message) {
  std::string text = kolo_status_string(status);
  if (message != nullptr && *message != '\0') text += std::string(": ") + message;
  return text;
}

constexpr kolo_device_t kCpu{KOLO_DEVICE_CPU, 0, nullptr};

// --process-set: the options every operation passes, and the set's global ranks.
kolo_options_t g_options = KOLO_OPTIONS_INIT;
std::vector<int> g_set_ranks;
bool g_blocking = false;

// Waits for a submitted operation; aborts the job unless both steps succeeded.
CompletedHandle finish(MPI_Comm comm, const char* what, kolo_status_t submitted,
                       kolo_handle_t handle) {
  if (submitted != KOLO_OK) abort_job(comm, what, describe(submitted, kolo_last_error()).c_str());
  CompletedHandle owned(handle);
  kolo_status_t status = kolo_wait(handle, -1.0);
  if (status != KOLO_OK) {
    abort_job(comm, "kolo_wait", describe(status, kolo_handle_message(handle)).c_str());
  }
  breakdown_record(handle);
  return owned;
}

// A blocking call's outcome (--blocking); aborts the job unless it succeeded.
void check_blocking(MPI_Comm comm, const char* what, kolo_status_t status) {
  if (status != KOLO_OK) abort_job(comm, what, describe(status, kolo_last_error()).c_str());
}

}  // namespace

void start_kolo(MPI_Comm comm, const std::string& transport, const std::string& fusion_threshold) {
  if (!transport.empty()) setenv("KOLO_TRANSPORT", transport.c_str(), 1);
  if (fusion_threshold == "-") {
    unsetenv("KOLO_FUSION_THRESHOLD");
  } else if (!fusion_threshold.empty()) {
    setenv("KOLO_FUSION_THRESHOLD", fusion_threshold.c_str(), 1);
  }
  kolo_status_t status = kolo_init();
  if (status != KOLO_OK) {
    abort_job(comm, "kolo_init", describe(status, kolo_last_error()).c_str());
  }
}

void stop_kolo(MPI_Comm comm) {
  kolo_status_t status = kolo_shutdown();
  if (status != KOLO_OK) {
    abort_job(comm, "kolo_shutdown", describe(status, kolo_last_error()).c_str());
  }
}

MPI_Comm use_process_set(MPI_Comm comm, const std::vector<int>& ranks) {
  int32_t id = 0;
  kolo_status_t status = kolo_process_set_add(ranks.data(), static_cast<int>(ranks.size()), &id);
  if (status != KOLO_OK)
    abort_job(comm, "--process-set", describe(status, kolo_last_error()).c_str());
  g_options.process_set = id;
  g_set_ranks.assign(static_cast<size_t>(kolo_process_set_size(id)), 0);
  if (kolo_process_set_ranks(id, g_set_ranks.data(), static_cast<int>(g_set_ranks.size()),
                             nullptr) != KOLO_OK)
    abort_job(comm, "kolo_process_set_ranks", kolo_last_error());
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm members = MPI_COMM_NULL;
  MPI_Comm_split(comm, kolo_process_set_included(id) == 1 ? 0 : MPI_UNDEFINED, rank, &members);
  return members;
}

void set_blocking(bool on) { g_blocking = on; }

void set_deterministic(bool on) { g_options.flags = on ? KOLO_OPTION_DETERMINISTIC : 0; }

std::string effective_transport() {
  const char* value = std::getenv("KOLO_TRANSPORT");
  return value != nullptr && *value != '\0' ? value : "auto";
}

void kolo_allreduce(MPI_Comm comm, const std::string& name, const void* in, void* out,
                    int64_t count, DataType dtype, ReduceOp op, const kolo_device_t& device) {
  if (g_blocking) {
    return check_blocking(comm, "kolo_allreduce_ex",
                          kolo_allreduce_ex(name.c_str(), in, out, count,
                                            static_cast<kolo_dtype_t>(dtype),
                                            static_cast<kolo_op_t>(op), 1.0, 1.0, device,
                                            &g_options));
  }
  kolo_handle_t handle = nullptr;
  breakdown_call_started();
  kolo_status_t status =
      kolo_allreduce_async_ex(name.c_str(), in, out, count, static_cast<kolo_dtype_t>(dtype),
                              static_cast<kolo_op_t>(op), 1.0, 1.0, device, &g_options, &handle);
  if (status != KOLO_OK) {
    abort_job(comm, "kolo_allreduce_async", describe(status, kolo_last_error()).c_str());
  }
  status = kolo_wait(handle, -1.0);
  if (status != KOLO_OK) {
    std::string text = describe(status, kolo_handle_message(handle));
    kolo_handle_release(handle);
    abort_job(comm, "kolo_wait", text.c_str());
  }
  breakdown_record(handle);
  kolo_handle_release(handle);
}

const char* handle_output(const CompletedHandle& handle, int64_t* bytes) {
  const void* data = nullptr;
  *bytes = 0;
  if (kolo_handle_output(handle.get(), &data, bytes) != KOLO_OK) *bytes = -1;
  return static_cast<const char*>(data);
}

CompletedHandle kolo_allgather(MPI_Comm comm, const std::string& name, const void* in,
                               int64_t count_per_rank, DataType dtype, void* into) {
  kolo_handle_t handle = nullptr;
  if (into != nullptr && g_blocking) {
    check_blocking(comm, "kolo_allgather_into_ex",
                   ::kolo_allgather_into_ex(name.c_str(), in, into, count_per_rank, 1,
                                            static_cast<kolo_dtype_t>(dtype), kCpu, &g_options));
    return CompletedHandle();
  }
  if (into != nullptr) {
    breakdown_call_started();
    const kolo_status_t status = ::kolo_allgather_into_async_ex(
        name.c_str(), in, into, count_per_rank, 1, static_cast<kolo_dtype_t>(dtype), kCpu,
        &g_options, &handle);
    finish(comm, "kolo_allgather_into_async_ex", status, handle);
    return CompletedHandle();
  }
  if (g_blocking) {
    check_blocking(comm, "kolo_allgather_ex",
                   ::kolo_allgather_ex(name.c_str(), in, count_per_rank, 1,
                                       static_cast<kolo_dtype_t>(dtype), kCpu, &g_options,
                                       &handle));
    return CompletedHandle(handle);
  }
  breakdown_call_started();
  kolo_status_t status =
      kolo_allgather_async_ex(name.c_str(), in, count_per_rank, 1, static_cast<kolo_dtype_t>(dtype),
                              kCpu, &g_options, &handle);
  return finish(comm, "kolo_allgather_async", status, handle);
}

CompletedHandle kolo_alltoall(MPI_Comm comm, const std::string& name, const void* in,
                              int64_t count_per_peer, int world_size, DataType dtype) {
  kolo_handle_t handle = nullptr;
  if (g_blocking) {
    check_blocking(comm, "kolo_alltoall_ex",
                   ::kolo_alltoall_ex(name.c_str(), in, count_per_peer * world_size, 1,
                                      /*send_splits=*/nullptr, static_cast<kolo_dtype_t>(dtype),
                                      kCpu, &g_options, &handle));
    return CompletedHandle(handle);
  }
  breakdown_call_started();
  kolo_status_t status =
      kolo_alltoall_async_ex(name.c_str(), in, count_per_peer * world_size, 1,
                             /*send_splits=*/nullptr, static_cast<kolo_dtype_t>(dtype), kCpu,
                             &g_options, &handle);
  return finish(comm, "kolo_alltoall_async", status, handle);
}

void kolo_broadcast(MPI_Comm comm, const std::string& name, void* buffer, int64_t count,
                    DataType dtype, int root) {
  kolo_handle_t handle = nullptr;
  const int global_root = g_set_ranks.empty() ? root : g_set_ranks[static_cast<size_t>(root)];
  if (g_blocking) {
    return check_blocking(comm, "kolo_broadcast_ex",
                          ::kolo_broadcast_ex(name.c_str(), buffer, buffer, count,
                                              static_cast<kolo_dtype_t>(dtype), global_root, kCpu,
                                              &g_options));
  }
  breakdown_call_started();
  kolo_status_t status =
      kolo_broadcast_async_ex(name.c_str(), buffer, buffer, count, static_cast<kolo_dtype_t>(dtype),
                              global_root, kCpu, &g_options, &handle);
  finish(comm, "kolo_broadcast_async", status, handle);
}

void kolo_reducescatter(MPI_Comm comm, const std::string& name, const void* in, void* out,
                        int64_t count_per_rank, int world_size, DataType dtype, ReduceOp op) {
  kolo_handle_t handle = nullptr;
  if (g_blocking) {
    return check_blocking(comm, "kolo_reducescatter_ex",
                          ::kolo_reducescatter_ex(name.c_str(), in, out,
                                                  count_per_rank * world_size, 1,
                                                  static_cast<kolo_dtype_t>(dtype),
                                                  static_cast<kolo_op_t>(op), 1.0, 1.0, kCpu,
                                                  &g_options));
  }
  breakdown_call_started();
  kolo_status_t status = kolo_reducescatter_async_ex(
      name.c_str(), in, out, count_per_rank * world_size, 1, static_cast<kolo_dtype_t>(dtype),
      static_cast<kolo_op_t>(op), 1.0, 1.0, kCpu, &g_options, &handle);
  finish(comm, "kolo_reducescatter_async", status, handle);
}

}  // namespace kolo::bench
