// TcpLiveness: whether the ranks on other nodes are still there, told by a small
// TCP side channel of kolo's own, apart from the transport that carries the data.
//
// How it knows (one connection per pair of watched ranks, made at init):
// - a process that exits, however it ends, has its connections closed by the
//   kernel: the peer's read sees the end at once (well under a second), unless
//   the process said goodbye first (Bye, sent when its world is torn down);
// - a thread of this class sends a heartbeat on every connection each interval
//   (a fifth of the timeout, at least 10 ms) and reads whatever arrives: a peer
//   not heard from for the timeout is silent (a partition, a stopped or hung
//   host). Silence counts only while this process itself could listen (Note
//   [Silence is counted only while this process listens] in
//   transport/liveness.h);
// - a rank that reaches a verdict, by any means (these connections, its node's
//   check, a peer's notice), sends a failure notice with its reason to every peer
//   it can still reach, once; a peer that receives one adopts it and passes it on.
//   So one-way loss, or a failure only some ranks can see, still ends every rank
//   that can be reached, with a message that names the failed rank.
// See Note [A side channel apart from MPI's progress] for why this exists.
//
// Contract. listen() and connect() run on the thread in kolo_init, in that order,
// with the addresses of every rank exchanged between them by the world (any
// collective it has: MPI, a store); connect() is collective over the peers named
// and bounded by the timeout. check() and failed() may be called from any thread
// (the coordinator, the thread in kolo_init); declare() too. The verdict, once
// reached, is final: check() returns the same KOLO_ERR_RANK_FAILED forever.
// `on_verdict` runs once, on the thread that reached it. The destructor stops the
// thread, says goodbye to every peer (unless a verdict was reached: then the
// peers see the connections close, a failure, as they should) and closes them.
// Security: the listening socket is open only during connect(), on every
// interface (which one reaches the peers is not known before); a connection
// counts only after a hello carrying the job's token (drawn by the world, shared
// with its ranks only) and the right ranks; anything else is closed unanswered.
// Malformed frames on a connection end it (a failure of that peer).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "transport/liveness.h"

namespace kolo::liveness {

class TcpLiveness : public transport::Liveness {
 public:
  using Clock = std::chrono::steady_clock;

  struct Options {
    int rank = 0;  // this process's rank in the world
    std::chrono::milliseconds timeout{10000};  // KOLO_PEER_TIMEOUT_SECONDS
    uint64_t token = 0;  // the job's secret, the same on every rank
    std::function<void()> on_verdict;  // e.g. "MPI_Finalize would wait forever"
  };
  struct Peer {
    int rank = 0;
    std::string address;  // what that rank's address() returned
  };

  // Opens the listening socket (a free port, every interface). *out's address()
  // is then what the other ranks need.
  static Status listen(Options options, std::unique_ptr<TcpLiveness>* out);
  ~TcpLiveness() override;
  TcpLiveness(const TcpLiveness&) = delete;
  TcpLiveness& operator=(const TcpLiveness&) = delete;

  // "host|port|ipv4,ipv4,...": this host's name, the port, its IPv4 addresses
  // (loopback last). At most kMaxAddress bytes.
  const std::string& address() const { return address_; }
  static constexpr size_t kMaxAddress = 512;

  // Connects to every rank in `peers` (each pair once: the lower rank dials),
  // closes the listening socket and starts the thread. Fails with
  // KOLO_ERR_RANK_FAILED naming the ranks not reached within the timeout.
  Status connect(const std::vector<Peer>& peers);

  Status check() override;
  // Reads what the connections hold right now (a poll) and judges.
  Status check_now() override;
  bool failed() const override { return failed_.load(std::memory_order_acquire); }
  // The thread beats; nobody needs to call check() to be heard.

  // This process's own verdict (found by other means, e.g. its node's check):
  // adopted unless one was reached first, and told to every peer.
  void declare(const Status& verdict);

 private:
  struct Link;
  struct Dialing;  // connect()'s state (tcp_liveness_connect.cc)
  explicit TcpLiveness(Options options);
  void start_dials(Dialing* d);
  void answer_dials(Dialing* d);
  void take_hellos(Dialing* d);
  Status finish_connect();
  // Reads what has arrived, beats if due, judges silence. Under mu_.
  void look(Clock::time_point now, bool poll_first);
  void read_link(Link& link, Clock::time_point now);
  void judge(Clock::time_point now);
  void beat(Clock::time_point now);
  void reach_verdict(const Status& verdict);  // under mu_
  void run();
  std::string who(const Link& link) const;

  const Options options_;
  const std::chrono::milliseconds interval_;
  std::string address_;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};  // a pipe: the destructor wakes the thread
  std::vector<std::unique_ptr<Link>> links_;
  mutable std::mutex mu_;  // links_, verdict_, the timestamps below
  Clock::time_point last_look_{};
  Clock::time_point next_beat_{};
  uint64_t beats_ = 0;
  Status verdict_;
  std::atomic<bool> failed_{false};
  std::atomic<int64_t> last_look_ns_{0};  // for check()'s lock-free answer
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

// Note [A side channel apart from MPI's progress]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// kolo's remote heartbeats used to be MPI messages on a duplicate of the control
// communicator. That tied liveness to MPI: a heartbeat only says that MPI could
// carry that message, not that the path the blocked operation needs still works
// (MPI may take other lanes for other messages: shared memory, another rail), a
// dead process was noticed only by its silence (the timeout, 10 s by default,
// where the kernel had told the peer's socket at once), and after a verdict the
// survivor's MPI calls kept progressing requests it had abandoned, whose late
// data reached a peer that resumed (tests/multihost/failure: a SIGSTOPped host,
// resumed after the others gave it up, completed an allreduce with wrong data or
// failed with "negotiation vectors differ"). A TCP connection per pair, owned by
// kolo, says what is needed directly: closed means that process is gone; silence
// means a partition; and it carries the failure notices that keep every rank's
// verdict the same. It shares the network with the data, not MPI's progress.

}  // namespace kolo::liveness
