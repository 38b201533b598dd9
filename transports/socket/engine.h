// Engine: one rank's connections to its peers once the mesh is up (mesh.h), and
// the progress thread that moves frames over them. The control plane
// (socket_control_plane.h) and the point-to-point verbs (socket_point_to_point.h)
// are thin faces over it; it is also the world's Liveness.
//
// Threads. The progress thread waits in epoll on every peer's socket: it reads
// every frame as it arrives (a receive that was posted gets its bytes straight
// into the caller's buffer), writes what callers queued when the socket has
// room, sends a heartbeat to a peer it has sent nothing to for a beat interval,
// and declares peers failed (Note [Liveness from the sockets]). Callers (a
// world's coordinator thread; kolo_init's thread before it; a process set's
// coordinator for its channel) post sends and receives, which write at once
// when the peer's queue is empty, and wait: briefly spinning and yielding, then
// on a condition variable that the progress thread signals (Note [Waiting
// without spinning]). One mutex guards everything here; nothing holds it across
// a blocking call.
//
// Channels. A world and each of its process sets use one channel id (the set's
// id, 0 for the world) over the same connections: control messages, rings and
// point-to-point messages match only within their channel.
//
// Messages. Point-to-point messages up to kEagerBytes (256 KiB) go at once (kEager) and
// wait in a queue of unexpected messages if no receive is posted yet; larger ones
// announce themselves (kRts), and their bytes (kData frames of up to
// kChunkBytes, written straight from the sender's buffer) follow once the
// receiver has posted the receive and answered (kCts), so a large message is
// never copied or held in memory twice, and data frames of several messages and
// the small frames of the control plane interleave between chunks. Messages
// between two ranks on one channel with one tag match in the order sent.
//
// Errors. A peer that breaks the protocol (a malformed frame, a frame of another
// generation or sender) is a failed peer, as is a closed connection that was not
// preceded by a bye. Once a peer has failed every call here returns the same
// KOLO_ERR_RANK_FAILED status, naming it, for good.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "transports/socket/frame.h"
#include "transports/socket/liveness.h"
#include "transports/socket/net.h"

namespace kolo::socket {

// One connected, handshaken peer, as the mesh hands it over.
struct PeerLink {
  int rank = -1;
  Fd fd;
  std::string address;  // "10.0.0.2:40211", for messages
  std::string host;
  pid_t pid = 0;
  bool same_host = false;  // its pid means something here
};

struct EngineOptions {
  int rank = 0;
  int size = 1;
  uint64_t generation = 0;
  // KOLO_PEER_TIMEOUT_SECONDS: a peer not heard from for this long has failed.
  std::chrono::milliseconds peer_timeout{10000};
};

class Engine : public Liveness {
 public:
  using RequestId = int64_t;

  // Takes the links (one per peer, peers.size() == size - 1) and starts the
  // progress thread.
  static Status start(const EngineOptions& options, std::vector<PeerLink> peers,
                      std::shared_ptr<Engine>* out);
  // An orderly close (Note [Closing in order]); joins the progress thread.
  ~Engine() override;

  int rank() const { return options_.rank; }
  int size() const { return options_.size; }
  std::chrono::milliseconds peer_timeout() const { return options_.peer_timeout; }
  // The peer's host and pid as its hello said (rank != this rank).
  const std::string& host_of(int rank) const;
  // Whether world rank `rank` has said bye: it left in order (Note [Closing in
  // order]), so its silence or exit is no failure. Any thread.
  bool left(int rank) const;

  // Liveness. failed() reads an atomic flag, so a caller may ask it as often as
  // it likes, before a throttled look of its own (HostLiveness in socket_node.cc).
  Status check() override;
  bool failed() const override;
  // Declares this rank's verdict: `why` names the failed ranks. Any thread.
  void declare_failure(const std::string& why);

  // Control messages: `blob` to `peer` under (channel, key), queued; the blob
  // from `peer` under (channel, key), waited for. A key is received once.
  Status send_control(int peer, uint32_t channel, uint64_t key, std::string blob);
  Status recv_control(int peer, uint32_t channel, uint64_t key, std::string* blob);

