// kolo-info: what this kolo build is and how it is configured here.
//
// Prints the version, the build configuration, which transports are built (and
// why not), every KOLO_* knob with its default, whether every rank must set it
// alike, and its current value, and the local
// topology as hwloc sees it. Everything but the topology comes from
// kolo_build_info_json(), so kolo-info shows exactly what the library reports.
// Needs neither mpiexec nor kolo_init.
//
//   kolo-info          human-readable
//   kolo-info --json   one JSON object: version, build, transports, knobs, topology
#include <kolo/kolo.h>
#include <hwloc.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "json.h"

namespace kolo::tools {
namespace {

// The machine as hwloc sees it; "error" is set when hwloc could not load it.
JsonValue local_topology() {
  JsonValue topo = JsonValue::object();
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) topo.set("host", JsonValue::string(host));
  topo.set("hwloc_api", JsonValue::string(std::to_string(hwloc_get_api_version() >> 16) + "." +
                                      std::to_string((hwloc_get_api_version() >> 8) & 0xff) +
                                      "." + std::to_string(hwloc_get_api_version() & 0xff)));
  hwloc_topology_t topology;
  if (hwloc_topology_init(&topology) != 0) {
    topo.set("error", JsonValue::string(std::string("hwloc_topology_init: ") + std::strerror(errno)));
    return topo;
  }
  if (hwloc_topology_load(topology) != 0) {
    topo.set("error", JsonValue::string(std::string("hwloc_topology_load: ") + std::strerror(errno)));
    hwloc_topology_destroy(topology);
    return topo;
  }
  const struct {
    const char* key;
    hwloc_obj_type_t type;
  } counts[] = {{"packages", HWLOC_OBJ_PACKAGE},
                {"cores", HWLOC_OBJ_CORE},
                {"pus", HWLOC_OBJ_PU},
                {"numa_nodes", HWLOC_OBJ_NUMANODE}};
  for (const auto& count : counts) {
    const int n = hwloc_get_nbobjs_by_type(topology, count.type);
    topo.set(count.key, JsonValue::number(std::max(n, 0)));
  }
  hwloc_topology_destroy(topology);
  return topo;
}

// Left-aligns text in width columns (at least one space after it).
std::string pad(const std::string& text, size_t width) {
  return text.size() < width ? text + std::string(width - text.size(), ' ') : text + " ";
}

// Knob values as a person reads them: an empty value is shown as "(unset)".
std::string shown(const std::string& value) { return value.empty() ? "(unset)" : value; }

void print_section(const char* title) { std::printf("\n%s\n", title); }

void print_transports(const JsonValue* transports) {
  print_section("Transports");
  if (!transports || !transports->is_object()) return;
  for (const auto& [name, info] : transports->members()) {
    const JsonValue* built = info.find("built");
    const bool yes = built && built->kind() == JsonValue::Kind::kBool && built->as_bool();
    const std::string reason = info.get_string("reason");
    std::printf("  %s%s%s%s\n", pad(name, 14).c_str(), yes ? "built" : "not built",
                reason.empty() ? "" : ": ", reason.c_str());
  }
}

// The selection table the knobs make, one rule per line (Note [The selection
// table] in src/transport/selection.h: first match wins, then the world's order).
void print_selection(const JsonValue* rules) {
  print_section("Selection (first matching rule; KOLO_SELECT adds rules before these)");
  if (!rules || rules->kind() != JsonValue::Kind::kArray) return;
  for (const JsonValue& rule : rules->items()) std::printf("  %s\n", rule.to_text().c_str());
}

// "ranks": whether every rank must set the knob alike (kolo_init compares them).
void print_knobs(const JsonValue* knobs) {
  print_section("Knobs (environment variables, read at kolo_init)");
  if (!knobs || !knobs->is_object()) return;
  size_t name_width = 6, default_width = 9, ranks_width = 7;
  for (const auto& [name, knob] : knobs->members()) {
    name_width = std::max(name_width, name.size() + 2);
    default_width = std::max(default_width, shown(knob.get_string("default")).size() + 2);
    ranks_width = std::max(ranks_width, knob.get_string("agreement").size() + 2);
  }
  std::printf("  %s%s%s%s\n", pad("name", name_width).c_str(),
              pad("default", default_width).c_str(), pad("ranks", ranks_width).c_str(), "value");
  for (const auto& [name, knob] : knobs->members()) {
    std::printf("  %s%s%s%s\n", pad(name, name_width).c_str(),
                pad(shown(knob.get_string("default")), default_width).c_str(),
                pad(knob.get_string("agreement"), ranks_width).c_str(),
                shown(knob.get_string("value")).c_str());
    const std::string doc = knob.get_string("doc");
    if (!doc.empty()) std::printf("      %s\n", doc.c_str());
  }
}

void print_topology(const JsonValue& topo) {
  print_section("Topology (hwloc)");
  for (const auto& [key, value] : topo.members()) {
    std::printf("  %s%s\n", pad(key, 14).c_str(), value.to_text().c_str());
  }
}

void print_text(const JsonValue& info) {
  std::printf("kolo %s\n", info.get_string("version", kolo_version()).c_str());
  if (const JsonValue* build = info.find("build"); build && build->is_object()) {
    print_section("Build");
    for (const auto& [key, value] : build->members()) {
      std::printf("  %s%s\n", pad(key, 14).c_str(), value.to_text().c_str());
    }
  }
  print_transports(info.find("transports"));
  print_selection(info.find("selection"));
  print_knobs(info.find("knobs"));
  print_topology(*info.find("topology"));
}

int usage(const char* argv0, FILE* out, int code) {
  std::fprintf(out,
               "usage: %s [--json]\n"
               "Prints kolo's version, build, transports, knobs and the local topology.\n"
               "  --json   print one JSON object instead of text\n",
               argv0);
  return code;
}

int run(int argc, char** argv) {
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0) {
      json = true;
    } else if (std::strcmp(argv[i], "-h") == 0 || std::strcmp(argv[i], "--help") == 0) {
      return usage(argv[0], stdout, 0);
    } else {
      std::fprintf(stderr, "kolo-info: unknown argument '%s'\n", argv[i]);
      return usage(argv[0], stderr, 2);
    }
  }
  const char* raw = kolo_build_info_json();
  JsonValue info;
  std::string error;
  if (raw == nullptr || !parse_json(raw, &info, &error) || !info.is_object()) {
    std::fprintf(stderr, "kolo-info: kolo_build_info_json() is not a JSON object: %s\n",
                 raw == nullptr ? "NULL" : error.empty() ? raw : error.c_str());
    return 1;
  }
  if (!info.find("version")) info.set("version", JsonValue::string(kolo_version()));
  info.set("topology", local_topology());
  if (json) {
    std::printf("%s\n", info.dump().c_str());
  } else {
    print_text(info);
  }
  return 0;
}

}  // namespace
}  // namespace kolo::tools

int main(int argc, char** argv) { return kolo::tools::run(argc, argv); }
