/* kolo — collective communication for data-parallel training.
 *
 * This is the C API: the ABI that every binding (C++, Python, anything with a C
 * FFI) uses. It names no MPI, CUDA or NCCL type.
 *
 * The model, in the line of Horovod: one process per device, launched by
 * `mpiexec`. Each process hands kolo tensors by name; a background coordinator
 * thread agrees with the other processes which names are ready on every rank,
 * fuses them into buckets and reduces each bucket. A name is the identity of a
 * tensor: every rank must submit the same name with the same dtype, count, op,
 * scale factors and device kind. Ranks may submit in any order and from any
 * thread.
 *
 * Errors: every call returns a kolo_status_t (or a value documented otherwise);
 * kolo_last_error() gives the calling thread's last message. An asynchronous
 * operation's own outcome lives in its handle (kolo_handle_status,
 * kolo_handle_message). Nothing in this API throws or aborts on bad input: a
 * NULL handle or out-pointer, a negative length or a NaN timeout is refused with
 * KOLO_ERR_INVALID_ARGUMENT and a message naming the argument, and every call
 * that produces a handle sets *handle to NULL when it fails. (kolo cannot tell a
 * dangling pointer or a released handle from a live one: those remain the
 * caller's to avoid.)
 *
 * Thread safety: every function may be called from any thread, except that
 * kolo_init* and kolo_shutdown must not race with other kolo calls.
 */
#ifndef KOLO_KOLO_H_
#define KOLO_KOLO_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define KOLO_API __attribute__((visibility("default")))
#else
#define KOLO_API
#endif

#define KOLO_VERSION_MAJOR 0
#define KOLO_VERSION_MINOR 1
#define KOLO_VERSION_PATCH 0

/* Longest accepted tensor name, in bytes, excluding the terminating NUL. */
#define KOLO_MAX_NAME_LENGTH 1024

typedef enum kolo_status_t {
  KOLO_OK = 0,
  KOLO_IN_PROGRESS = 1,          /* the handle has not completed yet */
  KOLO_ERR_INVALID_ARGUMENT = 2, /* a caller-side mistake; nothing was enqueued */
  KOLO_ERR_NOT_INITIALIZED = 3,  /* called before kolo_init or after kolo_shutdown */
  KOLO_ERR_ALREADY_INITIALIZED = 4, /* kolo_init: kolo already runs in this process */
  KOLO_ERR_DUPLICATE_NAME = 5,   /* a tensor of that name is already in flight on this rank */
  KOLO_ERR_MISMATCH = 6,         /* ranks submitted the name with different parameters */
  KOLO_ERR_SHUTDOWN = 7,         /* kolo shut down (on this or another rank) first;
                                    from kolo_init: see there */
  KOLO_ERR_TIMEOUT = 8,          /* kolo_wait's timeout expired; the handle is still live */
  KOLO_ERR_STALLED = 9,          /* some ranks never submitted the name (stall shutdown) */
  KOLO_ERR_UNSUPPORTED = 10,     /* valid, but not supported by this build or transport */
  KOLO_ERR_TRANSPORT = 11,       /* the transport (MPI, NCCL, ...) reported an error */
  KOLO_ERR_INTERNAL = 12,
  KOLO_ERR_RANK_FAILED = 13,     /* a peer rank died or went silent; the message names it */
  KOLO_STATUS_MIN_ENUM_ = -0x7fffffff - 1, /* not a status: see Note [Enum ranges] */
  KOLO_STATUS_MAX_ENUM_ = 0x7fffffff        /* not a status */
} kolo_status_t;

typedef enum kolo_dtype_t {
  KOLO_UINT8 = 0,
  KOLO_INT8 = 1,
  KOLO_UINT16 = 2,
  KOLO_INT16 = 3,
  KOLO_INT32 = 4,
  KOLO_INT64 = 5,
  KOLO_FLOAT16 = 6,  /* IEEE binary16 */
  KOLO_BFLOAT16 = 7, /* bfloat16: the top half of a float32 */
  KOLO_FLOAT32 = 8,
  KOLO_FLOAT64 = 9,
  KOLO_BOOL = 10,    /* one byte, 0 or 1 */
  KOLO_DTYPE_MIN_ENUM_ = -0x7fffffff - 1, /* not a dtype: see Note [Enum ranges] */
  KOLO_DTYPE_MAX_ENUM_ = 0x7fffffff        /* not a dtype */
} kolo_dtype_t;

/* Reduction operators.
 * - SUM on bool is logical or; PRODUCT and MIN on bool are logical and; MAX is or.
 * - AVERAGE divides the sum by the world size. On integer types the division
 *   truncates toward zero (-7 / 2 == -3), as C does. AVERAGE on bool is invalid.
 * - float16 and bfloat16 are widened to float32 for every step of a reduction and
 *   rounded (to nearest even) once per step, so they lose no more than one rounding
 *   per step.
 * - Integer sums wrap around on overflow (two's complement).
 * - ADASUM is Horovod's adaptive summation (allreduce and grouped allreduce
 *   only): each tensor is combined as a whole vector, never element by element.
 *   Two ranks' tensors a and b become
 *       (1 - a.b / (2 |a|^2)) a + (1 - a.b / (2 |b|^2)) b
 *   (a coefficient is 1 where its |.|^2 is below 1e-8), with a.b, |a|^2 and
 *   |b|^2 accumulated in float64 over the whole tensor; ranks are combined
 *   pairwise in a binary tree (rank 2i with 2i+1, then those pairs, ...) by
 *   recursive vector halving. Tensors fused into one bucket, or grouped, give
 *   exactly what each gives alone. prescale multiplies the input before and
 *   postscale the result after. Floating dtypes, CPU memory and a world whose
 *   size is a power of two only (as Horovod): anything else fails with
 *   KOLO_ERR_UNSUPPORTED, naming why. A joined rank contributes zeros, which
 *   Adasum leaves out (adasum(a, 0) == a). */