  // The doorbell of a channel (transport::ControlPlane's ring/rung/wait/wake).
  Status ring(uint32_t channel, uint64_t cycle, const std::vector<int>& peers);
  bool rung(uint32_t channel, uint64_t cycle);
  void wait_for_ring(uint32_t channel, uint64_t cycle, std::chrono::microseconds timeout);
  void wake(uint32_t channel);
  // Also calls `waker` (under the engine's lock: it must be quick and take no
  // lock of the engine's) whenever a ring arrives on `channel` and when a peer
  // fails, for a plane whose coordinator sleeps elsewhere (on the node's
  // doorbell, Note [One sleep for both doorbells] in socket_control_plane.h).
  // Replaces the channel's waker; close_channel() forgets it.
  void set_waker(uint32_t channel, std::function<void()> waker);
  // What arrives on `channel` from now on is dropped, and what has arrived is
  // freed: its plane is gone (ids are never reused).
  void close_channel(uint32_t channel);

  // Point-to-point (transport::PointToPoint's contract), `peer` a world rank.
  Status isend(uint32_t channel, int peer, const void* data, size_t bytes, int tag, RequestId* id);
  Status irecv(uint32_t channel, int peer, void* data, size_t bytes, int tag, RequestId* id);
  Status wait(RequestId id);
  Status test(RequestId id, bool* done);

 private:
  struct Request {
    bool send = false;
    int peer = -1;
    char* data = nullptr;
    size_t bytes = 0;
    size_t moved = 0;  // bytes written (send) or arrived (receive)
    bool done = false;
    Status status;
  };
  // A frame queued for a peer: `head` (header and fixed part, owned), then the
  // body, borrowed from a caller (`body`) or owned (`owned`).
  struct OutItem {
    std::string head;
    const char* body = nullptr;  // borrowed; unused when `owns`
    size_t body_bytes = 0;
    bool owns = false;           // the body is `owned` (which may move with the item)
    std::string owned;
    size_t written = 0;
    RequestId request = 0;  // credited with body_bytes once written
    bool bulk = false;      // a data frame: others pass it while it is unwritten
    const char* body_data() const { return owns ? owned.data() : body; }
  };
  // What the frame being read is, and where its body goes.
  struct InFrame {
    enum Stage { kHeader, kPrefix, kBody } stage = kHeader;
    char header[kHeaderBytes];
    char prefix[32];
    size_t got = 0;
    FrameHeader h;
    char* dst = nullptr;     // the body's destination (a posted receive, or `buf`)
    std::string buf;         // an owned body
    size_t body_bytes = 0;
    RequestId request = 0;   // the receive the body fills, if any
    bool discard = false;    // the body is read and dropped
    uint32_t channel = 0;    // kControl, kEager: from the fixed part
    uint64_t key = 0;        // kControl
  };
  struct Peer {
    PeerLink link;
    std::deque<OutItem> out;
    bool write_armed = false;
    InFrame in;
    std::chrono::steady_clock::time_point heard;
    std::chrono::steady_clock::time_point sent;
    std::chrono::steady_clock::time_point traced;  // last seen held by a debugger
    bool bye = false;     // it said bye: its close is orderly
    bool closed = false;  // its socket is gone
    bool shut = false;    // this rank shut its sending side (closing)
  };
  struct Unexpected {
    bool rts = false;
    std::string data;      // eager: the message
    uint64_t message = 0;  // rts: the sender's id and size
    uint64_t bytes = 0;
  };
  struct Bell {
    uint64_t highest = 0;
    bool any = false;
    bool woken = false;
    std::function<void()> waker;  // set_waker()
  };
  using MatchKey = std::tuple<uint32_t, int, int>;  // channel, peer, tag

