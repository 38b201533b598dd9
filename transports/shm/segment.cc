#include "transports/shm/segment.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "common/check.h"
#include "common/logging.h"

namespace kolo::shm {
namespace {

constexpr const char* kPrefix = "kolo-";
constexpr const char* kDirectory = "/dev/shm";
// An object with no header this long after it was made lost its creator.
constexpr time_t kHeaderlessSeconds = 60;

Status os_error(const std::string& what, const std::string& name, int error) {
  return transport_error(what + " of shared memory segment " + name + ": " + std::strerror(error));
}

// Closes a file descriptor on every path out of a scope.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

// The header of the object `fd`, if it has one (false: too short or no magic).
bool read_header(int fd, SegmentHeader* header) {
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(sizeof(SegmentHeader))) return false;
  if (pread(fd, header, sizeof(*header), 0) != static_cast<ssize_t>(sizeof(*header))) return false;
  return header->magic == SegmentHeader::kMagic;
}

// Whether process `pid` has exited (ESRCH). EPERM: it runs, under another user.
bool exited(int32_t pid) { return pid > 0 && kill(pid, 0) != 0 && errno == ESRCH; }

enum class Verdict { kRemoved, kVanished, kKept };

// What is in the way at `name` ("/kolo-..."): removed when its creator has
// exited (or it never got a header); else kept, and *why says whose it is.
Verdict judge(const std::string& name, std::string* why) {
  Fd f;
  f.fd = shm_open(name.c_str(), O_RDONLY, 0);
  if (f.fd < 0) {
    if (errno == ENOENT) return Verdict::kVanished;
    *why = std::string("cannot be opened: ") + std::strerror(errno);
    return Verdict::kKept;
  }
  SegmentHeader header;
  struct stat st;
  const bool has_header = read_header(f.fd, &header);
  const bool old = fstat(f.fd, &st) == 0 && time(nullptr) - st.st_mtime > kHeaderlessSeconds;
  if (has_header ? !exited(header.creator_pid) : !old) {
    *why = has_header ? "belongs to process " + std::to_string(header.creator_pid) +
                            ", which is running"
                      : "has no kolo header yet (a job is creating it)";
    return Verdict::kKept;
  }
  if (shm_unlink(name.c_str()) != 0) {
    if (errno == ENOENT) return Verdict::kVanished;
    *why = std::string("could not be removed: ") + std::strerror(errno);
    return Verdict::kKept;
  }
  KOLO_LOG(kInfo) << "removed shared memory segment " << kDirectory << name
                  << (has_header ? " left by process " + std::to_string(header.creator_pid) +
                                       ", which has exited"
                                 : " left without a header");
  return Verdict::kRemoved;
}

}  // namespace

std::string Segment::name(uint64_t token, int node) {
  char text[64];
  std::snprintf(text, sizeof(text), "/%s%016" PRIx64 "-%d", kPrefix, token, node);
  return text;
}

Status Segment::map(int fd, size_t bytes) {
  void* at = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (at == MAP_FAILED) return os_error("mmap", name_, errno);
  base_ = static_cast<char*>(at);
  bytes_ = bytes;
  fd_ = dup(fd);
  if (fd_ < 0) return os_error("dup", name_, errno);
  return Status::OK();
}

Status Segment::reserve(size_t offset, size_t bytes) {
  const int error = posix_fallocate(fd_, static_cast<off_t>(offset), static_cast<off_t>(bytes));
  if (error == 0) return Status::OK();
  return os_error("reserving " + std::to_string(bytes) + " bytes (posix_fallocate; is " +
                      std::string(kDirectory) + " full?)",
                  name_, error);
}

Status Segment::create(const std::string& name, SegmentHeader header,
                       std::unique_ptr<Segment>* out) {
  reclaim_stale_segments();
  std::unique_ptr<Segment> s(new Segment());
  s->name_ = name;
  Fd f;
  for (int attempt = 0; attempt < 2 && f.fd < 0; ++attempt) {
    f.fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (f.fd >= 0 || errno != EEXIST) break;
    std::string why;
    if (judge(name, &why) == Verdict::kKept) {
      return transport_error("shared memory segment " + std::string(kDirectory) + name +
                             " already exists and " + why + "; kolo never reuses one");
    }
  }
  if (f.fd < 0) return os_error("shm_open", name, errno);
  s->named_by_me_ = true;  // from here on the destructor unlinks on failure
  if (ftruncate(f.fd, static_cast<off_t>(header.bytes)) != 0)
    return os_error("ftruncate to " + std::to_string(header.bytes) + " bytes", name, errno);
  KOLO_RETURN_IF_ERROR(s->map(f.fd, header.bytes));
  header.magic = SegmentHeader::kMagic;
  header.version = SegmentHeader::kVersion;
  header.creator_pid = static_cast<int32_t>(getpid());
  std::memcpy(s->base_, &header, sizeof(header));
  *out = std::move(s);
  return Status::OK();
}

Status Segment::open(const std::string& name, const SegmentHeader& expected,
                     std::unique_ptr<Segment>* out) {
  std::unique_ptr<Segment> s(new Segment());
  s->name_ = name;
  Fd f;
  f.fd = shm_open(name.c_str(), O_RDWR, 0);
  if (f.fd < 0) return os_error("shm_open", name, errno);
  SegmentHeader header;
  if (!read_header(f.fd, &header) || header.version != SegmentHeader::kVersion ||
      header.token != expected.token || header.bytes != expected.bytes ||
      header.node != expected.node || header.local_size != expected.local_size ||
      header.creator_pid != expected.creator_pid) {
    return transport_error("shared memory segment " + std::string(kDirectory) + name +
                           " is not the one local rank 0 (pid " +
                           std::to_string(expected.creator_pid) + ") made for this job: "
                           "refusing to use it");
  }
  KOLO_RETURN_IF_ERROR(s->map(f.fd, header.bytes));
  *out = std::move(s);
  return Status::OK();
}

Status Segment::unlink() {
  if (!named_by_me_) return Status::OK();
  named_by_me_ = false;
  if (shm_unlink(name_.c_str()) != 0) return os_error("shm_unlink", name_, errno);
  return Status::OK();
}

Segment::~Segment() {
  if (named_by_me_) shm_unlink(name_.c_str());
  if (base_ != nullptr) munmap(base_, bytes_);
  if (fd_ >= 0) close(fd_);
}

int reclaim_stale_segments() {
  DIR* dir = opendir(kDirectory);
  if (dir == nullptr) return 0;
  int removed = 0;
  while (dirent* entry = readdir(dir)) {
    if (std::strncmp(entry->d_name, kPrefix, std::strlen(kPrefix)) != 0) continue;
    std::string why;
    removed += judge(std::string("/") + entry->d_name, &why) == Verdict::kRemoved ? 1 : 0;
  }
  closedir(dir);
  return removed;
}

}  // namespace kolo::shm
