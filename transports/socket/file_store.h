// The rendezvous store in a directory, for the ranks of one host (or hosts
// that share a file system with POSIX rename and flock). Each key is a file;
// set writes a temporary file and renames it over the key, so a reader sees
// the old value or the new one, never half of one; add, compare_and_set, set
// and delete_prefix hold an flock on the directory's lock file; waits poll
// with a back-off from 1 ms to 100 ms. The directory's permissions are its
// security: kolo creates it 0700 when it does not exist.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "transports/socket/store.h"

namespace kolo::socket {

class FileStore : public Store {
 public:
  // Creates `directory` (and its parents) if needed. `timeout` bounds each
  // call's wait for the lock; wait() and get() take their own.
  static Status open(const std::string& directory, std::chrono::milliseconds timeout,
                     std::unique_ptr<FileStore>* out);

  Status set(const std::string& key, const std::string& value) override;
  Status try_get(const std::string& key, std::string* value, bool* found) override;
  Status wait(const std::vector<std::string>& keys, Duration timeout) override;
  Status add(const std::string& key, int64_t delta, int64_t* value) override;
  Status compare_and_set(const std::string& key, const std::string& expected,
                         const std::string& desired, std::string* current) override;
  Status delete_prefix(const std::string& prefix, int64_t* removed) override;
  std::string describe() const override { return "the file store in " + directory_; }

 private:
  class Lock;
  FileStore(std::string directory, std::chrono::milliseconds timeout)
      : directory_(std::move(directory)), timeout_(timeout) {}
  Status path_of(const std::string& key, std::string* path) const;
  Status write_locked(const std::string& key, const std::string& value);

  std::string directory_;
  std::chrono::milliseconds timeout_;
};

}  // namespace kolo::socket
