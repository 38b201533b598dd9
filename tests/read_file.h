// A whole file's text, for tests that check what kolo wrote (timelines, flight
// recorder dumps). Shared across test folders.
#pragma once

#include <cstdio>
#include <string>

namespace kolo_test {

// "" if the file cannot be opened.
inline std::string read_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return "";
  std::string text;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof(buf), f)) > 0;) text.append(buf, n);
  std::fclose(f);
  return text;
}

}  // namespace kolo_test
