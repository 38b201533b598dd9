// Store: the rendezvous key-value store the ranks of a socket world meet
// through (tcp_store.h over TCP, file_store.h in a directory of one host).
//
// Values are bytes. Every call is bounded: wait() and get() by the timeout
// given, the others by the store's own per-call limit; on timeout or refusal
// the error names the store (describe()) and what was asked. Keys are plain
// strings; ScopedStore puts a prefix in front of every key (Note [Generations]
// in frame.h: each world's keys live under its generation).
//
// Contract: one Store object is used by one thread at a time (kolo_init's);
// different objects, in different processes, may use one store at once, and
// add() and compare_and_set() are atomic across them.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace kolo::socket {

class Store {
 public:
  using Duration = std::chrono::steady_clock::duration;
  virtual ~Store() = default;

  virtual Status set(const std::string& key, const std::string& value) = 0;
  // Waits up to `timeout` for `key`, then reads it.
  virtual Status get(const std::string& key, Duration timeout, std::string* value);
  // Reads `key` without waiting; *found says whether it exists (then *value is set).
  virtual Status try_get(const std::string& key, std::string* value, bool* found) = 0;
  // Returns once every key exists; kTimeout naming the missing keys after `timeout`.
  virtual Status wait(const std::vector<std::string>& keys, Duration timeout) = 0;
  // Adds `delta` to the integer at `key` (a missing key is 0) and returns the sum.
  virtual Status add(const std::string& key, int64_t delta, int64_t* value) = 0;
  // Sets `key` to `desired` if it holds `expected` (a missing key matches an
  // empty `expected`); *current gets the value after the call either way.
  virtual Status compare_and_set(const std::string& key, const std::string& expected,
                                 const std::string& desired, std::string* current) = 0;
  // Removes every key that starts with `prefix`.
  virtual Status delete_prefix(const std::string& prefix, int64_t* removed) = 0;

  // "the store at 10.0.0.1:29501", "the file store in /tmp/job": for messages.
  virtual std::string describe() const = 0;
};

// A view of `base` with `prefix` in front of every key; does not own `base`.
class ScopedStore : public Store {
 public:
  ScopedStore(Store& base, std::string prefix) : base_(base), prefix_(std::move(prefix)) {}
  Status set(const std::string& key, const std::string& value) override;
  Status try_get(const std::string& key, std::string* value, bool* found) override;
  Status wait(const std::vector<std::string>& keys, Duration timeout) override;
  Status add(const std::string& key, int64_t delta, int64_t* value) override;
  Status compare_and_set(const std::string& key, const std::string& expected,
                         const std::string& desired, std::string* current) override;
  Status delete_prefix(const std::string& prefix, int64_t* removed) override;
  std::string describe() const override { return base_.describe(); }
  const std::string& prefix() const { return prefix_; }

 private:
  Store& base_;
  std::string prefix_;
};

// "kolo/g<generation>/": where the keys of one generation live.
std::string generation_prefix(uint64_t generation);

// "key1, key2, key3 and 5 more": keys for an error message.
std::string list_keys(const std::vector<std::string>& keys, size_t show = 4);

}  // namespace kolo::socket
