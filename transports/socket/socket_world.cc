// create_world for sockets (socket_world.h): the store, the rendezvous, the
// mesh, the engine, and the world over them.
#include "transports/socket/socket_world.h"

#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <memory>

#include "common/check.h"
#include "common/logging.h"
#include "common/failpoint.h"
#include "transport/registry.h"
#include "transports/socket/engine.h"
#include "transports/socket/file_store.h"
#include "transports/socket/mesh.h"
#include "transports/socket/rendezvous.h"
#include "transports/socket/socket_control_plane.h"
#include "transports/socket/socket_factory.h"
#include "transports/socket/socket_point_to_point.h"
#include "transports/socket/tcp_store.h"

namespace kolo::socket {
namespace {

std::chrono::milliseconds left(Clock::time_point deadline) {
  return std::max(std::chrono::milliseconds(1),
                  std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
}

Status check_options(const SocketWorldOptions& o) {
  if (o.size < 1) return invalid_argument("world size " + std::to_string(o.size) + " (must be >= 1)");
  if (o.rank < 0 || o.rank >= o.size)
    return invalid_argument("rank " + std::to_string(o.rank) + " outside 0.." +
                            std::to_string(o.size - 1));
  if (o.token.size() > kMaxTokenBytes)
    return invalid_argument("the job token is " + std::to_string(o.token.size()) +
                            " bytes; at most " + std::to_string(kMaxTokenBytes));
  if (o.store == nullptr && o.store_directory.empty() && (o.store_host.empty() || o.store_port == 0))
    return invalid_argument("no store: give its host and port, or a directory for a file store");
  if (o.test_node_size < 0) return invalid_argument("test_node_size must be >= 0");
  if ((o.local_rank >= 0) != (o.local_size >= 0) ||
      (o.local_size >= 0 && (o.local_size < 1 || o.local_rank >= o.local_size)))
    return invalid_argument("LOCAL_RANK=" + std::to_string(o.local_rank) + " and LOCAL_WORLD_SIZE=" +
                            std::to_string(o.local_size) + " do not fit together");
  return Status::OK();
}

// Step 1: the store. *tcp is set when it is a TCP store (its connection says
// which address reaches it).
Status open_store(const SocketWorldOptions& o, Clock::time_point deadline,
                  std::unique_ptr<Store>* owned, Store** store, TcpStore** tcp) {
  *tcp = nullptr;
  if (o.store != nullptr) {
    *store = o.store;
    return Status::OK();
  }
  if (!o.store_directory.empty()) {
    std::unique_ptr<FileStore> files;
    KOLO_RETURN_IF_ERROR_AS_IS(FileStore::open(o.store_directory, left(deadline), &files));
    *store = files.get();
    *owned = std::move(files);
    return Status::OK();
  }
  Endpoint where;
  KOLO_RETURN_IF_ERROR_AS_IS(resolve(o.store_host, o.store_port, &where));
  if (o.rank == 0 && o.serve_store) {
    bool started = false;
    int bind_errno = 0;
    Status served = TcpStoreServer::shared(where, o.token, &started, &bind_errno);
    // In use: someone serves there already (a launcher). Not an address of this
    // host: the store is served elsewhere. Either way, this rank is a client.
    if (!served.ok() && bind_errno != EADDRINUSE && bind_errno != EADDRNOTAVAIL) return served;
    if (started) KOLO_LOG(kDebug) << "serving the store at " << where.to_string();
  }
  std::unique_ptr<TcpStore> client;
  KOLO_RETURN_IF_ERROR_AS_IS(
      TcpStore::connect(where, o.token, o.rank, o.generation, left(deadline), &client));
  *tcp = client.get();
  *store = client.get();
  *owned = std::move(client);
  return Status::OK();
}

// Step 2: where this rank listens.
Status listen_here(const SocketWorldOptions& o, const TcpStore* tcp, Fd* listener, Endpoint* bound) {
  Endpoint where;
  if (!o.ifname.empty()) {
    KOLO_RETURN_IF_ERROR_AS_IS(interface_address(o.ifname, &where));
  } else if (tcp != nullptr) {
    where = tcp->local();
    where.set_port(0);
  } else {
    KOLO_RETURN_IF_ERROR_AS_IS(resolve("127.0.0.1", 0, &where));
  }
  return listen_on(where, listener, bound);
}

// Note [Hosts in the socket world].
std::string node_of(const SocketWorldOptions& o) {
  if (o.test_node_size > 0) return "pretend:" + std::to_string(o.rank / o.test_node_size);
  if (o.local_size >= 0) return "block:" + std::to_string(o.rank - o.local_rank);
  return "host:" + host_name();
}

// The topology of `members` (world ranks, ascending) seen from `me` (an index
// into members), from each world rank's node.
transport::Topology topology_of(const std::vector<std::string>& nodes, const std::vector<int>& members,
                                int me) {
  transport::Topology t;
  t.rank = me;
  t.size = static_cast<int>(members.size());
  t.local_size = 0;
  std::vector<int> local_rank(members.size(), 0);
  std::vector<std::string> seen;
  for (size_t i = 0; i < members.size(); ++i) {
    int before = 0;
    for (size_t j = 0; j < i; ++j) before += nodes[members[j]] == nodes[members[i]] ? 1 : 0;
    local_rank[i] = before;
    if (nodes[members[i]] == nodes[members[me]]) ++t.local_size;
  }
  t.local_rank = local_rank[me];
  t.cross_size = 0;
  for (size_t i = 0; i < members.size(); ++i) {
    if (local_rank[i] != t.local_rank) continue;
    if (static_cast<int>(i) == me) t.cross_rank = t.cross_size;
    ++t.cross_size;
  }
  return t;
}

// The control plane, agreement, point-to-point verbs and transports of a plane.
Status assemble(const std::shared_ptr<Engine>& engine, uint32_t channel, std::vector<int> members,
                const transport::Topology& topology, const SocketWorldOptions& o,
                transport::World* built) {
  auto control = std::make_unique<SocketControlPlane>(engine, channel, members, topology);
  if (o.agree) KOLO_RETURN_IF_ERROR_AS_IS(o.agree(*control));
  built->control = std::move(control);
  built->p2p = std::make_unique<SocketPointToPoint>(engine, channel, std::move(members), topology.rank);
  SocketFactory factory(*built->control, *built->p2p);
  return transport::build_transports(factory, topology, o.build, built);
}

// Steps 1-4: the links to every peer; *nodes gets every rank's node.
Status meet(const SocketWorldOptions& o, std::vector<PeerLink>* links, std::vector<std::string>* nodes) {
  const auto deadline = Clock::now() + o.init_timeout;
  std::unique_ptr<Store> owned;
  Store* store = nullptr;
  TcpStore* tcp = nullptr;
  KOLO_RETURN_IF_ERROR_AS_IS(open_store(o, deadline, &owned, &store, &tcp));
  int64_t made = 0;  // Note [Worlds of one generation]
  const std::string prefix = generation_prefix(o.generation);
  KOLO_RETURN_IF_ERROR_AS_IS(store->add(prefix + "worlds/rank/" + std::to_string(o.rank), 1, &made));
  const std::string scope = prefix + "w" + std::to_string(made) + "/";
  Fd listener;
  Endpoint bound;
  RankRecord mine;
  Status listening = listen_here(o, tcp, &listener, &bound);
  if (!listening.ok()) {
    mine.error = listening.message();  // every rank fails with it (rendezvous.h)
    exchange_records(*store, scope, o.rank, o.size, o.generation, mine, deadline, nullptr).ignore();
    return listening;
  }
  mine.size = o.size;
  mine.pid = static_cast<int32_t>(getpid());
  mine.host = host_name();
  mine.address = bound.host();
  mine.port = bound.port();
  mine.node = node_of(o);
  std::vector<RankRecord> records;
  KOLO_RETURN_IF_ERROR_AS_IS(
      exchange_records(*store, scope, o.rank, o.size, o.generation, mine, deadline, &records));
  std::vector<Endpoint> endpoints(records.size());
  nodes->clear();
  for (size_t r = 0; r < records.size(); ++r) {
    KOLO_RETURN_IF_ERROR_AS_IS(resolve(records[r].address, records[r].port, &endpoints[r]));
    nodes->push_back(records[r].node);
  }
  MeshIdentity me{o.rank, o.size, o.generation, o.token, mine.host};
  KOLO_RETURN_IF_ERROR_AS_IS(form_mesh(me, listener, endpoints, deadline, links));
  if (o.rank == 0) {  // every rank has connected, so every rank has read the records
    int64_t removed = 0;
    store->delete_prefix(scope, &removed).ignore();
  }
  return Status::OK();
}

}  // namespace

Status create_world(const SocketWorldOptions& options, transport::World* world) {
  KOLO_RETURN_IF_ERROR_AS_IS(check_options(options));
  std::vector<PeerLink> links;
  std::vector<std::string> nodes;
  KOLO_RETURN_IF_ERROR_AS_IS(meet(options, &links, &nodes));
  EngineOptions eo;
  eo.rank = options.rank;
  eo.size = options.size;
  eo.generation = options.generation;
  eo.peer_timeout = options.peer_timeout;
  std::shared_ptr<Engine> engine;
  KOLO_RETURN_IF_ERROR(Engine::start(eo, std::move(links), &engine));
  failpoint("init");
  std::vector<int> everyone(static_cast<size_t>(options.size));
  for (int r = 0; r < options.size; ++r) everyone[r] = r;
  transport::World built;
  KOLO_RETURN_IF_ERROR_AS_IS(
      assemble(engine, 0, everyone, topology_of(nodes, everyone, options.rank), options, &built));
  SocketWorldOptions set_options = options;
  set_options.agree = nullptr;  // kolo_init's; a set agrees itself
  set_options.store = nullptr;
  const int world_rank = options.rank;
  built.make_subset = [engine, set_options, nodes, world_rank](
                          int32_t id, const std::vector<int>& ranks, transport::World* out) {
    if (id <= 0) return invalid_argument("process set id " + std::to_string(id));
    auto me = std::find(ranks.begin(), ranks.end(), world_rank);
    if (me == ranks.end()) return internal_error("a process set's world without this rank");
    const int index = static_cast<int>(me - ranks.begin());
    transport::World set;
    KOLO_RETURN_IF_ERROR_AS_IS(assemble(engine, static_cast<uint32_t>(id), ranks,
                                        topology_of(nodes, ranks, index), set_options, &set));
    *out = std::move(set);
    return Status::OK();
  };
  *world = std::move(built);
  return Status::OK();
}

}  // namespace kolo::socket
