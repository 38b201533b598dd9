#include "core/tensor_queue.h"

namespace kolo::core {

Status TensorQueue::push(TensorEntry entry) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return close_reason_;
    // Note [A cached operation's storage is reused] (coordinator.h): a finished
    // name's node and string, when there is one.
    bool added;
    if (spare_names_.empty()) {
      added = in_flight_.insert(entry.request.name).second;
    } else {
      auto node = std::move(spare_names_.back());
      spare_names_.pop_back();
      node.value() = entry.request.name;
      auto inserted = in_flight_.insert(std::move(node));
      added = inserted.inserted;
      if (!added) spare_names_.push_back(std::move(inserted.node));
    }
    if (!added) {
      return Status(Code::kDuplicateName, "a tensor named '" + entry.request.name +
                                              "' is already in flight on this rank; wait "
                                              "for it before submitting the name again");
    }
    queue_.push_back(std::move(entry));
    queued_.store(queue_.size(), std::memory_order_release);
  }
  wake();
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
  auto node = in_flight_.extract(name);
  if (node && spare_names_.size() < kSpareNames) spare_names_.push_back(std::move(node));
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
