#include "bench/perf_kolo.h"

#include <kolo/kolo.h>

#include <cstdlib>

#include "bench/perf_mpi.h"

namespace kolo::bench {
namespace {

std::string describe(kolo_status_t status, const char* message) {
  std::string text = kolo_status_string(status);
  if (message != nullptr && *message != '\0') text += std::string(": ") + message;
  return text;
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

std::string effective_transport() {
  const char* value = std::getenv("KOLO_TRANSPORT");
  return value != nullptr && *value != '\0' ? value : "auto";
}

void kolo_allreduce(MPI_Comm comm, const std::string& name, const void* in, void* out,
                    int64_t count, DataType dtype, ReduceOp op) {
  const kolo_device_t cpu{KOLO_DEVICE_CPU, 0, nullptr};
  kolo_handle_t handle = nullptr;
  kolo_status_t status =
      kolo_allreduce_async(name.c_str(), in, out, count, static_cast<kolo_dtype_t>(dtype),
                           static_cast<kolo_op_t>(op), 1.0, 1.0, cpu, &handle);
  if (status != KOLO_OK) {
    abort_job(comm, "kolo_allreduce_async", describe(status, kolo_last_error()).c_str());
  }
  status = kolo_wait(handle, -1.0);
  if (status != KOLO_OK) {
    std::string text = describe(status, kolo_handle_message(handle));
    kolo_handle_release(handle);
    abort_job(comm, "kolo_wait", text.c_str());
  }
  kolo_handle_release(handle);
}

}  // namespace kolo::bench
