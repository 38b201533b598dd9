#include "transports/socket/file_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/check.h"
#include "transports/socket/net.h"

namespace kolo::socket {
namespace {

std::string os_error() { return std::strerror(errno); }

bool plain(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.';
}

// Keys as file names: anything but [A-Za-z0-9_.-] as %XX; a leading '.' too, so
// that no key collides with the store's own dot files.
std::string escape(const std::string& key) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (size_t i = 0; i < key.size(); ++i) {
    const auto c = static_cast<unsigned char>(key[i]);
    if (plain(key[i]) && !(i == 0 && key[i] == '.')) {
      out.push_back(key[i]);
    } else {
      out += {'%', kHex[c >> 4], kHex[c & 15]};
    }
  }
  return out;
}

std::string unescape(const std::string& name) {
  std::string out;
  for (size_t i = 0; i < name.size(); ++i) {
    if (name[i] == '%' && i + 2 < name.size()) {
      int v = 0;
      std::from_chars(name.data() + i + 1, name.data() + i + 3, v, 16);
      out.push_back(static_cast<char>(v));
      i += 2;
    } else {
      out.push_back(name[i]);
    }
  }
  return out;
}

Status make_dirs(const std::string& path) {
  std::string partial;
  std::stringstream parts(path);
  std::string part;
  if (!path.empty() && path[0] == '/') partial = "/";
  while (std::getline(parts, part, '/')) {
    if (part.empty()) continue;
    partial += part + "/";
    if (mkdir(partial.c_str(), 0700) != 0 && errno != EEXIST)
      return invalid_argument("cannot create the file store's directory " + partial + ": " +
                              os_error());
  }
  return Status::OK();
}

bool read_whole(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream all;
  all << in.rdbuf();
  *out = all.str();
  return true;
}

}  // namespace

// flock() on the directory's lock file, tried until the store's timeout.
class FileStore::Lock {
 public:
  Status acquire(const FileStore& store) {
    fd_.reset(::open((store.directory_ + "/.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
    if (!fd_.valid())
      return transport_error(store.describe() + ": cannot open its lock file: " + os_error());
    const auto deadline = Clock::now() + store.timeout_;
    auto nap = std::chrono::microseconds(100);
    while (flock(fd_.get(), LOCK_EX | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK && errno != EINTR)
        return transport_error(store.describe() + ": flock: " + os_error());
      if (Clock::now() >= deadline)
        return Status(Code::kTimeout, store.describe() + ": its lock was held for over " +
                                          seconds_text(store.timeout_));
      std::this_thread::sleep_for(nap);
      nap = std::min(nap * 2, std::chrono::microseconds(20000));
    }
    return Status::OK();
  }
  ~Lock() {
    if (fd_.valid()) flock(fd_.get(), LOCK_UN);
  }

 private:
  Fd fd_;
};

Status FileStore::open(const std::string& directory, std::chrono::milliseconds timeout,
                       std::unique_ptr<FileStore>* out) {
  if (directory.empty()) return invalid_argument("the file store's directory is empty");
  KOLO_RETURN_IF_ERROR_AS_IS(make_dirs(directory));
  out->reset(new FileStore(directory, timeout));
  return Status::OK();
}

Status FileStore::path_of(const std::string& key, std::string* path) const {
  const std::string name = escape(key);
  if (name.empty() || name.size() > 240)
    return invalid_argument(describe() + ": key '" + key + "' is empty or too long for a file name");
  *path = directory_ + "/" + name;
  return Status::OK();
}

Status FileStore::write_locked(const std::string& key, const std::string& value) {
  std::string path;
  KOLO_RETURN_IF_ERROR_AS_IS(path_of(key, &path));
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = directory_ + "/.tmp." + std::to_string(getpid()) + "." +
                          std::to_string(counter.fetch_add(1));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(value.data(), static_cast<std::streamsize>(value.size()));
    if (!out) return transport_error(describe() + ": cannot write " + tmp + ": " + os_error());
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = os_error();
    unlink(tmp.c_str());
    return transport_error(describe() + ": cannot rename into " + path + ": " + why);
  }
  return Status::OK();
}

Status FileStore::set(const std::string& key, const std::string& value) {
  Lock lock;
  KOLO_RETURN_IF_ERROR_AS_IS(lock.acquire(*this));
  return write_locked(key, value);
}

Status FileStore::try_get(const std::string& key, std::string* value, bool* found) {
  std::string path;
  KOLO_RETURN_IF_ERROR_AS_IS(path_of(key, &path));
  *found = read_whole(path, value);
  return Status::OK();
}

Status FileStore::wait(const std::vector<std::string>& keys, Duration timeout) {
  const auto start = Clock::now();
  auto nap = std::chrono::milliseconds(1);
  std::vector<std::string> missing = keys;
  while (true) {
    std::vector<std::string> still;
    for (const std::string& k : missing) {
      std::string path;
      KOLO_RETURN_IF_ERROR_AS_IS(path_of(k, &path));
      if (access(path.c_str(), F_OK) != 0) still.push_back(k);
    }
    if (still.empty()) return Status::OK();
    missing = std::move(still);
    if (Clock::now() - start >= timeout)
      return Status(Code::kTimeout, describe() + ": waited " + seconds_text(Clock::now() - start) +
                                        " for " + list_keys(missing));
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, std::chrono::milliseconds(100));
  }
}

Status FileStore::add(const std::string& key, int64_t delta, int64_t* value) {
  Lock lock;
  KOLO_RETURN_IF_ERROR_AS_IS(lock.acquire(*this));
  std::string text;
  bool found = false;
  KOLO_RETURN_IF_ERROR_AS_IS(try_get(key, &text, &found));
  int64_t old = 0;
  if (found) {
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), old);
    if (ec != std::errc() || end != text.data() + text.size())
      return transport_error(describe() + ": add: key '" + key + "' holds a value that is not an integer");
  }
  if (__builtin_add_overflow(old, delta, value))
    return transport_error(describe() + ": add: key '" + key + "' would overflow int64");
  return write_locked(key, std::to_string(*value));
}

Status FileStore::compare_and_set(const std::string& key, const std::string& expected,
                                  const std::string& desired, std::string* current) {
  Lock lock;
  KOLO_RETURN_IF_ERROR_AS_IS(lock.acquire(*this));
  bool found = false;
  std::string now;
  KOLO_RETURN_IF_ERROR_AS_IS(try_get(key, &now, &found));
  if (found ? now == expected : expected.empty()) {
    KOLO_RETURN_IF_ERROR_AS_IS(write_locked(key, desired));
    now = desired;
  }
  *current = now;
  return Status::OK();
}

Status FileStore::delete_prefix(const std::string& prefix, int64_t* removed) {
  Lock lock;
  KOLO_RETURN_IF_ERROR_AS_IS(lock.acquire(*this));
  *removed = 0;
  DIR* dir = opendir(directory_.c_str());
  if (dir == nullptr) return transport_error(describe() + ": opendir: " + os_error());
  while (const dirent* e = readdir(dir)) {
    const std::string name = e->d_name;
    if (name.empty() || name[0] == '.') continue;
    if (unescape(name).compare(0, prefix.size(), prefix) != 0) continue;
    if (unlink((directory_ + "/" + name).c_str()) == 0) ++*removed;
  }
  closedir(dir);
  return Status::OK();
}

}  // namespace kolo::socket