typedef enum kolo_op_t {
  KOLO_OP_SUM = 0,
  KOLO_OP_AVERAGE = 1,
  KOLO_OP_MIN = 2,
  KOLO_OP_MAX = 3,
  KOLO_OP_PRODUCT = 4,
  KOLO_OP_ADASUM = 5,
  KOLO_OP_MIN_ENUM_ = -0x7fffffff - 1, /* not an op: see Note [Enum ranges] */
  KOLO_OP_MAX_ENUM_ = 0x7fffffff        /* not an op */
} kolo_op_t;

typedef enum kolo_device_kind_t {
  KOLO_DEVICE_CPU = 0,
  KOLO_DEVICE_CUDA = 1,
  KOLO_DEVICE_MIN_ENUM_ = -0x7fffffff - 1, /* not a device kind: see Note [Enum ranges] */
  KOLO_DEVICE_MAX_ENUM_ = 0x7fffffff        /* not a device kind */
} kolo_device_kind_t;

/* Note [Enum ranges]: each enum a caller passes in (kolo_status_t too, to
 * kolo_status_string) ends with *_MIN_ENUM_ and *_MAX_ENUM_ sentinels (INT_MIN
 * and INT_MAX) so that every int value, negative ones too, is a value of the
 * type in C++ as in C. A
 * caller may pass any number; kolo refuses what is not listed with
 * KOLO_ERR_INVALID_ARGUMENT. Without the sentinel, C++ code (kolo itself)
 * reading an out-of-range value of the enum has undefined behaviour
 * (UBSan: "load of value 77, which is not a valid value for type"). The
 * sentinels are never valid arguments. */

/* Where a tensor lives. For CPU memory use KOLO_CPU_DEVICE (index and stream
 * are ignored).
 *
 * CUDA memory (needs a build with NCCL: kolo_transport_built("nccl")):
 * - index is the CUDA device ordinal as this process sees it (within
 *   CUDA_VISIBLE_DEVICES), or -1 for kolo's choice: local rank modulo the number
 *   of visible devices. Every buffer of one call lives on that device; ranks may
 *   use different ordinals. NCCL needs a distinct GPU per rank.
 * - stream is the cudaStream_t whose work produces the input (NULL: the legacy
 *   default stream). The submitting call records an event on it and returns at
 *   once: kolo's own stream waits for that event, so anything queued on `stream`
 *   before the call is seen and anything queued after it is not. The buffers must
 *   not be written by any stream until the operation completes.
 * - Completion: kolo_poll/kolo_wait report done once the device work has
 *   finished, so the outputs can then be read from any stream or copied to the
 *   host. To overlap instead, kolo_handle_stream_wait makes a stream of yours
 *   wait for the operation without blocking the CPU on the GPU.
 * - Outputs kolo allocates (allgather, alltoall) are device memory on the same
 *   device, owned by the handle (kolo_handle_output gives the device pointer).
 * - Reductions: SUM, AVERAGE, MIN, MAX, PRODUCT for uint8, int8, int32, int64,
 *   float16, bfloat16, float32, float64 and bool; uint16 and int16 fail with
 *   KOLO_ERR_UNSUPPORTED (NCCL has no such types). */
typedef struct kolo_device_t {
  int32_t kind;  /* a kolo_device_kind_t */
  int32_t index;
  void* stream;
} kolo_device_t;

#define KOLO_CPU_DEVICE ((kolo_device_t){KOLO_DEVICE_CPU, 0, NULL})

/* An asynchronous operation in flight. Owned by the caller from the moment it is
 * returned until kolo_handle_release. */
typedef struct kolo_handle* kolo_handle_t;

/* A tensor's shape: ndim dimensions (0..KOLO_MAX_DIMS; 0 is a scalar of one
 * element). */
#define KOLO_MAX_DIMS 16
typedef struct kolo_shape_t {
  int32_t ndim;
  const int64_t* dims; /* ndim sizes, each >= 0; may be NULL when ndim == 0 */
} kolo_shape_t;

/* Optional arguments of the *_ex calls. Zero-initialise ({0}) or use
 * KOLO_OPTIONS_INIT for the defaults; a NULL pointer means the defaults.
 *
 * Shapes (Note [Negotiated shapes]): a shape given must match the count arguments
 * — allreduce and broadcast: the product of dims == count; allgather, alltoall and
 * reducescatter: dims[0] == rows and the product of dims[1..] == row_count, so
 * these need ndim >= 1 — else KOLO_ERR_INVALID_ARGUMENT naming both. Ranks then
 * agree on the whole shape, not only on the counts: [2, 3] on one rank and [3, 2]
 * on another fail on every rank with KOLO_ERR_MISMATCH naming each rank's shape
 * (allgather and alltoall compare ndim and dims[1..]; their first dimension may
 * differ between ranks). A submission without a shape (options NULL, shapes NULL,
 * or a plain call) is compared on counts only, and only with others without one:
 * a name submitted with a shape on one rank and without on another is a
 * mismatch ("(no shape)"), as every rank is expected to run the same code.
 * barrier and join take no shapes (shapes must be NULL). */
