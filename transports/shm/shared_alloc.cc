#include "transports/shm/shared_alloc.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>

namespace kolo::shm {
namespace {

struct Allocation {
  size_t bytes = 0;
  int fd = -1;  // -1: private since a fork (Note [kolo_alloc memory across fork])
};

// The live allocations of this process, by base address.
struct Registry {
  std::mutex mu;
  std::map<uintptr_t, Allocation> live;  // guarded by mu
  std::atomic<uint64_t> epoch{0};        // frees so far
};

void lock_for_fork();
void unlock_after_fork();
void make_private_after_fork();

Registry& registry() {
  static Registry* r = [] {
    auto* made = new Registry();  // never destroyed: frees may come at exit
    pthread_atfork(&lock_for_fork, &unlock_after_fork, &make_private_after_fork);
    return made;
  }();
  return *r;
}

// Note [kolo_alloc memory across fork]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A shared mapping stays shared in a forked child, where ordinary memory would be
// copied on write: a child (a DataLoader worker) writing a tensor it inherited,
// or two processes reusing the same freed block (kolo.torch's allocator keeps
// them), would write each other's memory. So the child maps every allocation
// again, privately, at the same address (MAP_PRIVATE over the same memfd): its
// writes go to pages of its own, with no copy at the fork. Its allocations are
// no longer the node's to read (find_shared says no); kolo_free unmaps them.
// The registry's lock is held across the fork so the child finds it free.
void lock_for_fork() { registry().mu.lock(); }
void unlock_after_fork() { registry().mu.unlock(); }

void make_private_after_fork() {
  Registry& r = registry();
  for (auto& [base, a] : r.live) {
    if (a.fd < 0) continue;
    void* p = reinterpret_cast<void*>(base);
    // On failure the mapping stays shared: nothing better can be done in a child.
    (void)mmap(p, a.bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, a.fd, 0);
    close(a.fd);
    a.fd = -1;
  }
  r.mu.unlock();
}

Status errno_error(const std::string& what, int err) {
  return internal_error(what + ": " + std::strerror(err));
}

}  // namespace

Status shared_alloc(size_t bytes, void** out) {
  *out = nullptr;
  if (bytes == 0) return invalid_argument("kolo_alloc: a size of 0 bytes");
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  if (bytes > SIZE_MAX - page) {
    return invalid_argument("kolo_alloc: " + std::to_string(bytes) + " bytes is too large");
  }
  const size_t rounded = (bytes + page - 1) / page * page;
  const int fd = memfd_create("kolo-alloc", MFD_CLOEXEC);
  if (fd < 0) return errno_error("kolo_alloc: memfd_create", errno);
  if (ftruncate(fd, static_cast<off_t>(rounded)) != 0) {
    const int err = errno;
    close(fd);
    return errno_error("kolo_alloc: ftruncate to " + std::to_string(rounded) + " bytes", err);
  }
  void* p = mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    close(fd);
    return errno_error("kolo_alloc: mmap of " + std::to_string(rounded) + " bytes", err);
  }
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.live[reinterpret_cast<uintptr_t>(p)] = Allocation{rounded, fd};
  *out = p;
  return Status::OK();
}

Status shared_free(void* p) {
  if (p == nullptr) return Status::OK();
  Registry& r = registry();
  Allocation a;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.live.find(reinterpret_cast<uintptr_t>(p));
    if (it == r.live.end()) {
      return invalid_argument("kolo_free: not an address kolo_alloc gave, or freed already");
    }
    a = it->second;
    r.live.erase(it);
    // Before the fd goes, so that no peer can pair the old epoch with a new file
    // behind the same fd number.
    r.epoch.fetch_add(1, std::memory_order_acq_rel);
  }
  munmap(p, a.bytes);
  if (a.fd >= 0) close(a.fd);
  return Status::OK();
}

bool find_shared(const void* p, size_t bytes, SharedSpan* span) {
  Registry& r = registry();
  const uintptr_t at = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.live.upper_bound(at);
  if (it == r.live.begin()) return false;
  --it;
  const uintptr_t base = it->first;
  const Allocation& a = it->second;
  if (a.fd < 0 || at - base > a.bytes || bytes > a.bytes - (at - base)) return false;
  span->pid = getpid();
  span->fd = a.fd;
  span->epoch = r.epoch.load(std::memory_order_acquire);
  span->bytes = a.bytes;
  span->offset = at - base;
  return true;
}

PeerMappings::~PeerMappings() {
  for (auto& [pid, owner] : owners_) drop(&owner);
}

void PeerMappings::drop(Owner* owner) {
  for (auto& [fd, m] : owner->by_fd) munmap(m.base, m.bytes);
  owner->by_fd.clear();
}

Status PeerMappings::map(const SharedSpan& span, char** out) {
  Owner& owner = owners_[span.pid];
  if (owner.epoch != span.epoch) {
    drop(&owner);
    owner.epoch = span.epoch;
  }
  auto it = owner.by_fd.find(span.fd);
  if (it == owner.by_fd.end() || it->second.bytes != span.bytes) {
    if (it != owner.by_fd.end()) {
      munmap(it->second.base, it->second.bytes);
      owner.by_fd.erase(it);
    }
    const std::string path =
        "/proc/" + std::to_string(span.pid) + "/fd/" + std::to_string(span.fd);
    const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) return errno_error("shm: opening a peer's kolo_alloc memory at " + path, errno);
    // MAP_POPULATE: the page tables are made once here, not on every first
    // touch inside a collective.
    void* p = mmap(nullptr, span.bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    const int err = errno;
    close(fd);
    if (p == MAP_FAILED) return errno_error("shm: mapping a peer's kolo_alloc memory at " + path, err);
    it = owner.by_fd.emplace(span.fd, Mapping{static_cast<char*>(p), span.bytes}).first;
  }
  *out = it->second.base + span.offset;
  return Status::OK();
}

}  // namespace kolo::shm