  explicit Engine(const EngineOptions& options);
  // engine.cc: the progress thread, liveness and closing.
  void progress_loop();
  void beat_and_watch(std::chrono::steady_clock::time_point now);
  void declare_locked(const std::string& why);
  void forget_callers(Peer& p);
  void peer_gone(Peer& p, const std::string& why);
  void close_orderly();
  std::chrono::milliseconds beat_interval() const;
  // engine_io.cc: frames in and out (mu_ held).
  void enqueue(Peer& p, OutItem item);
  void write_some(Peer& p);
  void arm_write(Peer& p, bool on);
  void read_some(Peer& p);
  Status on_header(Peer& p);
  Status on_prefix(Peer& p);
  Status on_frame(Peer& p);
  Status match_eager(Peer& p, uint32_t channel, int tag);
  // The first posted receive still live for `key` (taken off the queue), or 0; one
  // whose size is not `bytes` is completed with the error and *refused is set.
  RequestId take_posted(const MatchKey& key, size_t bytes, bool* refused);
  Status on_eager(Peer& p);
  void on_rts(Peer& p, const RtsMsg& m);
  void accept_rts(Peer& p, uint64_t message, uint64_t bytes, RequestId id);
  Status start_data(Peer& p, uint64_t message, RequestId receive);
  void complete(RequestId id, Status status);
  Peer* peer(int rank);
  // engine_ops.cc helpers.
  template <typename Ready>
  Status wait_until(std::unique_lock<std::mutex>& lock, Ready ready);
  Status usable(int peer, const char* what) const;

  const EngineOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Peer>> peers_;  // by rank; null for this rank
  int epoll_ = -1;
  Fd wake_;  // an eventfd: stop
  bool stopping_ = false;  // closing in order: no more heartbeats
  bool quit_ = false;      // the progress thread returns
  std::chrono::steady_clock::time_point watched_;  // beat_and_watch's last run
  Status failed_;
  std::atomic<bool> failed_flag_{false};  // !failed_.ok(), read without mu_ (failed())
  std::thread thread_;

  RequestId next_request_ = 1;
  uint64_t next_message_ = 1;
  std::unordered_map<RequestId, Request> requests_;
  std::map<MatchKey, std::deque<RequestId>> posted_;
  std::map<MatchKey, std::deque<Unexpected>> unexpected_;
  std::unordered_map<uint64_t, RequestId> announced_;  // our rts message id -> the send
  std::map<std::tuple<uint32_t, int, uint64_t>, std::string> mailbox_;  // channel, peer, key
  std::unordered_map<uint32_t, Bell> bells_;
  std::vector<uint32_t> closed_channels_;
};

// Note [Liveness from the sockets]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A peer has failed when (a) its connection closes or breaks without a bye
// first — the kernel closes a dead process's sockets, so a killed rank is seen
// at once, on any host the FIN or RST reaches; (b) nothing has been read from it
// for the peer timeout — a stopped process, a hung host, a cut link (every rank
// sends a heartbeat to each peer it has sent nothing else to for a fifth of the
// timeout, from the progress thread, so a busy or blocked coordinator never
// looks silent); a peer on this host held by a debugger (a tracing stop, 't'
// in /proc/<pid>/stat) is not silent, as in the MPI world's PeerMonitor, and a
// rank that was itself stopped or starved does not count the time it could not
// listen as its peers' silence;
// (c) it breaks the protocol; or (d) a peer reports a verdict. The first
// verdict is this rank's for good, and it is sent on to every peer (kVerdict),
// so ranks that can still hear this one fail too, with the same names, rather
// than each waiting out its own timeout; a link that comes back later finds
// every rank failed, none half-way resumed.

// Note [Waiting without spinning]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A wait first checks, spins and yields for the peer profile (common/wait_policy.h)
// (a small message answers within microseconds, and a yield hands the core to
// a peer when ranks outnumber cores), then sleeps on the condition variable,
// which the progress thread signals on every completion, arrival and verdict.
// The progress thread itself only ever sleeps in epoll_wait.

// Note [Closing in order]
// ~~~~~~~~~~~~~~~~~~~~~~~
// A world is released after its teardown barrier, on every rank at about the
// same time. Each rank then sends a bye to every peer, flushes what is queued,
// shuts its sending side (a FIN, not a reset) and reads until each peer's side
// closes too, for at most a second (a tenth of one after a failure): a peer
// that sees a bye before the close knows the rank left in order and declares
// nothing. A receive from a peer that has left fails with KOLO_ERR_SHUTDOWN.

}  // namespace kolo::socket
