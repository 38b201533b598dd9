// kolo_version, kolo_build_info_json, kolo_transport_built: what this build is,
// readable before kolo_init (kolo-info and the Python capability queries use it).
#include <mutex>
#include <sstream>
#include <string>

#include "bindings/c/firewall.h"
#include "common/knobs.h"
#include "kolo/kolo.h"
#include "kolo_build_config.h"
#include "transport/registry.h"
#include "transports/nccl/nccl_info.h"

namespace {

std::string json_string(const std::string& s) {
  std::ostringstream os;
  os << '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': os << "\\\""; break;
      case '\\': os << "\\\\"; break;
      case '\n': os << "\\n"; break;
      case '\t': os << "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          os << buf;
        } else {
          os << c;
        }
    }
  }
  os << '"';
  return os.str();
}

const char* knob_type_name(kolo::KnobType t) {
  switch (t) {
    case kolo::KnobType::kBytes: return "bytes";
    case kolo::KnobType::kDouble: return "double";
    case kolo::KnobType::kInt: return "int";
    case kolo::KnobType::kBool: return "bool";
    case kolo::KnobType::kString: return "string";
    case kolo::KnobType::kChoice: return "choice";
  }
  return "unknown";
}

std::string build_info() {
  std::ostringstream os;
  os << "{\"version\": " << json_string(KOLO_VERSION_STRING) << ", \"build\": {"
     << "\"type\": " << json_string(KOLO_BUILD_TYPE) << ", \"compiler\": "
     << json_string(KOLO_COMPILER) << ", \"mpi\": " << json_string(KOLO_MPI_VERSION)
     << ", \"nccl\": " << (KOLO_HAVE_NCCL ? "true" : "false");
  if (KOLO_HAVE_NCCL) {
    // The headers kolo was compiled with, and the library loaded now (they can differ).
    os << ", \"nccl_headers\": " << json_string(kolo::nccl::header_version())
       << ", \"nccl_library\": " << json_string(kolo::nccl::library_version());
  }
  os << "}, \"transports\": {";
  bool first = true;
  for (const auto& t : kolo::transport::known_transports()) {
    os << (first ? "" : ", ") << json_string(t.name) << ": {\"built\": "
       << (t.built ? "true" : "false") << ", \"reason\": " << json_string(t.reason) << "}";
    first = false;
  }
  os << "}, \"selection\": [";
  // The table the knobs make (Note [The selection table]); kolo-info prints it.
  kolo::Config config;
  kolo::transport::SelectionTable table;
  if (kolo::load_config(kolo::process_env(), &config).ok()) {
    kolo::transport::SelectorOptions options{config.transport, config.select,
                                             config.hierarchical_allreduce,
                                             config.transport_small, config.transport_large};
    (void)kolo::transport::Selector::table_for(options, kolo::transport::is_device_transport(config.transport),
                                                   &table);
  } else {
    table = kolo::transport::SelectionTable::defaults();
  }
  for (size_t i = 0; i < table.rules().size(); ++i)
    os << (i ? ", " : "") << json_string(table.rules()[i].to_string());
  os << "], \"knobs\": {";
  const auto& specs = kolo::knob_specs();
  const auto values = kolo::knob_values(kolo::process_env());
  first = true;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].test_only) continue;  // Note [Test-only switches] (common/knobs.h)
    os << (first ? "" : ", ") << json_string(specs[i].name) << ": {\"type\": "
       << json_string(knob_type_name(specs[i].type))
       << ", \"default\": " << json_string(specs[i].default_value)
       << ", \"value\": " << json_string(i < values.size() ? values[i] : "")
       << ", \"accepted\": " << json_string(specs[i].accepted)
       << ", \"doc\": " << json_string(specs[i].doc)
       << ", \"agreement\": " << json_string(kolo::agreement_name(specs[i].agreement)) << "}";
    first = false;
  }
  os << "}}";
  return os.str();
}

}  // namespace

extern "C" {

const char* kolo_version(void) {
  return kolo::c_api::guarded(KOLO_VERSION_STRING, [] { return KOLO_VERSION_STRING; });
}

const char* kolo_build_info_json(void) {
  return kolo::c_api::guarded("{}", [] {
    static std::mutex mu;
    static std::string text;
    std::lock_guard<std::mutex> lock(mu);
    text = build_info();
    return text.c_str();
  });
}

int kolo_transport_built(const char* name, const char** reason) {
  if (reason) *reason = "unknown transport";
  return kolo::c_api::guarded(0, [&] {
    if (name == nullptr) return 0;
    for (const auto& t : kolo::transport::known_transports()) {
      if (t.name == name) {
        if (reason) *reason = t.reason.c_str();
        return t.built ? 1 : 0;
      }
    }
    return 0;
  });
}

}  // extern "C"