typedef struct kolo_options_t {
  int32_t process_set;        /* 0: the global set; otherwise an id from kolo_process_set_add */
  int32_t flags;              /* KOLO_OPTION_* bits, 0: none (this field was reserved_, 0) */
  const kolo_shape_t* shapes; /* NULL: no shape given (ranks agree on counts only, as the
                                 plain calls); otherwise one shape per tensor (n of them
                                 for the grouped calls), negotiated in full */
} kolo_options_t;
#define KOLO_OPTIONS_INIT {0, 0, NULL}

/* kolo_options_t.flags. KOLO_OPTION_DETERMINISTIC (allreduce and grouped
 * allreduce only; another call fails with KOLO_ERR_INVALID_ARGUMENT): a floating
 * SUM, AVERAGE or PRODUCT is reduced in rank order 0..n-1 for every element,
 * float16/bfloat16 accumulated in float32, so the same inputs give the same bits
 * whatever the transport, fusion and sizes (docs/deterministic.md). Every rank
 * must pass the same flag for a name (else KOLO_ERR_MISMATCH); KOLO_DETERMINISTIC=1
 * sets it on every allreduce. With NCCL or Adasum the call fails
 * (KOLO_ERR_UNSUPPORTED): they do not reduce in rank order. */
#define KOLO_OPTION_DETERMINISTIC 1

/* ---- lifecycle ---------------------------------------------------------- */

/* Initialises kolo on MPI_COMM_WORLD. If MPI is not initialised yet, kolo
 * initialises it (asking for MPI_THREAD_MULTIPLE) and finalises it at process
 * exit (MPI_Finalize waits for every rank; it is skipped after a peer failed);
 * otherwise it uses the caller's MPI, which must provide at
 * least MPI_THREAD_SERIALIZED (MULTIPLE if the caller makes MPI calls while
 * kolo is running), and leaves finalising it to the caller.
 * Reads and validates every KOLO_* environment knob: a bad value fails with
 * KOLO_ERR_INVALID_ARGUMENT and a message naming the variable. Collective: every
 * rank of the communicator must call it, and it succeeds on all ranks or fails on
 * all: if it fails on any rank, or a knob that must agree (kolo-info lists them)
 * differs between ranks, every rank gets the same status and message, naming the
 * ranks (and for a knob, each value and the ranks that hold it).
 * Called again in a process where kolo has started:
 * - KOLO_ERR_ALREADY_INITIALIZED while kolo runs here (nothing changes; a binding
 *   may treat it as success, as kolo.init() in Python does);
 * - KOLO_ERR_SHUTDOWN once another rank's kolo_shutdown (or a failure: a stall
 *   shutdown, a dead rank) has stopped kolo here but this rank has not called
 *   kolo_shutdown yet (kolo_is_initialized() is 0): call kolo_shutdown, then
 *   kolo_init again on every rank. */
KOLO_API kolo_status_t kolo_init(void);

/* As kolo_init, in the socket world (no MPI, no mpiexec): the ranks meet through
 * kolo's rendezvous store at `address`:`port` — rank 0 serves it there unless
 * something already listens (a launcher's kolo store) — or, with `address`
 * "file:<directory>" (port ignored), through a file store in that directory (one
 * host; one directory per job). `rank` is this rank (0 <= rank < size); every
 * rank passes the same `size`, `job_token` and `generation`. `job_token` is the
 * job's secret (up to 256 bytes): a connection that does not present it is
 * dropped; NULL or "" means no token. `generation` (>= 0) numbers this forming
 * of the world: ranks of different generations never join each other.
 * kolo_init picks this world by itself when torchrun's variables are set
 * (docs/socket-world.md). Collective like kolo_init; KOLO_INIT_TIMEOUT_SECONDS
 * bounds the wait for the store and the other ranks, and a failure names what was
 * missing (the store's address, the ranks that did not arrive). */
KOLO_API kolo_status_t kolo_init_store(const char* address, int port, int rank, int size,
                                       const char* job_token, int64_t generation);

/* kolo's rendezvous store, served by a launcher for the whole job (kolorun
 * --elastic does): ranks find it through KOLO_STORE_ADDR and KOLO_STORE_PORT, so
 * the store outlives any rank, and ranks of a stale generation learn at once that
 * the others moved on. kolo_store_serve binds `address`:`port` (port 0: a free
 * one; kolo_store_server_port says which) and serves on a thread of its own until
 * kolo_store_server_stop; `job_token` as in kolo_init_store. Needs no kolo_init;
 * any thread. A bind that fails names the address and the reason. */
typedef struct kolo_store_server kolo_store_server_t;
KOLO_API kolo_status_t kolo_store_serve(const char* address, int port, const char* job_token,
                                        kolo_store_server_t** server);
KOLO_API int kolo_store_server_port(const kolo_store_server_t* server);
KOLO_API void kolo_store_server_stop(kolo_store_server_t* server);

/* As kolo_init, on a communicator the caller created and owns, passed as its
 * Fortran handle (MPI_Comm_c2f(comm)), which must fit an MPI_Fint (32 bits).
 * kolo duplicates it; MPI must already be initialised; the caller finalises MPI
 * after kolo_shutdown. */
KOLO_API kolo_status_t kolo_init_comm(int64_t mpi_comm_fortran_handle);

/* Stops the coordinator. Handles still pending complete with KOLO_ERR_SHUTDOWN,
 * on this rank and on every other rank (one rank's shutdown reaches all). Returns
 * without waiting for the other ranks to call it (within the peer timeout,
 * KOLO_PEER_TIMEOUT_SECONDS, when a peer is dead or hung). Safe to call when not
 * initialised, and after another rank's shutdown or a peer failure stopped kolo
 * here (then optional: kolo released its shared resources already). */
