#include "core/tensor_queue.h"

#include "common/check.h"

namespace kolo::core {

Status TensorQueue::push(TensorEntry entry) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    KOLO_RETURN_IF_ERROR_AS_IS(admit_locked(entry.request.name));
    queue_.push_back(std::move(entry));
    queued_.store(queue_.size(), std::memory_order_release);
  }
  wake();
  return Status::OK();
}

Status TensorQueue::admit(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  return admit_locked(name);
}

Status TensorQueue::admit_locked(const std::string& name) {
  if (closed_) return close_reason_;
  // Note [A cached operation's storage is reused] (coordinator.h): a finished
  // name's node and string, when there is one.
  bool added;
  if (auto node = spare_names_.take()) {
    node.value() = name;
    auto inserted = in_flight_.insert(std::move(node));
    added = inserted.inserted;
    spare_names_.keep(std::move(inserted.node));  // given back when refused
  } else {
    added = in_flight_.insert(name).second;
  }
  if (!added) {
    return Status(Code::kDuplicateName, "a tensor named '" + name +
                                            "' is already in flight on this rank; wait "
                                            "for it before submitting the name again");
  }
  return Status::OK();
}

void TensorQueue::set_waker(std::function<void()> waker) {
  std::lock_guard<std::mutex> lock(waker_mu_);
  waker_ = std::move(waker);
}

void TensorQueue::drain(std::vector<TensorEntry>* out) {
  std::lock_guard<std::mutex> lock(mu_);
  out->swap(queue_);
  queued_.store(0, std::memory_order_release);
}

void TensorQueue::finish(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  spare_names_.keep(in_flight_.extract(name));
}

std::vector<TensorEntry> TensorQueue::close(Status reason) {
  std::lock_guard<std::mutex> lock(mu_);
  closed_ = true;
  close_reason_ = std::move(reason);
  std::vector<TensorEntry> out;
  out.swap(queue_);
  queued_.store(0, std::memory_order_release);
  for (const TensorEntry& e : out) in_flight_.erase(e.request.name);
  return out;
}

void TensorQueue::wake() {
  std::lock_guard<std::mutex> lock(waker_mu_);
  if (waker_) waker_();
}

}  // namespace kolo::core
