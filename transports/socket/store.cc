#include "transports/socket/store.h"

#include "common/check.h"

namespace kolo::socket {

Status Store::get(const std::string& key, Duration timeout, std::string* value) {
  KOLO_RETURN_IF_ERROR_AS_IS(wait({key}, timeout));
  bool found = false;
  KOLO_RETURN_IF_ERROR_AS_IS(try_get(key, value, &found));
  if (!found) return transport_error(describe() + " lost key '" + key + "' between wait and get");
  return Status::OK();
}

Status ScopedStore::set(const std::string& key, const std::string& value) {
  return base_.set(prefix_ + key, value);
}

Status ScopedStore::try_get(const std::string& key, std::string* value, bool* found) {
  return base_.try_get(prefix_ + key, value, found);
}

Status ScopedStore::wait(const std::vector<std::string>& keys, Duration timeout) {
  std::vector<std::string> full;
  full.reserve(keys.size());
  for (const std::string& k : keys) full.push_back(prefix_ + k);
  return base_.wait(full, timeout);
}

Status ScopedStore::add(const std::string& key, int64_t delta, int64_t* value) {
  return base_.add(prefix_ + key, delta, value);
}

Status ScopedStore::compare_and_set(const std::string& key, const std::string& expected,
                                    const std::string& desired, std::string* current) {
  return base_.compare_and_set(prefix_ + key, expected, desired, current);
}

Status ScopedStore::delete_prefix(const std::string& prefix, int64_t* removed) {
  return base_.delete_prefix(prefix_ + prefix, removed);
}

std::string generation_prefix(uint64_t generation) {
  return "kolo/g" + std::to_string(generation) + "/";
}

std::string list_keys(const std::vector<std::string>& keys, size_t show) {
  std::string text;
  for (size_t i = 0; i < keys.size() && i < show; ++i) text += (i ? ", '" : "'") + keys[i] + "'";
  if (keys.size() > show) text += " and " + std::to_string(keys.size() - show) + " more";
  return text;
}

}  // namespace kolo::socket