KOLO_API kolo_status_t kolo_shutdown(void);

/* 1 when kolo is initialised and its coordinator still runs on this rank. A
 * shutdown started by another rank, or a failed peer, makes it 0 here too; kolo
 * has then released what it shares with the other ranks, so skipping
 * kolo_shutdown is harmless (what is left goes at exit; call it before another
 * kolo_init) and `if (kolo_is_initialized()) kolo_shutdown();` never blocks. */
KOLO_API int kolo_is_initialized(void);

/* Topology. Each returns -1 (and sets kolo_last_error) when not initialised.
 * local_* count ranks on this node; cross_* count nodes (cross_rank is this
 * node's index, cross_size the number of nodes, for ranks of equal local_rank). */
KOLO_API int kolo_rank(void);
KOLO_API int kolo_size(void);
KOLO_API int kolo_local_rank(void);
KOLO_API int kolo_local_size(void);
KOLO_API int kolo_cross_rank(void);
KOLO_API int kolo_cross_size(void);

/* Autotune (KOLO_AUTOTUNE=1; docs/timeline-and-autotune.md): *frozen = 1 once this rank has
 * applied the setting the search froze (or one read back from KOLO_AUTOTUNE_LOG),
 * *changes = how many settings it has applied, *digest = a hash of every (cycle,
 * setting) it applied: equal on every rank, as every rank applies rank 0's
 * decisions at the same cycle. Any pointer may be NULL. KOLO_ERR_NOT_INITIALIZED
 * when kolo is not running. */
KOLO_API kolo_status_t kolo_autotune_state(int* frozen, int64_t* changes, uint64_t* digest);

/* "MAJOR.MINOR.PATCH"; static storage. */
KOLO_API const char* kolo_version(void);

/* A JSON object describing this build and configuration: version, build flags,
 * transports (name -> {"built": bool, "reason": string}), knobs (name ->
 * {"default", "value", "doc", "agreement": "must agree" or "may differ"}). Static storage owned by kolo, valid until the
 * next call of this function. Works before kolo_init. */
KOLO_API const char* kolo_build_info_json(void);

/* 1 if the transport of that name ("mpi", "ring", "nccl", ...) is built into
 * this library, else 0; *reason (may be NULL) gets why not. */
KOLO_API int kolo_transport_built(const char* name, const char** reason);

/* ---- errors --------------------------------------------------------------- */

/* A constant string naming the code, e.g. "KOLO_ERR_MISMATCH". */
KOLO_API const char* kolo_status_string(kolo_status_t status);

/* The calling thread's last error message ("" if none); valid until the thread's
 * next kolo call. */
KOLO_API const char* kolo_last_error(void);

/* Bytes per element of dtype, or 0 for an unknown dtype. */
KOLO_API size_t kolo_dtype_size(kolo_dtype_t dtype);

/* ---- memory the node's ranks can read in place ---------------------------- */

/* Allocates at least `bytes` (> 0) of zeroed, page-aligned host memory that the
 * other ranks on this node can map. An allreduce of 8 KiB and up (one tensor,
 * no prescale) whose input and output lie in such memory on every rank of a node
 * is reduced from the peers' buffers in place, without passing through kolo's
 * shared-memory slots; an allgather, alltoall or reducescatter whose largest
 * block has 8 KiB and up (a broadcast of 16 KiB and up) whose every rank's
 * source lies in it reads the peers' buffers directly (docs/design.md, "Memory
 * kolo hands out"); any other buffer works as before. Such calls do not ride
 * with the negotiation (KOLO_AND_CARRY_BYTES). Any thread, before or after
 * kolo_init. Errors:
 * KOLO_ERR_INVALID_ARGUMENT (size 0, out NULL), KOLO_ERR_INTERNAL (the system
 * refused: the message names the call). */
KOLO_API kolo_status_t kolo_alloc(size_t bytes, void** out);
/* Frees memory from kolo_alloc; NULL is a no-op. The memory must not be in use
 * by an operation that has not completed. Errors: KOLO_ERR_INVALID_ARGUMENT for
 * an address kolo_alloc did not give, or gave and was freed. */
KOLO_API kolo_status_t kolo_free(void* ptr);

/* ---- allreduce ------------------------------------------------------------ */

/* Starts an allreduce of `count` elements named `name`.
 * - input == output reduces in place; otherwise input is only read.
 * - prescale multiplies every input element before the reduction, postscale
 *   every output element after it (AVERAGE applies 1/size on top of postscale).
 *   float32 and float64 are scaled in their own precision, float16 and bfloat16
 *   in float32 (rounded once). Integer dtypes take factors too, as in Horovod:
 *   each element is multiplied in float64 and converted back truncating toward
 *   zero (7 * 0.5 == 3, -7 * 0.5 == -3), saturating at the dtype's limits; an
 *   integer AVERAGE then divides the postscaled sum by the world size, truncating.
 *   int64 values beyond 2^53 round to float64 first. bool takes no factor (only
 *   1.0); integer factors on CUDA tensors are KOLO_ERR_UNSUPPORTED (the device
 *   kernels scale floating dtypes only). reducescatter follows the same rules.
 * - The buffers must stay valid and unmodified (input) / untouched (output) until
 *   the handle completes.
 * - count may be 0 (the handle still completes through negotiation).
 * On success *handle is a new handle; on failure nothing was enqueued, *handle is
 * NULL and the status says why (e.g. KOLO_ERR_DUPLICATE_NAME while a tensor of the
 * same name is in flight on this rank). */
