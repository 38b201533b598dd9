// kolo.hpp — header-only C++17 convenience over the C API in kolo.h.
//
// What it adds, and nothing more:
//   kolo::Session         RAII kolo_init / kolo_shutdown.
//   kolo::Handle          RAII owner of a kolo_handle_t (move-only).
//   kolo::dtype_of<T>()   the kolo_dtype_t of a C++ element type.
//   kolo::allreduce_async typed submission: a throwing form that returns a Handle,
//                         and a non-throwing form that returns kolo_status_t.
//   kolo::allreduce       the blocking allreduce (kolo_allreduce_ex), throwing.
//   the collective set    allgather_async, broadcast_async, alltoall_async,
//                         reducescatter_async, in the same two forms; Handle::output<T>() / splits() read the
//                         kolo-allocated results; barrier() and join().
//   kolo::Error           the exception thrown by the throwing wrappers only.
//   kolo::Options         the *_ex calls' options (process set, shapes) as the
//                         last argument of every submission, barrier and join.
//   kolo::ProcessSet      add_process_set / remove_process_set and the queries
//                         (in kolo_sets.hpp, which this header includes).
//   grouped_allreduce_async, grouped_allgather_async, grouped_reducescatter_async
//                         (in kolo_groups.hpp, which this header includes).
//
// Everything here calls the C functions of kolo.h and adds no state of its own, so
// C++ and C callers may be mixed freely in one process. The thread rules are the C
// API's: every call may come from any thread, except that Session's constructor
// and destructor (kolo_init / kolo_shutdown) must not race with other kolo calls.
#ifndef KOLO_KOLO_HPP_
#define KOLO_KOLO_HPP_

#include <kolo/kolo.h>

#include <cstdint>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace kolo {

// 16-bit floating-point element types, as tags for dtype_of<T>(). They hold the
// raw bits; kolo reduces them (widened to float32, see kolo.h). Convert with your
// framework's half types, which have the same size and layout.
struct float16_t {
  std::uint16_t bits;
};
struct bfloat16_t {
  std::uint16_t bits;
};
static_assert(sizeof(float16_t) == 2 && sizeof(bfloat16_t) == 2, "16-bit tags");
static_assert(sizeof(bool) == 1, "kolo's KOLO_BOOL is one byte");

// A kolo status other than KOLO_OK, raised by the throwing wrappers. what() is
// "<context>: <KOLO_STATUS_NAME>: <message>".
class Error : public std::runtime_error {
 public:
  Error(kolo_status_t code, const std::string& context, const std::string& message)
      : std::runtime_error(context + ": " + kolo_status_string(code) +
                           (message.empty() ? std::string() : ": " + message)),
        code_(code),
        message_(message) {}

  kolo_status_t code() const noexcept { return code_; }
  // kolo's own message (kolo_last_error or the handle's message), without context.
  const std::string& message() const noexcept { return message_; }

 private:
  kolo_status_t code_;
  std::string message_;
};

namespace detail {

template <class T>
struct DtypeOf;  // no definition: dtype_of<T>() does not compile for other types
template <> struct DtypeOf<std::uint8_t> { static constexpr kolo_dtype_t value = KOLO_UINT8; };
template <> struct DtypeOf<std::int8_t> { static constexpr kolo_dtype_t value = KOLO_INT8; };
template <> struct DtypeOf<std::uint16_t> { static constexpr kolo_dtype_t value = KOLO_UINT16; };
template <> struct DtypeOf<std::int16_t> { static constexpr kolo_dtype_t value = KOLO_INT16; };
template <> struct DtypeOf<std::int32_t> { static constexpr kolo_dtype_t value = KOLO_INT32; };
template <> struct DtypeOf<std::int64_t> { static constexpr kolo_dtype_t value = KOLO_INT64; };
template <> struct DtypeOf<float16_t> { static constexpr kolo_dtype_t value = KOLO_FLOAT16; };
template <> struct DtypeOf<bfloat16_t> { static constexpr kolo_dtype_t value = KOLO_BFLOAT16; };
template <> struct DtypeOf<float> { static constexpr kolo_dtype_t value = KOLO_FLOAT32; };
template <> struct DtypeOf<double> { static constexpr kolo_dtype_t value = KOLO_FLOAT64; };
template <> struct DtypeOf<bool> { static constexpr kolo_dtype_t value = KOLO_BOOL; };

// Throws Error with kolo_last_error() unless status is KOLO_OK.
inline void check(kolo_status_t status, const char* context) {
  if (status != KOLO_OK) throw Error(status, context, kolo_last_error());
}

}  // namespace detail

