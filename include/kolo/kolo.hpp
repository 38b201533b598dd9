// kolo.hpp — header-only C++17 convenience over the C API in kolo.h.
//
// What it adds, and nothing more:
//   kolo::Session         RAII kolo_init / kolo_shutdown.
//   kolo::Handle          RAII owner of a kolo_handle_t (move-only).
//   kolo::dtype_of<T>()   the kolo_dtype_t of a C++ element type.
//   kolo::allreduce_async typed submission: a throwing form that returns a Handle,
//                         and a non-throwing form that returns kolo_status_t.
//   kolo::Error           the exception thrown by the throwing wrappers only.
//
// Everything here calls the C functions of kolo.h and adds no state of its own, so
// C++ and C callers may be mixed freely in one process. The thread rules are the C
// API's: every call may come from any thread, except that Session's constructor
// and destructor (kolo_init / kolo_shutdown) must not race with other kolo calls.
#ifndef KOLO_KOLO_HPP_
#define KOLO_KOLO_HPP_

#include <kolo/kolo.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

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
  explicit Handle(kolo_handle_t handle) noexcept : handle_(handle) {}
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle(Handle&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  Handle& operator=(Handle&& other) noexcept {
    if (this != &other) {
      reset();
      handle_ = std::exchange(other.handle_, nullptr);
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
  kolo_handle_t handle_ = nullptr;
};

// Starts an allreduce of count elements of T named `name` (see
// kolo_allreduce_async in kolo.h for the rules on names, buffers and scales).
// Non-throwing form: on success *handle owns the new operation; on failure
// *handle is empty, nothing was enqueued, and kolo_last_error() says why.
template <class T>
kolo_status_t allreduce_async(const std::string& name, const T* input, T* output,
                              std::int64_t count, Handle* handle,
                              kolo_op_t op = KOLO_OP_SUM, double prescale = 1.0,
                              double postscale = 1.0,
                              kolo_device_t device = cpu_device()) noexcept {
  if (handle == nullptr) return KOLO_ERR_INVALID_ARGUMENT;
  *handle = Handle();
  kolo_handle_t raw = nullptr;
  const kolo_status_t status =
      kolo_allreduce_async(name.c_str(), input, output, count, dtype_of<T>(), op,
                           prescale, postscale, device, &raw);
  if (status == KOLO_OK) *handle = Handle(raw);
  return status;
}

// Throwing form: returns the operation's Handle; throws Error if it could not be
// enqueued (the operation's own outcome comes from Handle::wait / wait_or_throw).
template <class T>
Handle allreduce_async(const std::string& name, const T* input, T* output,
                       std::int64_t count, kolo_op_t op = KOLO_OP_SUM,
                       double prescale = 1.0, double postscale = 1.0,
                       kolo_device_t device = cpu_device()) {
  Handle handle;
  const kolo_status_t status = allreduce_async(name, input, output, count, &handle,
                                               op, prescale, postscale, device);
  if (status != KOLO_OK) {
    throw Error(status, "kolo::allreduce_async('" + name + "')", kolo_last_error());
  }
  return handle;
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

#endif  // KOLO_KOLO_HPP_
