// SpareNodes: the nodes of a node-based standard container (std::map, std::set,
// std::unordered_set) whose entries were extracted, kept so that the next
// insertions reuse them instead of allocating (Note [A cached operation's
// storage is reused] in coordinator.h). At most kMost are kept. Not thread-safe:
// it belongs to its container and shares its lock.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace kolo::core {

template <typename Container>
class SpareNodes {
 public:
  using Node = typename Container::node_type;

  // Keeps `node`; an empty one, or one past kMost, is dropped.
  void keep(Node node) {
    if (node && nodes_.size() < kMost) nodes_.push_back(std::move(node));
  }

  // A kept node (its old contents still in it), or an empty one if none is kept.
  Node take() {
    if (nodes_.empty()) return Node();
    Node node = std::move(nodes_.back());
    nodes_.pop_back();
    return node;
  }

 private:
  static constexpr size_t kMost = 256;
  std::vector<Node> nodes_;
};

}  // namespace kolo::core