// The kolo dtype of element type T (cv-qualifiers ignored). Fails to compile for a
// type kolo cannot reduce.
template <class T>
constexpr kolo_dtype_t dtype_of() noexcept {
  return detail::DtypeOf<std::remove_cv_t<T>>::value;
}

// The device of a tensor in host memory (the C macro KOLO_CPU_DEVICE is a C99
// compound literal, which C++ does not have).
constexpr kolo_device_t cpu_device() noexcept {
  return kolo_device_t{KOLO_DEVICE_CPU, 0, nullptr};
}

// A tensor's dimension sizes (empty: a scalar of one element).
using Shape = std::vector<std::int64_t>;

// The optional arguments of the C API's *_ex calls, taken by every submission,
// barrier and join below as their last argument. The defaults are the plain
// calls'. See kolo_options_t in kolo.h for the rules.
struct Options {
  // 0: the global set; otherwise ProcessSet::id() (see add_process_set).
  std::int32_t process_set = 0;
  // Empty: no shape given (ranks agree on counts only). Otherwise one shape per
  // tensor (one for the single-tensor calls, n for the grouped ones), negotiated
  // in full: ranks whose shapes differ all fail with KOLO_ERR_MISMATCH. Another
  // number of shapes is KOLO_ERR_INVALID_ARGUMENT (kolo_last_error() is not
  // updated for it).
  std::vector<Shape> shapes;
  // Allreduces: reduce in rank order (KOLO_OPTION_DETERMINISTIC in kolo.h).
  bool deterministic = false;
};

namespace detail {

// A kolo_options_t over an Options, valid while both live.
class COptions {
 public:
  explicit COptions(const Options& options) {
    c_.process_set = options.process_set;
    c_.flags = options.deterministic ? KOLO_OPTION_DETERMINISTIC : 0;
    c_.shapes = nullptr;
    if (options.shapes.empty()) return;
    shapes_.reserve(options.shapes.size());
    for (const Shape& shape : options.shapes)
      shapes_.push_back(kolo_shape_t{static_cast<std::int32_t>(shape.size()), shape.data()});
    c_.shapes = shapes_.data();
  }
  const kolo_options_t* get() const noexcept { return &c_; }

 private:
  kolo_options_t c_;
  std::vector<kolo_shape_t> shapes_;
};

// The size of options' process set, for Handle::splits(); kolo_size() when the
// set is unknown (the submission then fails and says why).
inline int set_size(const Options& options) noexcept {
  if (options.process_set == 0) return kolo_size();
  const int size = kolo_process_set_size(options.process_set);
  return size >= 0 ? size : kolo_size();
}

}  // namespace detail

// Owns one asynchronous operation's kolo_handle_t. Move-only.
//
// The destructor waits for the operation to complete, then releases the handle:
// kolo keeps reading the input and writing the output until completion, so a
// Handle that goes out of scope (on an exception, say) must not let the caller
// free those buffers under kolo's feet. Once kolo shuts down, every pending
// operation completes, so this wait ends. Call release() to take the raw handle
// and the responsibility with it.
//
// An empty Handle (default-constructed, moved from, or from a failed submission)
// behaves as a completed operation with status KOLO_ERR_INVALID_ARGUMENT.
class Handle {
 public:
  Handle() noexcept = default;
  // split_count: how many values splits() returns (the wrappers below pass the
  // process set's size, times n for a grouped allgather); -1: kolo_size().
  explicit Handle(kolo_handle_t handle, int split_count = -1) noexcept
      : handle_(handle), split_count_(split_count) {}
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle(Handle&& other) noexcept
      : handle_(std::exchange(other.handle_, nullptr)), split_count_(other.split_count_) {}
  Handle& operator=(Handle&& other) noexcept {
    if (this != &other) {
      reset();
      handle_ = std::exchange(other.handle_, nullptr);
      split_count_ = other.split_count_;
    }
    return *this;
  }
  ~Handle() { reset(); }