KOLO_API kolo_status_t kolo_allreduce_async(const char* name, const void* input,
                                            void* output, int64_t count,
                                            kolo_dtype_t dtype, kolo_op_t op,
                                            double prescale, double postscale,
                                            kolo_device_t device,
                                            kolo_handle_t* handle);
/* As kolo_allreduce_async, with options (kolo_options_t; NULL: the defaults). */
KOLO_API kolo_status_t kolo_allreduce_async_ex(const char* name, const void* input,
                                               void* output, int64_t count,
                                               kolo_dtype_t dtype, kolo_op_t op,
                                               double prescale, double postscale,
                                               kolo_device_t device,
                                               const kolo_options_t* options,
                                               kolo_handle_t* handle);

/* Blocking allreduce: as kolo_allreduce_async followed by kolo_wait, without a
 * handle. Returns once the output holds the result (KOLO_OK), or with the
 * operation's error (kolo_last_error() says why: the same statuses and messages
 * as kolo_wait's), or with the submission's refusal (as kolo_allreduce_async's).
 * kolo_allreduce takes host memory and no factors (1.0); kolo_allreduce_ex takes
 * everything kolo_allreduce_async_ex takes. On one node, a rank whose thread may run
 * kolo's cycle itself hands the tensor to it directly, without the queue the
 * asynchronous calls go through: the cheapest way to reduce a small tensor. */
KOLO_API kolo_status_t kolo_allreduce(const char* name, const void* input, void* output,
                                      int64_t count, kolo_dtype_t dtype, kolo_op_t op);
KOLO_API kolo_status_t kolo_allreduce_ex(const char* name, const void* input, void* output,
                                         int64_t count, kolo_dtype_t dtype, kolo_op_t op,
                                         double prescale, double postscale,
                                         kolo_device_t device, const kolo_options_t* options);

/* ---- the other collectives ---------------------------------------------------
 *
 * Shapes: a tensor is `rows` along its first dimension, each row `row_count`
 * elements (the product of the other dimensions; 1 for a vector). Where ranks may
 * contribute different numbers of rows (allgather, alltoall), they must agree on
 * dtype and row_count.
 *
 * Outputs whose size only the negotiation knows (allgather, alltoall) are
 * allocated by kolo and owned by the handle: read them with kolo_handle_output()
 * and kolo_handle_splits() after completion; they are freed by
 * kolo_handle_release().
 *
 * As for kolo_allreduce_async: on success *handle is a new handle; on failure
 * nothing was enqueued and *handle is NULL.
 *
 * Each has a blocking form, as kolo_allreduce is to kolo_allreduce_async: it
 * returns once the operation is done, with its outcome (kolo_last_error() says
 * why it failed) or the submission's refusal, and may run on the calling thread
 * without the queue (the cheapest way to move a small tensor). The blocking
 * allgather and alltoall hand back their output on a completed handle (*handle on
 * KOLO_OK, NULL on any failure; release it as any other); the blocking broadcast
 * and reducescatter write into `output` and take no handle. The plain forms take
 * host memory (and the reducescatter no factors); the _ex forms everything the
 * asynchronous _ex forms take. */

/* Allgather: the output is every rank's rows concatenated in rank order;
 * kolo_handle_splits() gives the rows each rank contributed. A rank may
 * contribute 0 rows. */
KOLO_API kolo_status_t kolo_allgather_async(const char* name, const void* input, int64_t rows,
                                            int64_t row_count, kolo_dtype_t dtype,
                                            kolo_device_t device, kolo_handle_t* handle);
KOLO_API kolo_status_t kolo_allgather_async_ex(const char* name, const void* input,
                                               int64_t rows, int64_t row_count,
                                               kolo_dtype_t dtype, kolo_device_t device,
                                               const kolo_options_t* options,
                                               kolo_handle_t* handle);
/* Allgather into the caller's memory, as MPI_Allgather: every rank contributes
 * the same `rows` (of row_count elements) and `output` receives size * rows rows in
 * rank order (size: the world's, or the process set's). Ranks that give different
 * rows, or that call kolo_allgather for the same name, fail with KOLO_ERR_MISMATCH
 * on every rank, their outputs untouched. Host memory only; the output must not
 * overlap the input. kolo_allgather_into blocks (as kolo_allgather, without a
 * handle); kolo_allgather_into_async (and _async_ex, with options) returns a handle
 * that has splits but no output of its own. Memory from kolo_alloc lets the node's peers write their rows into it
 * directly. */
KOLO_API kolo_status_t kolo_allgather_into(const char* name, const void* input, void* output,
                                           int64_t rows, int64_t row_count, kolo_dtype_t dtype);
KOLO_API kolo_status_t kolo_allgather_into_ex(const char* name, const void* input, void* output,
                                              int64_t rows, int64_t row_count,
                                              kolo_dtype_t dtype, kolo_device_t device,
                                              const kolo_options_t* options);
KOLO_API kolo_status_t kolo_allgather_into_async(const char* name, const void* input,
                                                 void* output, int64_t rows, int64_t row_count,
                                                 kolo_dtype_t dtype, kolo_device_t device,
                                                 kolo_handle_t* handle);
KOLO_API kolo_status_t kolo_allgather_into_async_ex(const char* name, const void* input,
                                                    void* output, int64_t rows,
                                                    int64_t row_count, kolo_dtype_t dtype,
                                                    kolo_device_t device,
                                                    const kolo_options_t* options,
                                                    kolo_handle_t* handle);
