// Segment: the node's shared memory, one POSIX shared-memory object (shm_open,
// ftruncate, mmap) per world per node, mapped by every local rank.
//
// Naming: kolo-<token>-<node> under /dev/shm, where the token is 64 random bits
// drawn by the world's rank 0 (node.h) and the node is the world's index of
// the node, so two jobs on one host, and two worlds of one job, never meet.
//
// Crash safety (Note [A segment outlives no job]):
// - create() makes the object with O_EXCL and writes a header (magic, version,
//   token, creator pid, size) before anyone else opens it; open() refuses an
//   object whose header is not the one it was told to expect.
// - The creator unlinks the name as soon as every local rank has mapped it
//   (Node::create), so a job killed after that leaves nothing in /dev/shm; the
//   memory goes with the last mapping.
// - A name found in the way at create() is removed when its creator has exited
//   (reclaimed), and refused with a message naming the running creator when it
//   has not: never reused. create() first removes every kolo-* object whose
//   creator has exited (reclaim_stale_segments).
//
// Not thread-safe; a Segment belongs to one Node. The destructor unmaps and closes
// (and unlinks, when this process created the name and it is still there).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"

namespace kolo::shm {

// The first bytes of every segment. Written by the creator before anyone opens
// the name; read by the others to check they opened the right one, and by
// reclaim_stale_segments() to tell whose a left-over object is.
struct SegmentHeader {
  static constexpr uint64_t kMagic = 0x65646f6e6f6c6f6bULL;  // "kolonode"
  static constexpr uint32_t kVersion = 1;
  uint64_t magic = 0;
  uint32_t version = 0;
  int32_t creator_pid = 0;
  uint64_t token = 0;
  uint64_t bytes = 0;  // the whole segment, header included
  int32_t node = 0;
  int32_t local_size = 0;
};

class Segment {
 public:
  // The name of node `node`'s segment in the world whose rank 0 drew `token`
  // (as shm_open takes it: "/kolo-...").
  static std::string name(uint64_t token, int node);

  // Creates `name` (O_EXCL, mode 0600) of header.bytes bytes, maps it and writes
  // `header` (creator_pid: this process; magic, version: set here). A name in
  // the way is reclaimed if its creator has exited, else refused (kTransport,
  // naming the creator). Errors name the call and errno (ENOSPC: /dev/shm full).
  static Status create(const std::string& name, SegmentHeader header,
                       std::unique_ptr<Segment>* out);
  // Opens and maps `name`, made by create() on another rank; fails unless its
  // header matches `expected` (token, size, node, local size, creator pid).
  static Status open(const std::string& name, const SegmentHeader& expected,
                     std::unique_ptr<Segment>* out);
  ~Segment();
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  // Gives bytes [offset, offset + bytes) memory now (posix_fallocate), so that a
  // full /dev/shm is an error naming it here rather than a SIGBUS when the
  // pages are first touched. Each rank reserves its own part: the pages are
  // then allocated by the process that uses them (first touch, NUMA-local).
  Status reserve(size_t offset, size_t bytes);
  // Removes the name (the mapping stays). Creator only; once.
  Status unlink();

  char* base() const { return base_; }
  size_t bytes() const { return bytes_; }
  const std::string& name() const { return name_; }

 private:
  Segment() = default;
  Status map(int fd, size_t bytes);

  std::string name_;
  int fd_ = -1;  // open for reserve(); closed by the destructor
  char* base_ = nullptr;
  size_t bytes_ = 0;
  bool named_by_me_ = false;  // created here and not yet unlinked
};

// Removes every kolo-* object in /dev/shm whose creator process has exited (its
// header names a pid that no longer exists), and every kolo-* object that
// still has no header a minute after it was made (its creator died between
// creating and writing it). Objects of running processes, of other users and of
// other programs are left alone. Returns how many were removed; each removal is
// logged at info level.
int reclaim_stale_segments();

// Note [A segment outlives no job]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A POSIX shared-memory object lives until it is unlinked, not until its
// processes exit: a job killed with its segments named would leave them in
// /dev/shm (RAM) for good, and a later job that found one under its name and
// used it would read another job's counters. So the name lives only for the
// moments of Node::create (the creator unlinks it once every local rank has
// mapped it), names are drawn at random per world, a name in the way is never
// reused, and what a killed creator left is removed by the next job on the host.

}  // namespace kolo::shm