  // Blocks until complete or timeout_seconds pass (negative: no limit). Returns the
  // operation's status, or KOLO_ERR_TIMEOUT (the operation is still live).
  kolo_status_t wait(double timeout_seconds = -1.0) const noexcept {
    return handle_ ? kolo_wait(handle_, timeout_seconds) : KOLO_ERR_INVALID_ARGUMENT;
  }

  // As wait(), but throws Error unless the operation completed with KOLO_OK.
  void wait_or_throw(double timeout_seconds = -1.0) const {
    const kolo_status_t status = wait(timeout_seconds);
    if (status == KOLO_OK) return;
    std::string why = handle_ ? message() : "empty kolo::Handle";
    if (status == KOLO_ERR_TIMEOUT && why.empty()) why = "still in progress";
    throw Error(status, "kolo::Handle::wait", why);
  }

  // CUDA operations: makes `stream` (a cudaStream_t, passed as void*) wait for the
  // operation's device work without blocking the CPU on the GPU; see
  // kolo_handle_stream_wait in kolo.h.
  kolo_status_t stream_wait(void* stream) const noexcept {
    return handle_ ? kolo_handle_stream_wait(handle_, stream) : KOLO_ERR_INVALID_ARGUMENT;
  }

  // True once the operation has completed (successfully or not). Never blocks.
  bool poll() const noexcept {
    int done = 1;
    if (handle_ && kolo_poll(handle_, &done) != KOLO_OK) return true;
    return done != 0;
  }

  // KOLO_IN_PROGRESS until complete, then the operation's status.
  kolo_status_t status() const noexcept {
    return handle_ ? kolo_handle_status(handle_) : KOLO_ERR_INVALID_ARGUMENT;
  }

  // The operation's message: empty on success or while in progress.
  std::string message() const {
    const char* text = handle_ ? kolo_handle_message(handle_) : nullptr;
    return text ? std::string(text) : std::string();
  }

  // The kolo-allocated output of a completed allgather or alltoall, as a view of
  // *count elements of T at *data, valid until this Handle releases the operation.
  // Returns the operation's status while it is not KOLO_OK (KOLO_IN_PROGRESS before
  // completion), KOLO_ERR_INVALID_ARGUMENT if the output is not a whole number of
  // T. Other collectives have no such output (0 elements).
  template <class T>
  kolo_status_t output(const T** data, std::int64_t* count) const noexcept {
    const kolo_status_t state = status();
    if (state != KOLO_OK) return state;
    const void* bytes_at = nullptr;
    std::int64_t bytes = 0;
    const kolo_status_t got = kolo_handle_output(handle_, &bytes_at, &bytes);
    if (got != KOLO_OK) return got;
    if (bytes % static_cast<std::int64_t>(sizeof(T)) != 0) return KOLO_ERR_INVALID_ARGUMENT;
    if (data) *data = static_cast<const T*>(bytes_at);
    if (count) *count = bytes / static_cast<std::int64_t>(sizeof(T));
    return KOLO_OK;
  }

  // A copy of that output; throws Error where the view above is not KOLO_OK.
  template <class T>
  std::vector<T> output() const {
    const T* data = nullptr;
    std::int64_t count = 0;
    const kolo_status_t got = output(&data, &count);
    if (got == KOLO_ERR_INVALID_ARGUMENT && status() == KOLO_OK) {
      throw Error(got, "kolo::Handle::output", "the output is not a whole number of T");
    }
    if (got != KOLO_OK) throw Error(got, "kolo::Handle::output", failure_of(got));
    std::vector<T> copy(static_cast<size_t>(count));
    if (count > 0) std::memcpy(copy.data(), data, static_cast<size_t>(count) * sizeof(T));
    return copy;
  }