KOLO_API kolo_status_t kolo_allgather(const char* name, const void* input, int64_t rows,
                                      int64_t row_count, kolo_dtype_t dtype,
                                      kolo_handle_t* handle);
KOLO_API kolo_status_t kolo_allgather_ex(const char* name, const void* input, int64_t rows,
                                         int64_t row_count, kolo_dtype_t dtype,
                                         kolo_device_t device, const kolo_options_t* options,
                                         kolo_handle_t* handle);

/* Broadcast `count` elements from rank `root` into `output` on every rank (in place
 * when input == output; on non-root ranks input is ignored and may be NULL). */
KOLO_API kolo_status_t kolo_broadcast_async(const char* name, const void* input, void* output,
                                            int64_t count, kolo_dtype_t dtype, int root,
                                            kolo_device_t device, kolo_handle_t* handle);
/* root is a global rank (as in Horovod), also within a process set. */
KOLO_API kolo_status_t kolo_broadcast_async_ex(const char* name, const void* input,
                                               void* output, int64_t count, kolo_dtype_t dtype,
                                               int root, kolo_device_t device,
                                               const kolo_options_t* options,
                                               kolo_handle_t* handle);
KOLO_API kolo_status_t kolo_broadcast(const char* name, const void* input, void* output,
                                      int64_t count, kolo_dtype_t dtype, int root);
KOLO_API kolo_status_t kolo_broadcast_ex(const char* name, const void* input, void* output,
                                         int64_t count, kolo_dtype_t dtype, int root,
                                         kolo_device_t device, const kolo_options_t* options);

/* Alltoall: rank r sends send_splits[d] rows of its input (consecutive, in
 * destination order) to each rank d; send_splits may be NULL for an even split
 * (rows must then be divisible by the world size). The output (handle-owned) is
 * the rows received, in source-rank order; kolo_handle_splits() gives the rows
 * received from each rank. */
KOLO_API kolo_status_t kolo_alltoall_async(const char* name, const void* input, int64_t rows,
                                           int64_t row_count, const int64_t* send_splits,
                                           kolo_dtype_t dtype, kolo_device_t device,
                                           kolo_handle_t* handle);
KOLO_API kolo_status_t kolo_alltoall_async_ex(const char* name, const void* input,
                                              int64_t rows, int64_t row_count,
                                              const int64_t* send_splits, kolo_dtype_t dtype,
                                              kolo_device_t device,
                                              const kolo_options_t* options,
                                              kolo_handle_t* handle);
KOLO_API kolo_status_t kolo_alltoall(const char* name, const void* input, int64_t rows,
                                     int64_t row_count, const int64_t* send_splits,
                                     kolo_dtype_t dtype, kolo_handle_t* handle);
KOLO_API kolo_status_t kolo_alltoall_ex(const char* name, const void* input, int64_t rows,
                                        int64_t row_count, const int64_t* send_splits,
                                        kolo_dtype_t dtype, kolo_device_t device,
                                        const kolo_options_t* options, kolo_handle_t* handle);

/* Reducescatter (op SUM or AVERAGE): the rows are reduced across ranks and rank r
 * receives shard r. Shards follow Horovod: with q = rows / size and m = rows % size,
 * ranks 0..m-1 get q+1 rows and the others q (kolo_reducescatter_shard_rows()).
 * `output` holds the caller's shard. */
KOLO_API kolo_status_t kolo_reducescatter_async(const char* name, const void* input, void* output,
                                                int64_t rows, int64_t row_count,
                                                kolo_dtype_t dtype, kolo_op_t op, double prescale,
                                                double postscale, kolo_device_t device,
                                                kolo_handle_t* handle);
KOLO_API kolo_status_t kolo_reducescatter_async_ex(const char* name, const void* input,
                                                   void* output, int64_t rows,
                                                   int64_t row_count, kolo_dtype_t dtype,
                                                   kolo_op_t op, double prescale,
                                                   double postscale, kolo_device_t device,
                                                   const kolo_options_t* options,
                                                   kolo_handle_t* handle);
KOLO_API kolo_status_t kolo_reducescatter(const char* name, const void* input, void* output,
                                          int64_t rows, int64_t row_count, kolo_dtype_t dtype,
                                          kolo_op_t op);
KOLO_API kolo_status_t kolo_reducescatter_ex(const char* name, const void* input, void* output,
                                             int64_t rows, int64_t row_count,
                                             kolo_dtype_t dtype, kolo_op_t op, double prescale,
                                             double postscale, kolo_device_t device,
                                             const kolo_options_t* options);
KOLO_API int64_t kolo_reducescatter_shard_rows(int64_t rows, int rank, int size);

/* Grouped allreduce: n tensors negotiated as one unit and reduced in one bucket —
 * never split across buckets, never mixed with other tensors — so results and
 * timing are deterministic. All share dtype, op and scale factors. A group larger
 * than the fusion threshold is still one bucket (reduced in place tensor by
 * tensor if it does not fit the fusion buffer). One handle for the group; names
 * must be distinct. */
KOLO_API kolo_status_t kolo_grouped_allreduce_async(int n, const char* const* names,
                                                    const void* const* inputs,
                                                    void* const* outputs, const int64_t* counts,
                                                    kolo_dtype_t dtype, kolo_op_t op,
                                                    double prescale, double postscale,
                                                    kolo_device_t device, kolo_handle_t* handle);
