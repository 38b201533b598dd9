// Ranks as threads (Gloo's BaseTest::spawn): runs fn(rank, world) on one thread per
// loopback world and joins them all.
#pragma once

#include <string>
#include <thread>
#include <vector>

#include "transport/world.h"
#include "transports/loopback/loopback_world.h"

namespace kolo::testing {

template <typename Fn>
void spawn(int size, Fn fn, int node_size = 0) {
  std::vector<transport::World> worlds = loopback::create_worlds(size, node_size);
  std::vector<std::thread> threads;
  threads.reserve(size);
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&fn, &worlds, rank] { fn(rank, worlds[rank]); });
  }
  for (std::thread& t : threads) t.join();
}

// The world's transport of that name, or null.
inline transport::Transport* find_transport(transport::World& world, const char* name) {
  for (auto& t : world.transports) {
    if (std::string(t->name()) == name) return t.get();
  }
  return nullptr;
}

}  // namespace kolo::testing