  // The per-rank rows of a completed allgather (rows each rank contributed) or
  // alltoall (rows received from each rank), in set-rank order; a grouped
  // allgather's are member-major (member i, rank r at i * size + r). Copies at
  // most n values.
  // Returns the operation's status while it is not KOLO_OK.
  kolo_status_t splits(std::int64_t* splits, int n) const noexcept {
    const kolo_status_t state = status();
    return state != KOLO_OK ? state : kolo_handle_splits(handle_, splits, n);
  }

  // The same as a vector: the set's size values (n times that for a grouped
  // allgather; kolo_size() for a Handle made from a raw handle without a count).
  // Throws Error where the form above is not KOLO_OK.
  std::vector<std::int64_t> splits() const {
    const int size = split_count_ >= 0 ? split_count_ : kolo_size();
    if (size < 0) throw Error(KOLO_ERR_NOT_INITIALIZED, "kolo::Handle::splits", kolo_last_error());
    std::vector<std::int64_t> rows(static_cast<size_t>(size), 0);
    const kolo_status_t got = splits(rows.data(), size);
    if (got != KOLO_OK) throw Error(got, "kolo::Handle::splits", failure_of(got));
    return rows;
  }

  explicit operator bool() const noexcept { return handle_ != nullptr; }
  kolo_handle_t get() const noexcept { return handle_; }

  // Gives up ownership without waiting; the caller must kolo_handle_release it.
  kolo_handle_t release() noexcept { return std::exchange(handle_, nullptr); }

  // Waits for completion (see the class comment), then releases the handle.
  void reset() noexcept {
    if (!handle_) return;
    (void)kolo_wait(handle_, -1.0);
    kolo_handle_release(std::exchange(handle_, nullptr));
  }

 private:
  // Why an accessor failed: the operation's message, or the C API's last error.
  std::string failure_of(kolo_status_t status) const {
    if (!handle_) return "empty kolo::Handle";
    if (status == KOLO_IN_PROGRESS) return "the operation has not completed yet";
    return this->status() != KOLO_OK ? message() : std::string(kolo_last_error());
  }

  kolo_handle_t handle_ = nullptr;
  int split_count_ = -1;
};

namespace detail {

// The non-throwing forms' common tail: *handle is emptied, then owns what `start`
// (a callable taking kolo_options_t const* and kolo_handle_t*) enqueued, if it
// succeeded. `shapes` is how many shapes options may carry (0 or this many).
template <class Start>
kolo_status_t submit(Handle* handle, const Options& options, size_t shapes, int split_count,
                     Start&& start) noexcept {
  if (handle == nullptr) return KOLO_ERR_INVALID_ARGUMENT;
  *handle = Handle();
  if (!options.shapes.empty() && options.shapes.size() != shapes) return KOLO_ERR_INVALID_ARGUMENT;
  try {
    const COptions c_options(options);
    kolo_handle_t raw = nullptr;
    const kolo_status_t status = start(c_options.get(), &raw);
    if (status == KOLO_OK) *handle = Handle(raw, split_count);
    return status;
  } catch (const std::bad_alloc&) {
    return KOLO_ERR_INTERNAL;
  }
}

// The throwing forms' common tail.
inline Handle handle_or_throw(kolo_status_t status, Handle handle, const char* call,
                              const std::string& name) {
  if (status != KOLO_OK) {
    throw Error(status, std::string("kolo::") + call + "('" + name + "')", kolo_last_error());
  }
  return handle;
}

// The throwing forms' check of what the non-throwing forms refuse without a
// message: the number of shapes.
inline void check_shapes(const Options& options, size_t shapes, const char* call) {
  if (options.shapes.empty() || options.shapes.size() == shapes) return;
  throw Error(KOLO_ERR_INVALID_ARGUMENT, std::string("kolo::") + call,
              "options.shapes has " + std::to_string(options.shapes.size()) +
                  " shapes for " + std::to_string(shapes) + " tensors");
}

// C views of a group's names and pointers (may throw std::bad_alloc).
struct GroupNames {
  explicit GroupNames(const std::vector<std::string>& names) {
    for (const std::string& name : names) c.push_back(name.c_str());
  }
  std::vector<const char*> c;
};

}  // namespace detail