/* options->shapes, when given, holds n shapes (one per tensor). */
KOLO_API kolo_status_t kolo_grouped_allreduce_async_ex(
    int n, const char* const* names, const void* const* inputs, void* const* outputs,
    const int64_t* counts, kolo_dtype_t dtype, kolo_op_t op, double prescale,
    double postscale, kolo_device_t device, const kolo_options_t* options,
    kolo_handle_t* handle);

/* Grouped allgather: n allgathers (tensor i: rows[i] rows of row_counts[i]
 * elements from inputs[i]; ranks may differ in rows) negotiated as one unit, as
 * kolo_grouped_allreduce_async is — ready together, and a mismatch in any member
 * fails the whole group on every rank — and run member after member with no other
 * tensor between them. All share dtype and device. One handle: its output
 * (kolo_handle_output) is member 0's gathered rows, then member 1's, ...; its
 * splits (kolo_handle_splits, n * size values) are member-major: splits[i * size
 * + r] is the rows member i received from rank r. options->shapes, when given,
 * holds n shapes. Names must be distinct. */
KOLO_API kolo_status_t kolo_grouped_allgather_async(int n, const char* const* names,
                                                    const void* const* inputs,
                                                    const int64_t* rows,
                                                    const int64_t* row_counts,
                                                    kolo_dtype_t dtype, kolo_device_t device,
                                                    const kolo_options_t* options,
                                                    kolo_handle_t* handle);

/* Grouped reducescatter: n reducescatters (tensor i: rows[i] rows of
 * row_counts[i] elements from inputs[i]; this rank's shard of it into outputs[i],
 * kolo_reducescatter_shard_rows(rows[i], rank, size) rows) negotiated as one unit
 * like the grouped allreduce, sharing dtype, op (SUM or AVERAGE), scale factors
 * and device. options->shapes, when given, holds n shapes. */
KOLO_API kolo_status_t kolo_grouped_reducescatter_async(
    int n, const char* const* names, const void* const* inputs, void* const* outputs,
    const int64_t* rows, const int64_t* row_counts, kolo_dtype_t dtype, kolo_op_t op,
    double prescale, double postscale, kolo_device_t device, const kolo_options_t* options,
    kolo_handle_t* handle);

/* Blocks until every rank has entered the barrier. */
KOLO_API kolo_status_t kolo_barrier(void);
KOLO_API kolo_status_t kolo_barrier_ex(const kolo_options_t* options);

/* Join: this rank has run out of data. Until every rank has joined, allreduces
 * submitted by the other ranks complete as if this rank contributed zeros (AVERAGE
 * still divides by the full world size, as in Horovod); other collectives fail with
 * KOLO_ERR_INVALID_ARGUMENT while any rank is joined. Blocks until every rank has
 * joined; *last_rank (may be NULL) receives the last rank to join. */
KOLO_API kolo_status_t kolo_join(int* last_rank);
KOLO_API kolo_status_t kolo_join_ex(const kolo_options_t* options, int* last_rank);

/* ---- timeline ------------------------------------------------------------- */

/* Starts this rank's Chrome-trace timeline (chrome://tracing, Perfetto;
 * docs/timeline-and-autotune.md shows what it records). Per rank, not collective: a rank
 * records from its own start to its own stop, and may start while others do not.
 * Which file: a `path` with "%r" in it is every rank's, %r replaced by the rank; a
 * path ending in '/' or naming a directory gets kolo-timeline-rank<r>.json there,
 * every rank; any other path is written by rank 0 alone (as Horovod's), and the
 * other ranks' calls succeed without recording. mark_cycles != 0 adds an event per
 * negotiation cycle. KOLO_TIMELINE starts it at kolo_init the same way.
 * Errors: KOLO_ERR_INVALID_ARGUMENT for a NULL or empty path, a timeline already
 * started on this rank, or a file this rank cannot open (the message names it);
 * KOLO_ERR_NOT_INITIALIZED before kolo_init; KOLO_ERR_SHUTDOWN once kolo stopped. */
KOLO_API kolo_status_t kolo_timeline_start(const char* path, int mark_cycles);

/* Ends this rank's timeline: when it returns, the file is complete, valid JSON.
 * KOLO_ERR_INVALID_ARGUMENT when the timeline is not started (kolo's own stop, at
 * shutdown or a failure, has already completed the file);
 * KOLO_ERR_NOT_INITIALIZED before kolo_init. */
KOLO_API kolo_status_t kolo_timeline_stop(void);

/* ---- process sets ------------------------------------------------------------
 *
 * A process set is a subset of the ranks with its own negotiation (its own
 * pending table, response cache and stall inspector) and its own communicators:
 * a set whose names stall never holds up another set. Id 0 is the global set.
 * Sets may be added and removed while other sets work.
 *
 * A collective runs in the set named by options->process_set (the *_ex calls).
 * There "rank" and "size" in the collectives' descriptions are the set's (rank i
 * of the set is its i-th smallest member), except a broadcast's root, which is a
 * global rank (as in Horovod) that must be in the set. Outputs and splits are in
 * set-rank order; join's AVERAGE divides by the set's size and its *last_rank is
 * a global rank. A rank outside the set, or an unknown or removed id:
 * KOLO_ERR_INVALID_ARGUMENT, nothing enqueued. Names are in flight per set: the
 * same name may be in flight in two sets at once. */

