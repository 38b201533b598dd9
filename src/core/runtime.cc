#include "core/runtime.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "common/logging.h"
#include "common/check.h"
#include "kolo/kolo.h"

namespace kolo::core {
namespace {

bool ranges_overlap(const void* a, const void* b, size_t bytes) {
  auto x = reinterpret_cast<uintptr_t>(a);
  auto y = reinterpret_cast<uintptr_t>(b);
  return x < y + bytes && y < x + bytes;
}

Status check_scale(const std::string& prefix, const char* which, double factor, DataType dtype) {
  if (!std::isfinite(factor))
    return invalid_argument(prefix + which + " must be finite, got " + std::to_string(factor));
  if (factor != 1.0 && !is_floating(dtype))
    return invalid_argument(prefix + which + " " + std::to_string(factor) +
                            " needs a floating-point dtype, not " + dtype_name(dtype) +
                            " (scale factors other than 1.0 apply to float16, bfloat16, "
                            "float32 and float64 only)");
  return Status::OK();
}

// Every check a caller can fail on this rank alone, before anything is enqueued.
Status validate_args(const AllreduceArgs& a, bool cuda_supported) {
  if (a.name == nullptr) return invalid_argument("name is NULL");
  const size_t name_length = std::strlen(a.name);
  if (name_length == 0) return invalid_argument("name is empty");
  if (name_length > KOLO_MAX_NAME_LENGTH)
    return invalid_argument("name is " + std::to_string(name_length) +
                            " bytes long; the limit is " + std::to_string(KOLO_MAX_NAME_LENGTH));
  const std::string name = std::string("tensor '") + a.name + "': ";
  if (!is_valid(a.dtype))
    return invalid_argument(name + "unknown dtype " + std::to_string(static_cast<int>(a.dtype)));
  if (!is_valid(a.op))
    return invalid_argument(name + "unknown op " + std::to_string(static_cast<int>(a.op)));
  if (!is_valid(a.device.kind))
    return invalid_argument(name + "unknown device kind " +
                            std::to_string(static_cast<int>(a.device.kind)));
  if (a.count < 0) return invalid_argument(name + "negative count " + std::to_string(a.count));
  const size_t elem = dtype_size(a.dtype);
  if (static_cast<uint64_t>(a.count) > std::numeric_limits<int64_t>::max() / elem)
    return invalid_argument(name + "count " + std::to_string(a.count) + " of " +
                            dtype_name(a.dtype) + " overflows the byte size");
  if (a.count > 0 && (a.input == nullptr || a.output == nullptr))
    return invalid_argument(name + (a.input == nullptr ? "input" : "output") + " is NULL");
  const size_t bytes = static_cast<size_t>(a.count) * elem;
  if (a.input != a.output && a.count > 0 && ranges_overlap(a.input, a.output, bytes))
    return invalid_argument(name + "input and output overlap without being equal");
  if (a.op == ReduceOp::kAverage && a.dtype == DataType::kBool)
    return invalid_argument(name + "average is not defined for bool");
  if (Status s = check_scale(name, "prescale", a.prescale, a.dtype); !s.ok()) return s;
  if (Status s = check_scale(name, "postscale", a.postscale, a.dtype); !s.ok()) return s;
  if (a.device.kind == DeviceKind::kCuda && !cuda_supported)
    return unsupported(name + "CUDA memory needs the NCCL transport, which this world does not offer");
  return Status::OK();
}

}  // namespace

Runtime::Runtime(transport::World world, const Config& config)
    : world_(std::move(world)), config_(config), topology_(world_.control->topology()) {
  for (const auto& t : world_.transports)
    if (std::strcmp(t->name(), "nccl") == 0) cuda_supported_ = true;
}

Status Runtime::start(transport::World world, const Config& config, std::unique_ptr<Runtime>* out) {
  log::set_level(config.log_level);
  log::set_rank(world.control->topology().rank);
  std::unique_ptr<Runtime> rt(new Runtime(std::move(world), config));
  rt->coordinator_ = std::make_unique<Coordinator>(rt->world_, rt->config_, rt->queue_,
                                                   rt->shutdown_requested_);
  KOLO_RETURN_IF_ERROR(rt->coordinator_->validate());
  rt->running_.store(true, std::memory_order_release);
  Runtime* raw = rt.get();
  rt->thread_ = std::thread([raw] {
    raw->coordinator_->run();
    raw->running_.store(false, std::memory_order_release);
  });
  *out = std::move(rt);
  return Status::OK();
}

Runtime::~Runtime() { shutdown(); }

Status Runtime::allreduce_async(const AllreduceArgs& args, std::shared_ptr<HandleState>* handle) {
  // Caller mistakes go back as they are, without file:line: they are the user's message.
  if (Status s = validate_args(args, cuda_supported_); !s.ok()) return s;
  TensorEntry entry;
  entry.request.name = args.name;
  TensorParams& p = entry.request.params;
  p.collective = Collective::kAllreduce;
  p.dtype = args.dtype;
  p.op = args.op;
  p.device = args.device.kind;
  p.count = args.count;
  p.prescale = args.prescale;
  p.postscale = args.postscale;
  entry.input = args.input;
  entry.output = args.output;
  entry.device = args.device;
  entry.handle = std::make_shared<HandleState>();
  entry.enqueued = Clock::now();
  auto h = entry.handle;
  if (Status s = queue_.push(std::move(entry)); !s.ok()) return s;
  *handle = std::move(h);
  return Status::OK();
}

void Runtime::shutdown() {
  std::lock_guard<std::mutex> lock(shutdown_mu_);
  if (!thread_.joinable()) return;
  shutdown_requested_.store(true, std::memory_order_release);
  queue_.wake();
  thread_.join();
  coordinator_.reset();
}

}  // namespace kolo::core