// Starts an allreduce of count elements of T named `name` (see
// kolo_allreduce_async in kolo.h for the rules on names, buffers and scales).
// Non-throwing form: on success *handle owns the new operation; on failure
// *handle is empty, nothing was enqueued, and kolo_last_error() says why.
template <class T>
kolo_status_t allreduce_async(const std::string& name, const T* input, T* output,
                              std::int64_t count, Handle* handle,
                              kolo_op_t op = KOLO_OP_SUM, double prescale = 1.0,
                              double postscale = 1.0, kolo_device_t device = cpu_device(),
                              const Options& options = Options()) noexcept {
  return detail::submit(handle, options, 1, -1, [&](const kolo_options_t* o, kolo_handle_t* raw) {
    return kolo_allreduce_async_ex(name.c_str(), input, output, count, dtype_of<T>(), op,
                                   prescale, postscale, device, o, raw);
  });
}

// Throwing form: returns the operation's Handle; throws Error if it could not be
// enqueued (the operation's own outcome comes from Handle::wait / wait_or_throw).
template <class T>
Handle allreduce_async(const std::string& name, const T* input, T* output,
                       std::int64_t count, kolo_op_t op = KOLO_OP_SUM,
                       double prescale = 1.0, double postscale = 1.0,
                       kolo_device_t device = cpu_device(), const Options& options = Options()) {
  detail::check_shapes(options, 1, "allreduce_async");
  Handle handle;
  const kolo_status_t status = allreduce_async(name, input, output, count, &handle,
                                               op, prescale, postscale, device, options);
  return detail::handle_or_throw(status, std::move(handle), "allreduce_async", name);
}

// The blocking allreduce (kolo_allreduce_ex in kolo.h): returns once `output`
// holds the result; throws Error with the operation's status and message when
// it was refused or failed (on every rank, for a mismatch or a failed peer).
template <class T>
void allreduce(const std::string& name, const T* input, T* output, std::int64_t count,
               kolo_op_t op = KOLO_OP_SUM, double prescale = 1.0, double postscale = 1.0,
               kolo_device_t device = cpu_device(), const Options& options = Options()) {
  detail::check_shapes(options, 1, "allreduce");
  const detail::COptions c_options(options);
  const kolo_status_t status = kolo_allreduce_ex(name.c_str(), input, output, count, dtype_of<T>(),
                                                 op, prescale, postscale, device, c_options.get());
  if (status != KOLO_OK)
    throw Error(status, "kolo::allreduce('" + name + "')", kolo_last_error());
}

// ---- the collective set ------------------------------------------------------
//
// Each collective below comes in the two forms of allreduce_async: a non-throwing
// one that takes Handle* and returns kolo_status_t (on failure *handle is empty,
// nothing was enqueued and kolo_last_error() says why), and a throwing one that
// returns the Handle. See kolo.h for the semantics; rows are along the first
// dimension, row_count elements each (1 for a vector). In a process set
// (options.process_set) ranks, sizes, outputs and splits are the set's.

// Allgather: every rank's rows concatenated in rank order, kolo-allocated. After
// completion read them with handle.output<T>() and the rows per rank with
// handle.splits(). A rank may contribute 0 rows.
template <class T>
kolo_status_t allgather_async(const std::string& name, const T* input, std::int64_t rows,
                              Handle* handle, std::int64_t row_count = 1,
                              kolo_device_t device = cpu_device(),
                              const Options& options = Options()) noexcept {
  return detail::submit(handle, options, 1, detail::set_size(options),
                        [&](const kolo_options_t* o, kolo_handle_t* raw) {
                          return kolo_allgather_async_ex(name.c_str(), input, rows, row_count,
                                                         dtype_of<T>(), device, o, raw);
                        });
}

