#include "core/straggler.h"

#include <algorithm>
#include <cstring>

#include "common/check.h"

namespace kolo::core {
namespace {

constexpr uint32_t kMagic = 0x534c4f4b;  // "KOLS"

template <typename T>
void put(std::string* out, T v) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T));
  out->append(bytes, sizeof(T));
}

template <typename T>
T get(const std::string& in, size_t at) {
  T v;
  std::memcpy(&v, in.data() + at, sizeof(T));
  return v;
}

}  // namespace

std::string encode_submit_ages(const std::vector<int64_t>& ages) {
  std::string out;
  out.reserve(8 + 8 * ages.size());
  put<uint32_t>(&out, kMagic);
  put<uint32_t>(&out, static_cast<uint32_t>(ages.size()));
  for (int64_t a : ages) put<int64_t>(&out, a);
  return out;
}

Status decode_submit_ages(const std::string& bytes, size_t expected, std::vector<int64_t>* ages) {
  if (bytes.size() < 8 || get<uint32_t>(bytes, 0) != kMagic)
    return internal_error("timeline exchange: not a submit-age list");
  const uint32_t count = get<uint32_t>(bytes, 4);
  if (count != expected)
    return internal_error("timeline exchange: " + std::to_string(count) + " ages for " +
                          std::to_string(expected) + " names");
  if (bytes.size() != 8 + 8 * size_t{count})
    return internal_error("timeline exchange: " + std::to_string(bytes.size()) + " bytes for " +
                          std::to_string(count) + " ages");
  ages->resize(count);
  for (uint32_t i = 0; i < count; ++i) (*ages)[i] = get<int64_t>(bytes, 8 + 8 * size_t{i});
  return Status::OK();
}

Timeline::Straggler straggler_of(const std::vector<std::vector<int64_t>>& ages, size_t i) {
  Timeline::Straggler s;
  int64_t least = -1, most = -1;
  for (size_t r = 0; r < ages.size(); ++r) {
    const int64_t a = ages[r][i];
    if (a < 0) continue;
    if (least < 0 || a < least) {
      least = a;
      s.rank = static_cast<int>(r);
    }
    most = std::max(most, a);
  }
  if (s.rank >= 0) s.lag_us = static_cast<double>(most - least);
  return s;
}

Status exchange_stragglers(transport::ControlPlane& control, const std::vector<int64_t>& mine,
                           std::vector<Timeline::Straggler>* out) {
  std::vector<std::string> all;
  KOLO_RETURN_IF_ERROR(control.allgather(encode_submit_ages(mine), &all));
  std::vector<std::vector<int64_t>> ages(all.size());
  for (size_t r = 0; r < all.size(); ++r)
    KOLO_RETURN_IF_ERROR(decode_submit_ages(all[r], mine.size(), &ages[r]));
  out->resize(mine.size());
  for (size_t i = 0; i < mine.size(); ++i) (*out)[i] = straggler_of(ages, i);
  return Status::OK();
}

}  // namespace kolo::core
