#include "transports/socket/launch_env.h"

#include <charconv>

#include "common/check.h"
#include "transports/socket/frame.h"

namespace kolo::socket {
namespace {

constexpr const char* kMpiLaunchers[] = {"PMI_RANK", "PMI_SIZE", "PMIX_RANK",
                                         "OMPI_COMM_WORLD_RANK", "MPI_LOCALRANKID"};
constexpr const char* kTorchrun[] = {"MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"};

bool is_set(const EnvLookup& env, const char* name) {
  const auto v = env(name);
  return v && !v->empty();
}

// `name` as an integer in [low, high]; `what` says what it must be.
Status read_int(const EnvLookup& env, const char* name, int64_t low, int64_t high,
                const std::string& what, int64_t* out) {
  const auto v = env(name);
  if (!v || v->empty()) return invalid_argument(name + std::string(" is not set (") + what + ")");
  int64_t n = 0;
  auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
  if (ec != std::errc() || end != v->data() + v->size() || n < low || n > high)
    return invalid_argument(std::string(name) + "=\"" + *v + "\" is not " + what);
  *out = n;
  return Status::OK();
}

// What both ways of starting take from the knobs.
void apply_knobs(const Config& config, SocketWorldOptions* o) {
  o->ifname = config.socket_ifname;
  o->init_timeout = std::chrono::milliseconds(static_cast<int64_t>(config.init_timeout_seconds * 1000));
  o->peer_timeout = std::chrono::milliseconds(static_cast<int64_t>(config.peer_timeout_seconds * 1000));
  o->test_node_size = config.test_node_size;
  if (!config.store_dir.empty()) o->store_directory = config.store_dir;
}

}  // namespace

EnvLookup meeting_env(const EnvLookup& env) {
  return [env](const char* name) -> std::optional<std::string> {
    static const char* kMeeting[] = {
        "KOLO_WORLD",      "KOLO_SOCKET_IFNAME",        "KOLO_STORE_PORT",
        "KOLO_STORE_DIR",  "KOLO_JOB_TOKEN",            "KOLO_GENERATION",
        "KOLO_INIT_TIMEOUT_SECONDS", "KOLO_PEER_TIMEOUT_SECONDS", "KOLO_TEST_NODE_SIZE",
        "KOLO_LOG_LEVEL"};
    const std::string n = name;
    if (n.rfind("KOLO_", 0) != 0) return env(name);
    for (const char* m : kMeeting)
      if (n == m) return env(name);
    return std::nullopt;
  };
}

WorldChoice choose_world(const Config& config, const EnvLookup& env, std::string* why) {
  if (config.world == "mpi" || config.world == "socket") {
    *why = "KOLO_WORLD=" + config.world;
    return config.world == "mpi" ? WorldChoice::kMpi : WorldChoice::kSocket;
  }
  for (const char* name : kMpiLaunchers) {
    if (is_set(env, name)) {
      *why = std::string(name) + " is set: an MPI launcher started this rank";
      return WorldChoice::kMpi;
    }
  }
  for (const char* name : kTorchrun) {
    if (!is_set(env, name)) {
      *why = std::string(name) + " is not set: no torchrun-style launcher";
      return WorldChoice::kMpi;
    }
  }
  *why = "torchrun's variables are set and no MPI launcher's";
  return WorldChoice::kSocket;
}

Status options_from_env(const Config& config, const EnvLookup& env, SocketWorldOptions* out) {
  SocketWorldOptions o;
  int64_t size = 0, rank = 0, port = 0;
  KOLO_RETURN_IF_ERROR_AS_IS(read_int(env, "WORLD_SIZE", 1, 1 << 24, "a world size >= 1", &size));
  KOLO_RETURN_IF_ERROR_AS_IS(read_int(env, "RANK", 0, size - 1,
                                      "a rank from 0 to WORLD_SIZE-1 (" + std::to_string(size - 1) + ")",
                                      &rank));
  KOLO_RETURN_IF_ERROR_AS_IS(read_int(env, "MASTER_PORT", 1, 65535, "a port from 1 to 65535", &port));
  const auto host = env("MASTER_ADDR");
  if (!host || host->empty()) return invalid_argument("MASTER_ADDR is not set (the store's host)");
  if (config.store_port == 0 && port == 65535)
    return invalid_argument("MASTER_PORT=65535 leaves no MASTER_PORT + 1 for kolo's store: set "
                            "KOLO_STORE_PORT");
  o.rank = static_cast<int>(rank);
  o.size = static_cast<int>(size);
  o.store_host = *host;
  o.store_port = static_cast<uint16_t>(config.store_port != 0 ? config.store_port : port + 1);
  if (is_set(env, "LOCAL_RANK") || is_set(env, "LOCAL_WORLD_SIZE")) {
    int64_t local_size = 0, local_rank = 0;
    KOLO_RETURN_IF_ERROR_AS_IS(read_int(env, "LOCAL_WORLD_SIZE", 1, size, "a size from 1 to WORLD_SIZE",
                                        &local_size));
    KOLO_RETURN_IF_ERROR_AS_IS(read_int(env, "LOCAL_RANK", 0, local_size - 1,
                                        "a rank from 0 to LOCAL_WORLD_SIZE-1", &local_rank));
    o.local_rank = static_cast<int>(local_rank);
    o.local_size = static_cast<int>(local_size);
  }
  o.token = config.job_token;
  if (o.token.empty()) {
    const auto run = env("TORCHELASTIC_RUN_ID");
    o.token = "derived:" + (run ? *run : std::string()) + "@" + *host + ":" + std::to_string(port);
  }
  if (config.generation >= 0) {
    o.generation = static_cast<uint64_t>(config.generation);
  } else if (is_set(env, "TORCHELASTIC_RESTART_COUNT")) {
    int64_t restarts = 0;
    KOLO_RETURN_IF_ERROR_AS_IS(read_int(env, "TORCHELASTIC_RESTART_COUNT", 0, INT64_MAX,
                                        "a count >= 0", &restarts));
    o.generation = static_cast<uint64_t>(restarts);
  }
  apply_knobs(config, &o);
  *out = std::move(o);
  return Status::OK();
}

Status options_for_store(const Config& config, const EnvLookup& env, const std::string& address,
                         int port, int rank, int size, const std::string& token,
                         int64_t generation, SocketWorldOptions* out) {
  SocketWorldOptions o;
  if (size < 1) return invalid_argument("size " + std::to_string(size) + " (must be >= 1)");
  if (rank < 0 || rank >= size)
    return invalid_argument("rank " + std::to_string(rank) + " outside 0.." + std::to_string(size - 1));
  if (generation < 0) return invalid_argument("generation " + std::to_string(generation) + " (must be >= 0)");
  if (token.size() > kMaxTokenBytes)
    return invalid_argument("the job token is " + std::to_string(token.size()) + " bytes; at most " +
                            std::to_string(kMaxTokenBytes));
  if (address.rfind("file:", 0) == 0) {
    if (address.size() == 5) return invalid_argument("address \"file:\" names no directory");
    o.store_directory = address.substr(5);
  } else {
    if (address.empty()) return invalid_argument("address is empty (the store's host)");
    if (port < 1 || port > 65535)
      return invalid_argument("port " + std::to_string(port) + " is not a port from 1 to 65535");
    o.store_host = address;
    o.store_port = static_cast<uint16_t>(port);
  }
  o.rank = rank;
  o.size = size;
  o.token = token;
  o.generation = static_cast<uint64_t>(generation);
  apply_knobs(config, &o);
  if (!o.store_host.empty()) o.store_directory.clear();  // the caller's address wins over KOLO_STORE_DIR
  if (is_set(env, "LOCAL_RANK") && is_set(env, "LOCAL_WORLD_SIZE")) {
    int64_t local_size = 0, local_rank = 0;
    KOLO_RETURN_IF_ERROR_AS_IS(read_int(env, "LOCAL_WORLD_SIZE", 1, size, "a size from 1 to size",
                                        &local_size));
    KOLO_RETURN_IF_ERROR_AS_IS(read_int(env, "LOCAL_RANK", 0, local_size - 1,
                                        "a rank from 0 to LOCAL_WORLD_SIZE-1", &local_rank));
    o.local_rank = static_cast<int>(local_rank);
    o.local_size = static_cast<int>(local_size);
  }
  *out = std::move(o);
  return Status::OK();
}

}  // namespace kolo::socket
