// kolo_store_serve and its companions (kolo.h): the socket world's rendezvous
// store, served by a launcher rather than by a rank.
#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

#include "bindings/c/c_api_state.h"
#include "transports/socket/net.h"
#include "transports/socket/tcp_store.h"

struct kolo_store_server {
  std::unique_ptr<kolo::socket::TcpStoreServer> server;
};

using kolo::c_api::guarded;
using kolo::c_api::invalid;
using kolo::c_api::report;

extern "C" {

kolo_status_t kolo_store_serve(const char* address, int port, const char* job_token,
                               kolo_store_server_t** server) {
  return guarded(KOLO_ERR_INTERNAL, [&] {
    if (server == nullptr) return invalid("server is NULL");
    *server = nullptr;
    if (address == nullptr || *address == '\0') return invalid("address is NULL or empty");
    if (port < 0 || port > 65535) return invalid("port " + std::to_string(port) + " is not 0 to 65535");
    const std::string token = job_token == nullptr ? std::string() : std::string(job_token);
    if (token.size() > 256) return invalid("job_token is longer than 256 bytes");
    kolo::socket::Endpoint where;
    kolo::Status s = kolo::socket::resolve(address, static_cast<uint16_t>(port), &where);
    if (!s.ok()) return report(s);
    kolo::socket::TcpStoreServer::Options options;
    options.token = token;
    auto made = std::make_unique<kolo_store_server>();
    int bind_errno = 0;
    s = kolo::socket::TcpStoreServer::start(where, options, &made->server, &bind_errno);
    if (!s.ok()) return report(s);
    *server = made.release();
    return report(kolo::Status::OK());
  });
}

int kolo_store_server_port(const kolo_store_server_t* server) {
  return guarded(-1, [&] { return server == nullptr ? -1 : int{server->server->endpoint().port()}; });
}

void kolo_store_server_stop(kolo_store_server_t* server) {
  guarded(0, [&] {
    delete server;
    return 0;
  });
}

}  // extern "C"
