#include "core/executor_context.h"

namespace kolo::core {

using transport::CollectiveView;
using transport::Work;

namespace {

// The members' device Work, complete when every part is. The parts run in order
// on the transport's stream, so the last part's done event is the group's.
class GroupWork : public Work {
 public:
  explicit GroupWork(std::vector<std::unique_ptr<Work>> parts) : parts_(std::move(parts)) {}
  bool test() override {
    for (auto& p : parts_)
      if (!p->test()) return false;
    return true;
  }
  Status wait() override {
    Status first;
    for (auto& p : parts_) {
      Status s = p->wait();
      if (first.ok() && !s.ok()) first = std::move(s);
    }
    return first;
  }
  std::shared_ptr<transport::DeviceEvent> done_event() const override {
    return parts_.back()->done_event();
  }

 private:
  std::vector<std::unique_ptr<Work>> parts_;
};

}  // namespace

std::unique_ptr<Work> group_work(std::vector<std::unique_ptr<Work>> parts) {
  return std::make_unique<GroupWork>(std::move(parts));
}

CollectiveView ExecutionContext::view_of(const TensorEntry& entry) const {
  CollectiveView view;
  view.input = entry.input;
  view.output = entry.output;
  view.dtype = entry.request.params.dtype;
  view.device = entry.device;
  view.ready = entry.ready;
  return view;
}

Status ExecutionContext::resolve(Device* device) const {
  if (device_support == nullptr) return unsupported("CUDA tensors need the NCCL transport");
  return device_support->resolve(device);
}

Status ExecutionContext::allocate_output(TensorEntry& entry, size_t bytes) {
  if (entry.device.kind != DeviceKind::kCuda) {
    entry.handle->output = outputs_->take(bytes);
    return Status::OK();
  }
  if (device_support == nullptr) return unsupported("CUDA tensors need the NCCL transport");
  std::shared_ptr<char> block;
  KOLO_RETURN_IF_ERROR(device_support->allocate(entry.device, bytes, &block));
  entry.handle->output = OutputBuffer(std::move(block), bytes);
  return Status::OK();
}

Status ExecutionContext::start_on_transport(Collective op, CollectiveView view,
                                            std::unique_ptr<Work>* work) {
  view.sequence = sequence;
  transport::Transport* transport = nullptr;
  KOLO_RETURN_IF_ERROR(selector.select_collective(op, view, &transport));
  // Note [Data rides with the AND] (negotiator.h): every part is here already.
  if (carried != nullptr && transport->carrier() == carrier) {
    transport_name = carrier->name();
    carrier->finish(op, view, *carried);
    return Status::OK();
  }
  transport_name = transport->name();
  *work = transport->collective(op, view);
  return Status::OK();
}

}  // namespace kolo::core
