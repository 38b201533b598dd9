"""The elastic driver's service: how workers re-form and learn of host changes.

HTTP/1.1 with JSON bodies on one TCP port of the launching host (KOLO_ELASTIC_ADDR
and KOLO_ELASTIC_PORT in every worker's environment); every request carries the
job token (names.TOKEN_HEADER) or is answered 403 and nothing else. The requests
(kolo/elastic/_driver.py makes them):

  POST /ready       {"slot": "h1:0", "generation": 3, "ports": [p, q]}
                    this worker left generation 3 to re-form; p and q are ports
                    free on its host, for the store if it becomes rank 0
  GET  /assignment?slot=h1:0&after=3
                    {"pending": true} until generation 4 is formed, then
                    {"generation": 4, "slot": {rank, size, local_rank, ...},
                     "env": {every variable that changed}} or {"removed": true}
                    or, when the job ends instead, {"stop": "why"}
  GET  /updates?generation=3
                    {"updated": bool, "result": names.UPDATE_* bits}: whether
                    the hosts changed since generation 3 formed, in a way that
                    changes the assignment (what check_host_updates() reads)
  GET  /status      the driver's state (generation, assignment, registry)

The handlers only read and record under the driver's lock (Driver.lock); the
driver's main thread does everything that takes time.
"""

import hmac
import http.server
import json
import socketserver
import threading
import urllib.parse

from . import names


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "kolorun-elastic"

    def log_message(self, fmt, *args):  # the driver reports what matters itself
        pass

    def _authorized(self):
        given = self.headers.get(names.TOKEN_HEADER, "")
        if hmac.compare_digest(given.encode(), self.server.token.encode()):
            return True
        self.send_response(403)
        self.send_header("Content-Length", "0")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        return False

    def _reply(self, body, code=200):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if not self._authorized():
            return
        url = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(url.query))
        driver = self.server.driver
        try:
            if url.path == names.PATH_ASSIGNMENT:
                self._reply(driver.assignment_for(query["slot"], int(query["after"])))
            elif url.path == names.PATH_UPDATES:
                self._reply(driver.updates_since(int(query["generation"])))
            elif url.path == names.PATH_STATUS:
                self._reply(driver.status())
            else:
                self._reply({"error": "no such path %s" % url.path}, 404)
        except (KeyError, ValueError) as e:
            self._reply({"error": "bad request %s: %s" % (self.path, e)}, 400)

    def do_POST(self):
        if not self._authorized():
            return
        try:
            length = int(self.headers.get("Content-Length", "0"))
            if not 0 <= length <= 65536:
                raise ValueError("a body of %d bytes" % length)
            body = json.loads(self.rfile.read(length) or b"{}")
            if self.path != names.PATH_READY:
                self._reply({"error": "no such path %s" % self.path}, 404)
                return
            ports = [int(p) for p in body.get("ports", [])][:2]
            self._reply(self.server.driver.ready(str(body["slot"]), int(body["generation"]),
                                                 ports))
        except (KeyError, ValueError, TypeError) as e:
            self._reply({"error": "bad request: %s" % e}, 400)


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        pass  # a worker killed mid-request; the driver sees its exit


class Service:
    """Serves `driver` (ready, assignment_for, updates_since, status) at address:0."""

    def __init__(self, driver, address, token):
        self._server = _Server((address, 0), _Handler)
        self._server.driver, self._server.token = driver, token
        self.address, self.port = address, self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def start(self):
        self._thread.start()

    def stop(self):
        self._server.shutdown()
        self._server.server_close()