/* Adds the set of the n ranks in `ranks` (global ranks, any order, no
 * duplicates) and returns its id in *id (1, 2, ... in order of addition; ids are
 * never reused). Collective over every rank, in the same order on every rank:
 * each passes the same members, and a rank outside the set gets the id too.
 * Members list differently on some rank, a duplicate, a rank out of range, an
 * empty set, a set with the members of an existing set (the global one
 * included): KOLO_ERR_INVALID_ARGUMENT on every rank, with one message naming
 * what was wrong, and no set is added. Needs MPI_THREAD_MULTIPLE when the caller
 * initialised MPI (kolo asks for it when it initialises MPI). */
KOLO_API kolo_status_t kolo_process_set_add(const int* ranks, int n, int32_t* id);

/* kolo_shutdown (on any rank) and a failure stop every process set too, on every
 * rank: finish every set's work (a global kolo_barrier) before shutting down. */

/* Removes set `id`: collective over every rank, each passing the same id. The
 * global set (0), an unknown or removed id, ranks passing different ids, or
 * operations of the set in flight on any rank: KOLO_ERR_INVALID_ARGUMENT on every
 * rank, naming the ranks, and the set stays. */
KOLO_API kolo_status_t kolo_process_set_remove(int32_t id);

/* This rank's rank in set `id`, or -1 when it is not a member (or the id is
 * unknown: then kolo_last_error says so). */
KOLO_API int kolo_process_set_rank(int32_t id);
/* The number of ranks in set `id`, or -1 for an unknown id. */
KOLO_API int kolo_process_set_size(int32_t id);
/* Copies the set's global ranks, ascending, into ranks[0..n) (at most n of them);
 * *size (may be NULL) receives the set's size. */
KOLO_API kolo_status_t kolo_process_set_ranks(int32_t id, int* ranks, int n, int* size);
/* 1 when this rank is in set `id`, 0 when not, -1 for an unknown id. */
KOLO_API int kolo_process_set_included(int32_t id);

/* ---- handles -------------------------------------------------------------- */

/* *done = 1 when the handle has completed (successfully or not), else 0. Never
 * blocks. Returns KOLO_OK, or KOLO_ERR_INVALID_ARGUMENT for a NULL argument. */
KOLO_API kolo_status_t kolo_poll(kolo_handle_t handle, int* done);

/* Blocks until the handle completes or timeout_seconds pass (a negative timeout,
 * or one beyond 1e9 s, waits forever; NaN is KOLO_ERR_INVALID_ARGUMENT). Returns
 * the handle's status once complete, or
 * KOLO_ERR_TIMEOUT (the handle stays live; wait again or release it). Waiting
 * spins only briefly, then sleeps: it does not starve the coordinator. */
KOLO_API kolo_status_t kolo_wait(kolo_handle_t handle, double timeout_seconds);

/* KOLO_IN_PROGRESS until complete, then the operation's status
 * (KOLO_ERR_INVALID_ARGUMENT for a NULL handle). */
KOLO_API kolo_status_t kolo_handle_status(kolo_handle_t handle);

/* The operation's message: "" on success, else what went wrong (for a mismatch:
 * the tensor, the field and the value on each rank); "" for a NULL handle. Valid
 * until release. */
KOLO_API const char* kolo_handle_message(kolo_handle_t handle);

/* The handle-owned output of an allgather, grouped allgather or alltoall, valid
 * until release:
 * *data and *bytes (either may be NULL). Other operations have no such output
 * (*bytes = 0). KOLO_ERR_INVALID_ARGUMENT before completion. */
KOLO_API kolo_status_t kolo_handle_output(kolo_handle_t handle, const void** data, int64_t* bytes);

/* Per-rank row counts of an allgather (rows each rank contributed) or alltoall
 * (rows received from each rank): copies min(n, size) values into splits, which
 * has room for n (n >= 0; splits may be NULL only when n is 0). A grouped
 * allgather of m tensors has m * size values, member-major.
 * KOLO_ERR_INVALID_ARGUMENT before completion. */
KOLO_API kolo_status_t kolo_handle_splits(kolo_handle_t handle, int64_t* splits, int n);

/* Where a completed operation's time went, for kolo-allreduce-perf --breakdown:
 * copies min(n, KOLO_NUM_PHASES) times into ns, each in nanoseconds on the
 * process's monotonic clock (CLOCK_MONOTONIC), 0 for a phase not reached:
 *   [0] submitted (queued by the submit call)  [1] its negotiation cycle began
 *   [2] negotiated (ready on every rank)       [3] its transport call began
 *   [4] the transport finished (host work)     [5] the handle completed
 * KOLO_ERR_INVALID_ARGUMENT before completion. */
#define KOLO_NUM_PHASES 6
KOLO_API kolo_status_t kolo_handle_phases(kolo_handle_t handle, int64_t* ns, int n);

/* For a CUDA operation: makes `stream` (a cudaStream_t on the operation's
 * device; NULL: the legacy default stream) wait until the operation's device
 * work is done, without blocking the CPU on the GPU. It blocks the CPU only
 * until kolo has queued the work (after negotiation with the other ranks).
 * Returns KOLO_OK, or the operation's error if it already failed (then nothing
 * is queued on `stream`; a later failure shows in kolo_wait/kolo_handle_status),
 * or KOLO_ERR_INVALID_ARGUMENT for a NULL handle or a CPU operation. */
KOLO_API kolo_status_t kolo_handle_stream_wait(kolo_handle_t handle, void* stream);

/* Releases the caller's handle. Releasing an incomplete handle does not cancel
 * the operation: it still runs, and the buffers must stay valid until it would
 * have completed (wait first unless you know better). NULL is ignored. */
KOLO_API void kolo_handle_release(kolo_handle_t handle);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KOLO_KOLO_H_ */
