// The C API's operations (include/kolo/kolo.h): every collective, asynchronous
// and blocking, the grouped calls, barrier and join, each a CollectiveArgs for
// core::Runtime. The same rules as c_api.cc: every entry point runs inside
// guarded() (firewall.h), bad input is refused before anything is touched, and
// a call that produces a handle sets *handle to NULL first.
#include "kolo/kolo.h"

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>

#include "bindings/c/c_api_state.h"
#include "bindings/c/firewall.h"
#include "bindings/c/options.h"
#include "common/check.h"
#include "common/collective.h"
#include "common/status.h"
#include "core/collective_args.h"
#include "core/runtime.h"

namespace {

using kolo::Status;
using kolo::c_api::g_runtime;
using kolo::c_api::guarded;
using kolo::c_api::invalid;
using kolo::c_api::not_initialized;
using kolo::c_api::read_options;
using kolo::c_api::report;

kolo::Device device_of(kolo_device_t d) {
  return kolo::Device{static_cast<kolo::DeviceKind>(d.kind), d.index, d.stream};
}

// The first step of every call that produces a handle: refuses a NULL
// out-pointer, and makes *handle NULL so that every later failure leaves it so.
bool take_handle_pointer(kolo_handle_t* handle) {
  if (handle == nullptr) {
    invalid("handle is NULL (the kolo_handle_t* that receives the new handle)");
    return false;
  }
  *handle = nullptr;
  return true;
}

// Enqueues `args` and hands back a new handle; *handle is already NULL.
kolo_status_t submit(kolo::core::CollectiveArgs args, kolo_handle_t* handle) {
  if (!g_runtime) return not_initialized();
  std::shared_ptr<kolo::core::HandleState> state;
  if (Status s = g_runtime->submit(std::move(args), &state); !s.ok()) return report(s);
  *handle = new kolo_handle{std::move(state)};
  return report(Status::OK());
}

// The collectives' common preamble: checks the name, fills the fields every
// collective has and lets `fill` set the rest.
template <typename Fill>
kolo_status_t named_args(kolo::Collective collective, const char* name, kolo_dtype_t dtype,
                         kolo_device_t device, const kolo_options_t* options, Fill fill,
                         kolo::core::CollectiveArgs* a) {
  if (name == nullptr) return invalid("name is NULL");
  a->collective = collective;
  a->name = name;
  a->dtype = static_cast<kolo::DataType>(dtype);
  a->device = device_of(device);
  fill(*a);
  auto owner = [a] { return "tensor '" + a->name + "'"; };
  return read_options(options, 1, owner, a);
}

template <typename Fill>
kolo_status_t submit_named(kolo::Collective collective, const char* name,
                           kolo_dtype_t dtype, kolo_device_t device,
                           const kolo_options_t* options, kolo_handle_t* handle, Fill fill) {
  if (!take_handle_pointer(handle)) return KOLO_ERR_INVALID_ARGUMENT;
  kolo::core::CollectiveArgs a;
  if (kolo_status_t s = named_args(collective, name, dtype, device, options, fill, &a); s != KOLO_OK)
    return s;
  return submit(std::move(a), handle);
}

// A reduction's own fields (the allreduce's, asynchronous and blocking, and the
// reducescatter's but its row_count).
auto reduction_fields(const void* input, void* output, int64_t count, kolo_op_t op,
                      double prescale, double postscale) {
  return [=](kolo::core::CollectiveArgs& a) {
    a.input = input;
    a.output = output;
    a.rows = count;
    a.op = static_cast<kolo::ReduceOp>(op);
    a.prescale = prescale;
    a.postscale = postscale;
  };
}

// The other collectives' own fields, asynchronous and blocking alike.
auto gather_fields(const void* input, int64_t rows, int64_t row_count,
                   const int64_t* send_splits) {
  return [=](kolo::core::CollectiveArgs& a) {
    a.input = input;
    a.rows = rows;
    a.row_count = row_count;
    a.send_rows = send_splits;
  };
}

// kolo_allgather_into's: the rows gathered into the caller's output.
auto into_fields(const void* input, void* output, int64_t rows, int64_t row_count) {
  return [=](kolo::core::CollectiveArgs& a) {
    gather_fields(input, rows, row_count, nullptr)(a);
    a.output = output;
    a.into = true;
  };
}

auto broadcast_fields(const void* input, void* output, int64_t count, int root) {
  return [=](kolo::core::CollectiveArgs& a) {
    a.input = input;
    a.output = output;
    a.rows = count;
    a.root = root;
  };
}

auto scatter_fields(const void* input, void* output, int64_t rows, int64_t row_count,
                    kolo_op_t op, double prescale, double postscale) {
  return [=](kolo::core::CollectiveArgs& a) {
    reduction_fields(input, output, rows, op, prescale, postscale)(a);
    a.row_count = row_count;
  };
}

// A blocking call: the operation runs to its end (Runtime::run), and its outcome
// is the status. `out`, for the calls whose output is the handle's (allgather,
// alltoall): the completed handle on KOLO_OK, NULL otherwise.
template <typename Fill>
kolo_status_t run_named(kolo::Collective collective, const char* name, kolo_dtype_t dtype,
                        kolo_device_t device, const kolo_options_t* options, Fill fill,
                        kolo_handle_t* out = nullptr) {
  kolo::core::CollectiveArgs a;
  if (kolo_status_t s = named_args(collective, name, dtype, device, options, fill, &a); s != KOLO_OK)
    return s;
  if (!g_runtime) return not_initialized();
  std::shared_ptr<kolo::core::HandleState> state;
  if (Status s = g_runtime->run(std::move(a), &state); !s.ok() || state == nullptr) return report(s);
  Status outcome(state->code(), state->message());
  if (out != nullptr && outcome.ok()) *out = new kolo_handle{std::move(state)};
  return report(outcome);
}

// As run_named, for the calls whose output is the handle's.
template <typename Fill>
kolo_status_t run_named_to_handle(kolo::Collective collective, const char* name,
                                  kolo_dtype_t dtype, kolo_device_t device,
                                  const kolo_options_t* options, kolo_handle_t* handle, Fill fill) {
  if (!take_handle_pointer(handle)) return KOLO_ERR_INVALID_ARGUMENT;
  const kolo_status_t s = run_named(collective, name, dtype, device, options, fill, handle);
  KOLO_CHECK(s != KOLO_OK || *handle != nullptr);  // the output is on the handle
  return s;
}

// The grouped calls' common part: checks n, names and the per-member arrays
// (each named, as the caller knows it), lets `member` add member i, reads the
// options (one shape per member) and submits.
template <typename Member>
kolo_status_t submit_group(kolo::Collective collective, int n, const char* const* names,
                           std::initializer_list<std::pair<const char*, const void*>> arrays,
                           kolo_dtype_t dtype, kolo_device_t device,
                           const kolo_options_t* options, kolo_handle_t* handle, Member member) {
  if (!take_handle_pointer(handle)) return KOLO_ERR_INVALID_ARGUMENT;
  if (n < 0) return invalid("n is negative (" + std::to_string(n) + "): the group size");
  if (n > 0 && names == nullptr) return invalid("names is NULL");
  for (const auto& [what, array] : arrays)
    if (n > 0 && array == nullptr) return invalid(std::string(what) + " is NULL");
  kolo::core::CollectiveArgs a;
  a.collective = collective;
  for (int i = 0; i < n; ++i) {
    if (names[i] == nullptr) return invalid("names[" + std::to_string(i) + "] is NULL");
    a.member_names.emplace_back(names[i]);
    member(a, i);
  }
  if (n > 0) {
    auto owner = [collective] { return std::string(kolo::collective_name(collective)); };
    kolo_status_t s = read_options(options, n, owner, &a);
    if (s != KOLO_OK) return s;
  }
  a.dtype = static_cast<kolo::DataType>(dtype);
  a.device = device_of(device);
  return submit(std::move(a), handle);
}

// Submits and waits; for the blocking calls (barrier, join).
kolo_status_t submit_and_wait(kolo::core::CollectiveArgs args, kolo_handle_t* out) {
  if (!g_runtime) return not_initialized();
  std::shared_ptr<kolo::core::HandleState> state;
  if (Status s = g_runtime->run(std::move(args), &state); !s.ok()) return report(s);
  KOLO_CHECK(state != nullptr);  // barriers and joins never complete alone
  *out = new kolo_handle{state};
  return report(Status(state->code(), state->message()));
}

}  // namespace

