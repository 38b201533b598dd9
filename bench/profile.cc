#include "bench/profile.h"

#include <unistd.h>

#include <fstream>
#include <regex>
#include <sstream>

namespace kolo::bench {
namespace {

std::string executable_dir() {
  char path[4096];
  ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return "";
  std::string exe(path, static_cast<size_t>(n));
  size_t slash = exe.rfind('/');
  return slash == std::string::npos ? "" : exe.substr(0, slash);
}

bool read_file(const std::string& path, std::string* text) {
  std::ifstream in(path);
  if (!in) return false;
  std::ostringstream buffer;
  buffer << in.rdbuf();
  *text = buffer.str();
  return true;
}

std::string base_name(const std::string& path) {
  size_t slash = path.rfind('/');
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  size_t dot = base.rfind('.');
  return dot == std::string::npos ? base : base.substr(0, dot);
}

}  // namespace

std::vector<std::string> profile_search_path() {
  std::vector<std::string> dirs;
  std::string exe_dir = executable_dir();
  if (!exe_dir.empty()) dirs.push_back(exe_dir + "/../share/kolo/profiles");
  dirs.push_back(KOLO_BENCH_PROFILE_DIR);
  return dirs;
}

bool parse_profile(const std::string& text, const std::string& name, Profile* profile,
                   std::string* error) {
  static const std::regex kTotals(R"((\d+) tensors, (\d+) (\w+) \((\d+) bytes\))");
  Profile result;
  result.name = name;
  int64_t want_tensors = -1, want_elements = -1, want_bytes = -1;
  std::istringstream lines(text);
  std::string line;
  int line_number = 0;
  while (std::getline(lines, line)) {
    ++line_number;
    if (line.empty()) continue;
    std::smatch m;
    if (line[0] == '#') {
      if (want_tensors < 0 && std::regex_search(line, m, kTotals)) {
        want_tensors = std::stoll(m[1]);
        want_elements = std::stoll(m[2]);
        if (!parse_dtype(m[3], &result.dtype)) {
          *error = name + ": unknown dtype '" + m[3].str() + "' in the header";
          return false;
        }
        want_bytes = std::stoll(m[4]);
      }
      continue;
    }
    std::istringstream fields(line);
    ProfileTensor t;
    if (!(fields >> t.name >> t.elements) || t.elements <= 0) {
      *error = name + ":" + std::to_string(line_number) + ": expected 'name elements shape'";
      return false;
    }
    result.total_elements += t.elements;
    result.tensors.push_back(std::move(t));
  }
  if (want_tensors < 0) {
    *error = name + ": no header comment '# ...: N tensors, M dtype (B bytes)'";
    return false;
  }
  if (static_cast<int64_t>(result.tensors.size()) != want_tensors ||
      result.total_elements != want_elements || result.total_bytes() != want_bytes) {
    *error = name + ": header says " + std::to_string(want_tensors) + " tensors, " +
             std::to_string(want_elements) + " elements, " + std::to_string(want_bytes) +
             " bytes; the file lists " + std::to_string(result.tensors.size()) + " tensors, " +
             std::to_string(result.total_elements) + " elements, " +
             std::to_string(result.total_bytes()) + " bytes";
    return false;
  }
  *profile = std::move(result);
  return true;
}

bool load_profile(const std::string& name_or_path, Profile* profile, std::string* error) {
  std::string text;
  if (read_file(name_or_path, &text)) {
    return parse_profile(text, base_name(name_or_path), profile, error);
  }
  std::string tried;
  for (const std::string& dir : profile_search_path()) {
    std::string path = dir + "/" + name_or_path + ".txt";
    if (read_file(path, &text)) return parse_profile(text, name_or_path, profile, error);
    tried += (tried.empty() ? "" : ", ") + path;
  }
  *error = "profile '" + name_or_path + "' not found (tried " + tried + ")";
  return false;
}

}  // namespace kolo::bench