template <class T>
Handle allgather_async(const std::string& name, const T* input, std::int64_t rows,
                       std::int64_t row_count = 1, kolo_device_t device = cpu_device(),
                       const Options& options = Options()) {
  detail::check_shapes(options, 1, "allgather_async");
  Handle handle;
  const kolo_status_t status =
      allgather_async(name, input, rows, &handle, row_count, device, options);
  return detail::handle_or_throw(status, std::move(handle), "allgather_async", name);
}

// Broadcast count elements from rank `root` into output on every rank (in place
// when input == output; input is ignored, and may be null, on other ranks). root
// is a global rank, also in a process set (as in Horovod).
template <class T>
kolo_status_t broadcast_async(const std::string& name, const T* input, T* output,
                              std::int64_t count, int root, Handle* handle,
                              kolo_device_t device = cpu_device(),
                              const Options& options = Options()) noexcept {
  return detail::submit(handle, options, 1, -1, [&](const kolo_options_t* o, kolo_handle_t* raw) {
    return kolo_broadcast_async_ex(name.c_str(), input, output, count, dtype_of<T>(), root,
                                   device, o, raw);
  });
}

template <class T>
Handle broadcast_async(const std::string& name, const T* input, T* output, std::int64_t count,
                       int root, kolo_device_t device = cpu_device(),
                       const Options& options = Options()) {
  detail::check_shapes(options, 1, "broadcast_async");
  Handle handle;
  const kolo_status_t status =
      broadcast_async(name, input, output, count, root, &handle, device, options);
  return detail::handle_or_throw(status, std::move(handle), "broadcast_async", name);
}

// Alltoall: (*send_splits)[d] consecutive rows go to rank d; null splits an even
// share (rows divisible by the world size). The rows received, in source-rank
// order, are handle.output<T>(); the rows from each rank handle.splits().
// send_splits must hold one value per rank of the set: another size is refused
// with KOLO_ERR_INVALID_ARGUMENT (kolo_last_error() is not updated for it).
template <class T>
kolo_status_t alltoall_async(const std::string& name, const T* input, std::int64_t rows,
                             const std::vector<std::int64_t>* send_splits, Handle* handle,
                             std::int64_t row_count = 1, kolo_device_t device = cpu_device(),
                             const Options& options = Options()) noexcept {
  const int size = detail::set_size(options);  // -1 before kolo_init: the C call says so
  if (send_splits && size >= 0 && send_splits->size() != static_cast<size_t>(size)) {
    if (handle) *handle = Handle();
    return KOLO_ERR_INVALID_ARGUMENT;
  }
  return detail::submit(handle, options, 1, size, [&](const kolo_options_t* o, kolo_handle_t* raw) {
    return kolo_alltoall_async_ex(name.c_str(), input, rows, row_count,
                                  send_splits ? send_splits->data() : nullptr, dtype_of<T>(),
                                  device, o, raw);
  });
}

template <class T>
Handle alltoall_async(const std::string& name, const T* input, std::int64_t rows,
                      const std::vector<std::int64_t>* send_splits = nullptr,
                      std::int64_t row_count = 1, kolo_device_t device = cpu_device(),
                      const Options& options = Options()) {
  const int size = detail::set_size(options);
  if (send_splits && size >= 0 && send_splits->size() != static_cast<size_t>(size)) {
    throw Error(KOLO_ERR_INVALID_ARGUMENT, "kolo::alltoall_async('" + name + "')",
                "send_splits has " + std::to_string(send_splits->size()) +
                    " values for a set of " + std::to_string(size) + " ranks");
  }
  detail::check_shapes(options, 1, "alltoall_async");
  Handle handle;
  const kolo_status_t status =
      alltoall_async(name, input, rows, send_splits, &handle, row_count, device, options);
  return detail::handle_or_throw(status, std::move(handle), "alltoall_async", name);
}

