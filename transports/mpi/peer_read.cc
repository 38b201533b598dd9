#include "transports/mpi/peer_read.h"

#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "common/check.h"

namespace kolo::mpi {

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

Status probe_peer_reads(MPI_Comm local, const ShmWindow& window, size_t offset, Liveness* alive,
                        bool* works) {
  constexpr size_t kLine = 64;
  static const int64_t kMagic = 0x6b6f6c6f70726f62;  // what every peer must read back
  auto word = [&](int r, int line) {
    return reinterpret_cast<int64_t*>(window.segment(r) + offset + line * kLine);
  };
  const int me = window.local_rank();
  *word(me, 0) = static_cast<int64_t>(getpid());
  *word(me, 1) = static_cast<int64_t>(reinterpret_cast<uintptr_t>(&kMagic));
  KOLO_RETURN_IF_ERROR_AS_IS(arrive(local, alive));
  bool ok = true;
  for (int p = 0; p < window.local_size(); ++p) {
    if (p == me) continue;
    int64_t got = 0;
    const void* remote = reinterpret_cast<const void*>(static_cast<uintptr_t>(*word(p, 1)));
    ok = ok && read_peer(static_cast<pid_t>(*word(p, 0)), remote, &got, sizeof(got)).ok() &&
         got == kMagic;
  }
  *word(me, 2) = ok ? 1 : 0;
  KOLO_RETURN_IF_ERROR_AS_IS(arrive(local, alive));
  *works = true;
  for (int p = 0; p < window.local_size(); ++p) *works = *works && *word(p, 2) == 1;
  return Status::OK();
}

}  // namespace kolo::mpi
