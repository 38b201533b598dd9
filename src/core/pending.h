// Pending: the coordinator's table of this rank's tensors that a cycle has
// drained and not yet completed, by name. A std::map that keeps the nodes of
// erased entries and reuses them for the next names (Note [A cached operation's
// storage is reused] in coordinator.h). Coordinator state: one thread at a time.
#pragma once

#include <map>
#include <string>
#include <utility>

#include "core/spare_nodes.h"
#include "core/tensor_queue.h"

namespace kolo::core {

class Pending {
 public:
  using Map = std::map<std::string, TensorEntry>;
  using iterator = Map::iterator;
  using const_iterator = Map::const_iterator;

  iterator find(const std::string& name) { return map_.find(name); }
  iterator begin() { return map_.begin(); }
  iterator end() { return map_.end(); }
  const_iterator begin() const { return map_.begin(); }
  const_iterator end() const { return map_.end(); }
  bool empty() const { return map_.empty(); }
  size_t size() const { return map_.size(); }

  // Adds `entry` under `name` (which may be the entry's own request.name);
  // false, with nothing moved, if the name is already there.
  bool emplace(const std::string& name, TensorEntry&& entry) {
    const iterator at = map_.lower_bound(name);
    if (at != map_.end() && at->first == name) return false;
    Map::node_type node = spare_.take();
    if (!node) {
      map_.emplace_hint(at, name, std::move(entry));
      return true;
    }
    node.key() = name;  // before the entry moves: `name` may live in it
    node.mapped() = std::move(entry);
    map_.insert(at, std::move(node));
    return true;
  }

  // Erases the entry at `it`; its node is kept for a later emplace().
  void erase(iterator it) {
    Map::node_type node = map_.extract(it);
    node.mapped() = TensorEntry();  // drop the handle and buffers it holds now
    spare_.keep(std::move(node));
  }

  void clear() { map_.clear(); }

 private:
  Map map_;
  SpareNodes<Map> spare_;
};

}  // namespace kolo::core
