"""A worker's side of kolorun --elastic's service (tools/kololaunch/service.py has
the protocol): say READY, wait for the next assignment, ask whether the hosts
changed. Standard library only; the names below are the ones in
tools/kololaunch/names.py (tests/kolorun checks that they agree)."""

import http.client
import json
import time
import urllib.parse

# The environment kolorun --elastic gives each worker.
KOLO_ELASTIC_ADDR = "KOLO_ELASTIC_ADDR"
KOLO_ELASTIC_PORT = "KOLO_ELASTIC_PORT"
KOLO_JOB_TOKEN = "KOLO_JOB_TOKEN"
KOLO_GENERATION = "KOLO_GENERATION"
HOROVOD_HOSTNAME = "HOROVOD_HOSTNAME"
HOROVOD_LOCAL_RANK = "HOROVOD_LOCAL_RANK"

# The protocol.
TOKEN_HEADER = "X-Kolo-Job-Token"
PATH_READY = "/ready"
PATH_ASSIGNMENT = "/assignment"
PATH_UPDATES = "/updates"
PATH_STATUS = "/status"
UPDATE_REMOVED = 1
UPDATE_ADDED = 2

REQUEST_TIMEOUT_SECONDS = 30
POLL_SECONDS = (0.01, 0.2)  # the wait for an assignment polls from 10 ms up to 200 ms


class ElasticDriverError(RuntimeError):
    """The elastic driver (kolorun --elastic) could not be reached or refused a
    request: the job cannot go on. Not a HorovodInternalError, so that run() does
    not try to re-form again."""


class DriverClient:
    """Requests to the driver at addr:port, each with the job token. Any thread."""

    def __init__(self, addr, port, token):
        self.addr, self.port, self.token = addr, int(port), token

    @classmethod
    def from_env(cls, env):
        """The client for the driver named in env, or None outside an elastic job."""
        if not env.get(KOLO_ELASTIC_ADDR):
            return None
        return cls(env[KOLO_ELASTIC_ADDR], env.get(KOLO_ELASTIC_PORT, "0"),
                   env.get(KOLO_JOB_TOKEN, ""))

    def _request(self, method, path, body=None):
        where = "the elastic driver at %s:%d (kolorun --elastic)" % (self.addr, self.port)
        data = None if body is None else json.dumps(body).encode()
        headers = {TOKEN_HEADER: self.token, "Content-Type": "application/json"}
        conn = http.client.HTTPConnection(self.addr, self.port, timeout=REQUEST_TIMEOUT_SECONDS)
        try:
            conn.request(method, path, data, headers)
            reply = conn.getresponse()
            text = reply.read()
        except (OSError, http.client.HTTPException) as e:
            raise ElasticDriverError("%s: %s %s failed: %s" % (where, method, path, e))
        finally:
            conn.close()
        if reply.status != 200:
            raise ElasticDriverError("%s answered %s %s with HTTP %d%s" % (
                where, method, path, reply.status,
                " (a wrong job token)" if reply.status == 403 else ": " + text.decode(
                    errors="replace")))
        return json.loads(text)

    def ready(self, slot, generation, ports):
        """This worker left `generation` and waits to re-form; `ports` are free here."""
        self._request("POST", PATH_READY, {"slot": slot, "generation": generation,
                                           "ports": list(ports)})

    def next_assignment(self, slot, after, timeout):
        """The driver's answer once the generation after `after` is formed (or the
        worker is removed, or the job ends): a dict, see service.py."""
        path = "%s?%s" % (PATH_ASSIGNMENT, urllib.parse.urlencode({"slot": slot, "after": after}))
        deadline = time.monotonic() + timeout
        pause = POLL_SECONDS[0]
        while True:
            answer = self._request("GET", path)
            if not answer.get("pending"):
                return answer
            if time.monotonic() > deadline:
                raise ElasticDriverError("no generation after %d was formed within %g s" % (
                    after, timeout))
            time.sleep(pause)
            pause = min(pause * 2, POLL_SECONDS[1])

    def updates_since(self, generation):
        """(changed, UPDATE_* bits): did the hosts change since `generation` formed."""
        answer = self._request("GET", "%s?generation=%d" % (PATH_UPDATES, generation))
        return bool(answer["updated"]), int(answer["result"])

    def status(self):
        return self._request("GET", PATH_STATUS)