extern "C" {

kolo_status_t kolo_allreduce_async(const char* name, const void* input, void* output,
                                   int64_t count, kolo_dtype_t dtype, kolo_op_t op,
                                   double prescale, double postscale, kolo_device_t device,
                                   kolo_handle_t* handle) {
  return kolo_allreduce_async_ex(name, input, output, count, dtype, op, prescale, postscale,
                                 device, nullptr, handle);
}

kolo_status_t kolo_allreduce_async_ex(const char* name, const void* input, void* output,
                                      int64_t count, kolo_dtype_t dtype, kolo_op_t op,
                                      double prescale, double postscale, kolo_device_t device,
                                      const kolo_options_t* options, kolo_handle_t* handle) {
  return guarded([&] {
    return submit_named(kolo::Collective::kAllreduce, name, dtype, device, options, handle,
                        reduction_fields(input, output, count, op, prescale, postscale));
  });
}

kolo_status_t kolo_allreduce(const char* name, const void* input, void* output, int64_t count,
                             kolo_dtype_t dtype, kolo_op_t op) {
  return kolo_allreduce_ex(name, input, output, count, dtype, op, 1.0, 1.0,
                           kolo_device_t{KOLO_DEVICE_CPU, 0, nullptr}, nullptr);
}

kolo_status_t kolo_allreduce_ex(const char* name, const void* input, void* output, int64_t count,
                                kolo_dtype_t dtype, kolo_op_t op, double prescale,
                                double postscale, kolo_device_t device,
                                const kolo_options_t* options) {
  return guarded([&] {
    return run_named(kolo::Collective::kAllreduce, name, dtype, device, options,
                     reduction_fields(input, output, count, op, prescale, postscale));
  });
}

kolo_status_t kolo_allgather_async(const char* name, const void* input, int64_t rows,
                                   int64_t row_count, kolo_dtype_t dtype, kolo_device_t device,
                                   kolo_handle_t* handle) {
  return kolo_allgather_async_ex(name, input, rows, row_count, dtype, device, nullptr, handle);
}

kolo_status_t kolo_allgather_async_ex(const char* name, const void* input, int64_t rows,
                                      int64_t row_count, kolo_dtype_t dtype, kolo_device_t device,
                                      const kolo_options_t* options, kolo_handle_t* handle) {
  return guarded([&] {
    return submit_named(kolo::Collective::kAllgather, name, dtype, device, options, handle,
                        gather_fields(input, rows, row_count, nullptr));
  });
}

kolo_status_t kolo_allgather(const char* name, const void* input, int64_t rows,
                             int64_t row_count, kolo_dtype_t dtype, kolo_handle_t* handle) {
  return kolo_allgather_ex(name, input, rows, row_count, dtype,
                           kolo_device_t{KOLO_DEVICE_CPU, 0, nullptr}, nullptr, handle);
}

kolo_status_t kolo_allgather_ex(const char* name, const void* input, int64_t rows,
                                int64_t row_count, kolo_dtype_t dtype, kolo_device_t device,
                                const kolo_options_t* options, kolo_handle_t* handle) {
  return guarded([&] {
    return run_named_to_handle(kolo::Collective::kAllgather, name, dtype, device, options,
                               handle, gather_fields(input, rows, row_count, nullptr));
  });
}

kolo_status_t kolo_allgather_into(const char* name, const void* input, void* output, int64_t rows,
                                  int64_t row_count, kolo_dtype_t dtype) {
  return kolo_allgather_into_ex(name, input, output, rows, row_count, dtype,
                                kolo_device_t{KOLO_DEVICE_CPU, 0, nullptr}, nullptr);
}

kolo_status_t kolo_allgather_into_ex(const char* name, const void* input, void* output,
                                     int64_t rows, int64_t row_count, kolo_dtype_t dtype,
                                     kolo_device_t device, const kolo_options_t* options) {
  return guarded([&] {
    return run_named(kolo::Collective::kAllgather, name, dtype, device, options,
                     into_fields(input, output, rows, row_count));
  });
}

kolo_status_t kolo_allgather_into_async(const char* name, const void* input, void* output,
                                        int64_t rows, int64_t row_count, kolo_dtype_t dtype,
                                        kolo_device_t device, kolo_handle_t* handle) {
  return kolo_allgather_into_async_ex(name, input, output, rows, row_count, dtype, device, nullptr,
                                      handle);
}

kolo_status_t kolo_allgather_into_async_ex(const char* name, const void* input, void* output,
                                           int64_t rows, int64_t row_count, kolo_dtype_t dtype,
                                           kolo_device_t device, const kolo_options_t* options,
                                           kolo_handle_t* handle) {
  return guarded([&] {
    return submit_named(kolo::Collective::kAllgather, name, dtype, device, options, handle,
                        into_fields(input, output, rows, row_count));
  });
}

kolo_status_t kolo_broadcast_async(const char* name, const void* input, void* output, int64_t count,
                                   kolo_dtype_t dtype, int root, kolo_device_t device,
                                   kolo_handle_t* handle) {
  return kolo_broadcast_async_ex(name, input, output, count, dtype, root, device, nullptr, handle);
}

kolo_status_t kolo_broadcast_async_ex(const char* name, const void* input, void* output,
                                      int64_t count, kolo_dtype_t dtype, int root,
                                      kolo_device_t device, const kolo_options_t* options,
                                      kolo_handle_t* handle) {
  return guarded([&] {
    return submit_named(kolo::Collective::kBroadcast, name, dtype, device, options, handle,
                        broadcast_fields(input, output, count, root));
  });
}

kolo_status_t kolo_broadcast(const char* name, const void* input, void* output, int64_t count,
                             kolo_dtype_t dtype, int root) {
  return kolo_broadcast_ex(name, input, output, count, dtype, root,
                           kolo_device_t{KOLO_DEVICE_CPU, 0, nullptr}, nullptr);
}

kolo_status_t kolo_broadcast_ex(const char* name, const void* input, void* output, int64_t count,
                                kolo_dtype_t dtype, int root, kolo_device_t device,
                                const kolo_options_t* options) {
  return guarded([&] {
    return run_named(kolo::Collective::kBroadcast, name, dtype, device, options,
                     broadcast_fields(input, output, count, root));
  });
}

kolo_status_t kolo_alltoall_async(const char* name, const void* input, int64_t rows,
                                  int64_t row_count, const int64_t* send_splits, kolo_dtype_t dtype,
                                  kolo_device_t device, kolo_handle_t* handle) {
  return kolo_alltoall_async_ex(name, input, rows, row_count, send_splits, dtype, device, nullptr,
                                handle);
}

kolo_status_t kolo_alltoall_async_ex(const char* name, const void* input, int64_t rows,
                                     int64_t row_count, const int64_t* send_splits,
                                     kolo_dtype_t dtype, kolo_device_t device,
                                     const kolo_options_t* options, kolo_handle_t* handle) {
  return guarded([&] {
    return submit_named(kolo::Collective::kAlltoall, name, dtype, device, options, handle,
                        gather_fields(input, rows, row_count, send_splits));
  });
}

kolo_status_t kolo_alltoall(const char* name, const void* input, int64_t rows, int64_t row_count,
                            const int64_t* send_splits, kolo_dtype_t dtype,
                            kolo_handle_t* handle) {
  return kolo_alltoall_ex(name, input, rows, row_count, send_splits, dtype,
                          kolo_device_t{KOLO_DEVICE_CPU, 0, nullptr}, nullptr, handle);
}

kolo_status_t kolo_alltoall_ex(const char* name, const void* input, int64_t rows,
                               int64_t row_count, const int64_t* send_splits, kolo_dtype_t dtype,
                               kolo_device_t device, const kolo_options_t* options,
                               kolo_handle_t* handle) {
  return guarded([&] {
    return run_named_to_handle(kolo::Collective::kAlltoall, name, dtype, device, options, handle,
                               gather_fields(input, rows, row_count, send_splits));
  });
}

kolo_status_t kolo_reducescatter_async(const char* name, const void* input, void* output,
                                       int64_t rows, int64_t row_count, kolo_dtype_t dtype,
                                       kolo_op_t op, double prescale, double postscale,
                                       kolo_device_t device, kolo_handle_t* handle) {
  return kolo_reducescatter_async_ex(name, input, output, rows, row_count, dtype, op, prescale,
                                     postscale, device, nullptr, handle);
}

kolo_status_t kolo_reducescatter_async_ex(const char* name, const void* input, void* output,
                                          int64_t rows, int64_t row_count, kolo_dtype_t dtype,
                                          kolo_op_t op, double prescale, double postscale,
                                          kolo_device_t device, const kolo_options_t* options,
                                          kolo_handle_t* handle) {
  return guarded([&] {
    return submit_named(kolo::Collective::kReducescatter, name, dtype, device, options,
                        handle, scatter_fields(input, output, rows, row_count, op, prescale,
                                               postscale));
  });
}

kolo_status_t kolo_reducescatter(const char* name, const void* input, void* output, int64_t rows,
                                 int64_t row_count, kolo_dtype_t dtype, kolo_op_t op) {
  return kolo_reducescatter_ex(name, input, output, rows, row_count, dtype, op, 1.0, 1.0,
                               kolo_device_t{KOLO_DEVICE_CPU, 0, nullptr}, nullptr);
}

kolo_status_t kolo_reducescatter_ex(const char* name, const void* input, void* output,
                                    int64_t rows, int64_t row_count, kolo_dtype_t dtype,
                                    kolo_op_t op, double prescale, double postscale,
                                    kolo_device_t device, const kolo_options_t* options) {
  return guarded([&] {
    return run_named(kolo::Collective::kReducescatter, name, dtype, device, options,
                     scatter_fields(input, output, rows, row_count, op, prescale, postscale));
  });
}

int64_t kolo_reducescatter_shard_rows(int64_t rows, int rank, int size) {
  return guarded(int64_t{-1}, [&]() -> int64_t {
    if (rows < 0 || size <= 0 || rank < 0 || rank >= size) return -1;
    return kolo::core::shard_rows(rows, rank, size);
  });
}

kolo_status_t kolo_grouped_allreduce_async(int n, const char* const* names,
                                           const void* const* inputs, void* const* outputs,
                                           const int64_t* counts, kolo_dtype_t dtype, kolo_op_t op,
                                           double prescale, double postscale, kolo_device_t device,
                                           kolo_handle_t* handle) {
  return kolo_grouped_allreduce_async_ex(n, names, inputs, outputs, counts, dtype, op, prescale,
                                         postscale, device, nullptr, handle);
}

kolo_status_t kolo_grouped_allreduce_async_ex(int n, const char* const* names,
                                              const void* const* inputs, void* const* outputs,
                                              const int64_t* counts, kolo_dtype_t dtype,
                                              kolo_op_t op, double prescale, double postscale,
                                              kolo_device_t device, const kolo_options_t* options,
                                              kolo_handle_t* handle) {
  return guarded([&] {
    return submit_group(kolo::Collective::kGroupedAllreduce, n, names,
                        {{"inputs", inputs}, {"outputs", outputs}, {"counts", counts}}, dtype,
                        device, options, handle, [&](kolo::core::CollectiveArgs& a, int i) {
                          a.members.push_back({inputs[i], outputs[i], counts[i]});
                          a.op = static_cast<kolo::ReduceOp>(op);
                          a.prescale = prescale;
                          a.postscale = postscale;
                        });
  });
}

kolo_status_t kolo_grouped_allgather_async(int n, const char* const* names,
                                           const void* const* inputs, const int64_t* rows,
                                           const int64_t* row_counts, kolo_dtype_t dtype,
                                           kolo_device_t device, const kolo_options_t* options,
                                           kolo_handle_t* handle) {
  return guarded([&] {
    return submit_group(kolo::Collective::kGroupedAllgather, n, names,
                        {{"inputs", inputs}, {"rows", rows}, {"row_counts", row_counts}}, dtype,
                        device, options, handle, [&](kolo::core::CollectiveArgs& a, int i) {
                          a.members.push_back({inputs[i], nullptr, rows[i]});
                          a.member_row_counts.push_back(row_counts[i]);
                        });
  });
}

kolo_status_t kolo_grouped_reducescatter_async(int n, const char* const* names,
                                               const void* const* inputs, void* const* outputs,
                                               const int64_t* rows, const int64_t* row_counts,
                                               kolo_dtype_t dtype, kolo_op_t op, double prescale,
                                               double postscale, kolo_device_t device,
                                               const kolo_options_t* options,
                                               kolo_handle_t* handle) {
  return guarded([&] {
    return submit_group(kolo::Collective::kGroupedReducescatter, n, names,
                        {{"inputs", inputs}, {"outputs", outputs}, {"rows", rows},
                         {"row_counts", row_counts}},
                        dtype, device, options, handle, [&](kolo::core::CollectiveArgs& a, int i) {
                          a.members.push_back({inputs[i], outputs[i], rows[i]});
                          a.member_row_counts.push_back(row_counts[i]);
                          a.op = static_cast<kolo::ReduceOp>(op);
                          a.prescale = prescale;
                          a.postscale = postscale;
                        });
  });
}

kolo_status_t kolo_barrier(void) { return kolo_barrier_ex(nullptr); }

kolo_status_t kolo_barrier_ex(const kolo_options_t* options) {
  return guarded([&] {
    if (!g_runtime) return not_initialized();
    kolo::core::CollectiveArgs a;
    a.collective = kolo::Collective::kBarrier;  // named by the set's runtime
    auto owner = [] { return std::string("barrier"); };
    if (kolo_status_t s = read_options(options, 0, owner, &a); s != KOLO_OK) return s;
    kolo_handle_t h = nullptr;
    kolo_status_t s = submit_and_wait(std::move(a), &h);
    kolo_handle_release(h);
    return s;
  });
}

kolo_status_t kolo_join(int* last_rank) { return kolo_join_ex(nullptr, last_rank); }

kolo_status_t kolo_join_ex(const kolo_options_t* options, int* last_rank) {
  return guarded([&] {
    if (!g_runtime) return not_initialized();
    kolo::core::CollectiveArgs a;
    a.collective = kolo::Collective::kJoin;
    auto owner = [] { return std::string("join"); };
    if (kolo_status_t s = read_options(options, 0, owner, &a); s != KOLO_OK) return s;
    a.name = "kolo.join";
    std::shared_ptr<const kolo::core::ProcessSet> set;
    if (Status s = g_runtime->process_sets()->find(a.process_set, &set); !s.ok()) return report(s);
    kolo_handle_t h = nullptr;
    kolo_status_t s = submit_and_wait(std::move(a), &h);
    // The set's rank of the last to join, as a global rank.
    const int last = h ? h->state->last_joined : -1;
    const bool in_set = last >= 0 && last < static_cast<int>(set->ranks.size());
    if (s == KOLO_OK && last_rank != nullptr) *last_rank = in_set ? set->ranks[last] : last;
    kolo_handle_release(h);
    return s;
  });
}


}  // extern "C"
