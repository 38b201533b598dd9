// TcpLiveness's connection to one peer, and the socket calls on it. Internal to
// transports/liveness (tcp_liveness.cc and tcp_liveness_connect.cc).
#pragma once

#include <string>
#include <vector>

#include "transports/liveness/liveness_wire.h"
#include "transports/liveness/tcp_liveness.h"

namespace kolo::liveness {

struct TcpLiveness::Link {
  enum class State { kIdle, kDialing, kAwaitAck, kUp };

  int rank = 0;
  std::string host;
  uint16_t port = 0;
  std::vector<std::string> ipv4;
  size_t next_ip = 0;  // the address the next dial tries
  State state = State::kIdle;
  int fd = -1;
  std::string in;   // bytes read, not yet a whole frame
  std::string out;  // bytes not yet sent (sends never block)
  Clock::time_point heard{};
  bool closed = false;  // the connection ended: EOF, an error, a bad frame
  std::string closed_why;
  bool departed = false;  // the peer said Bye before closing
};

// Sends what `out` holds without blocking; keeps what did not fit. False on an
// error of the connection (the peer is gone).
bool flush(int fd, std::string* out);

enum class ReadResult { kData, kWouldBlock, kEnd, kError };
// Appends what can be read now to *in.
ReadResult read_some(int fd, std::string* in);

// Closes fd (if open) and sets it to -1.
void close_fd(int* fd);

// A non-blocking TCP socket with TCP_NODELAY, or -1.
int tcp_socket();

}  // namespace kolo::liveness