// The rows of `rows` that rank `rank` of `size` receives from a reducescatter:
// q = rows / size, and the first rows % size ranks get q + 1.
inline std::int64_t reducescatter_shard_rows(std::int64_t rows, int rank, int size) noexcept {
  return kolo_reducescatter_shard_rows(rows, rank, size);
}

// Reducescatter (op SUM or AVERAGE): rows are reduced across ranks and this rank's
// shard, reducescatter_shard_rows(rows, rank, size) rows, is written to output.
template <class T>
kolo_status_t reducescatter_async(const std::string& name, const T* input, T* output,
                                  std::int64_t rows, Handle* handle, std::int64_t row_count = 1,
                                  kolo_op_t op = KOLO_OP_SUM, double prescale = 1.0,
                                  double postscale = 1.0, kolo_device_t device = cpu_device(),
                                  const Options& options = Options()) noexcept {
  return detail::submit(handle, options, 1, -1, [&](const kolo_options_t* o, kolo_handle_t* raw) {
    return kolo_reducescatter_async_ex(name.c_str(), input, output, rows, row_count,
                                       dtype_of<T>(), op, prescale, postscale, device, o, raw);
  });
}

template <class T>
Handle reducescatter_async(const std::string& name, const T* input, T* output,
                           std::int64_t rows, std::int64_t row_count = 1,
                           kolo_op_t op = KOLO_OP_SUM, double prescale = 1.0,
                           double postscale = 1.0, kolo_device_t device = cpu_device(),
                           const Options& options = Options()) {
  detail::check_shapes(options, 1, "reducescatter_async");
  Handle handle;
  const kolo_status_t status = reducescatter_async(
      name, input, output, rows, &handle, row_count, op, prescale, postscale, device, options);
  return detail::handle_or_throw(status, std::move(handle), "reducescatter_async", name);
}

// Blocks until every rank (of options.process_set) has entered the barrier;
// throws Error on failure. (The non-throwing form is kolo_barrier_ex() itself.)
inline void barrier(const Options& options = Options()) {
  detail::check_shapes(options, 0, "barrier");
  const detail::COptions c_options(options);
  detail::check(kolo_barrier_ex(c_options.get()), "kolo::barrier");
}

// This rank has run out of data: until every rank has joined, the others'
// allreduces count it as zeros (AVERAGE still divides by the full world size), and
// other collectives fail. Blocks until every rank (of options.process_set) has
// joined and returns the last rank to join (a global rank); throws Error on
// failure. (The non-throwing form is kolo_join_ex().)
inline int join(const Options& options = Options()) {
  detail::check_shapes(options, 0, "join");
  const detail::COptions c_options(options);
  int last_rank = -1;
  detail::check(kolo_join_ex(c_options.get(), &last_rank), "kolo::join");
  return last_rank;
}

// kolo_init in the constructor (throws Error on failure), kolo_shutdown in the
// destructor. Collective: every rank constructs one. Neither copyable nor movable;
// create it in main() and let it outlive every Handle.
class Session {
 public:
  Session() { detail::check(kolo_init(), "kolo_init"); }
  // On a communicator the caller owns, by its Fortran handle (MPI_Comm_c2f).
  explicit Session(std::int64_t mpi_comm_fortran_handle) {
    detail::check(kolo_init_comm(mpi_comm_fortran_handle), "kolo_init_comm");
  }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  ~Session() { (void)kolo_shutdown(); }

  int rank() const noexcept { return kolo_rank(); }
  int size() const noexcept { return kolo_size(); }
  int local_rank() const noexcept { return kolo_local_rank(); }
  int local_size() const noexcept { return kolo_local_size(); }
  int cross_rank() const noexcept { return kolo_cross_rank(); }
  int cross_size() const noexcept { return kolo_cross_size(); }
};

}  // namespace kolo

#include <kolo/kolo_groups.hpp>
#include <kolo/kolo_sets.hpp>

#endif  // KOLO_KOLO_HPP_
