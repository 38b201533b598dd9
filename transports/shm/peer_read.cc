#include "transports/shm/peer_read.h"

#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "common/check.h"

namespace kolo::shm {
namespace {

const int64_t kProbeMagic = 0x6b6f6c6f70726f62;  // what every peer must read back

}  // namespace


Status read_peer(pid_t pid, const void* remote, void* local, size_t bytes) {
  char* to = static_cast<char*>(local);
  const char* from = static_cast<const char*>(remote);
  while (bytes > 0) {
    iovec l{to, bytes};
    iovec r{const_cast<char*>(from), bytes};
    const ssize_t got = process_vm_readv(pid, &l, 1, &r, 1, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      const int e = got < 0 ? errno : EIO;
      return transport_error("process_vm_readv from pid " + std::to_string(pid) + " (" +
                             std::to_string(bytes) + " bytes): " + std::strerror(e));
    }
    to += got;
    from += got;
    bytes -= static_cast<size_t>(got);
  }
  return Status::OK();
}

uint64_t probe_address() { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(&kProbeMagic)); }

bool can_read_peer(pid_t pid, uint64_t address) {
  int64_t got = 0;
  const void* remote = reinterpret_cast<const void*>(static_cast<uintptr_t>(address));
  return read_peer(pid, remote, &got, sizeof(got)).ok() && got == kProbeMagic;
}

}  // namespace kolo::shm
