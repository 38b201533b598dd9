"""Worker processes: how kolorun starts one on this host or another, tells it of a
signal, stops it, and labels its output.

Every worker runs under the same small sh wrapper (WRAPPER), on this host through
`sh -c` and on another through ssh or --launcher-exec, so a worker is controlled
the same way wherever it runs: by the pipe kolorun holds to the wrapper's stdin.
On another host its environment comes through that pipe too (REMOTE_WRAPPER).

Note [A worker is held by a pipe]
A line with a signal name ("INT") on the pipe sends that signal to the worker's
process group; the pipe's end (kolorun closed it, or died, or ssh dropped) sends
SIGTERM, then SIGKILL after the grace period. So no worker outlives kolorun, even
one killed with SIGKILL, and ssh needs no tty to carry a signal. The wrapper's
watcher is a background subshell that reads the pipe; the worker is the wrapper
itself after `exec`, so its pid, its exit status and its signal are the ones
kolorun sees (a remote one through ssh's exit status), and its process group
(the wrapper leads a session: start_new_session here, sshd's session there) holds
its children too.
"""

import os
import shlex
import socket
import subprocess
import threading

from . import names

GRACE_SECONDS = 5  # after SIGTERM, a worker has this long before SIGKILL

WRAPPER = """exec 3<&0
(
  trap '' TERM
  while read -r sig <&3; do kill -s "$sig" -- -$$ 2>/dev/null; done
  kill -s TERM -- -$$ 2>/dev/null
  sleep %d
  kill -s KILL -- -$$ 2>/dev/null
) >/dev/null 2>&1 &
exec 3<&-
exec "$@" </dev/null""" % GRACE_SECONDS

# On another host the environment comes first on the same pipe, a NAME=VALUE line
# each, ended by an empty line (`read` takes a pipe a byte at a time, so the signal
# lines after it stay for the watcher): not on the command line, where the job
# token would show in `ps` on both hosts.
REMOTE_WRAPPER = ('while IFS= read -r line && [ -n "$line" ]; do export "$line"; done\n'
                  + WRAPPER)

# Variables that describe the launching shell, not a worker's: not passed to
# another host (horovodrun and Hydra skip the same kind).
NOT_FORWARDED = {"HOSTNAME", "PWD", "OLDPWD", "SHLVL", "_", "SSH_CLIENT", "SSH_CONNECTION",
                 "SSH_TTY", "SSH_AUTH_SOCK", "DISPLAY", "TERM", "TMUX", "LS_COLORS"}


def is_local_host(name):
    """This machine: localhost, any 127.x.y.z, ::1, or this machine's host name."""
    here = socket.gethostname()
    return (name in ("localhost", "::1", here, here.split(".")[0])
            or name.startswith("127.") and all(p.isdigit() for p in name.split(".")))


def routed_address(host):
    """This machine's address on the route to `host` (a UDP connect sends nothing)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect((host, 9))
        return s.getsockname()[0]


def free_ports(count, address=""):
    """`count` distinct TCP ports free on this host now (the kernel's ephemeral ones)."""
    held = [socket.socket() for _ in range(count)]
    try:
        for s in held:
            s.bind((address, 0))
        return [s.getsockname()[1] for s in held]
    finally:
        for s in held:
            s.close()


def worker_env(base, extra):
    """The launching environment without an MPI launcher's variables, plus `extra`."""
    env = {k: v for k, v in base.items() if not k.startswith(names.MPI_LAUNCHER_PREFIXES)}
    env.update(extra)
    return env


def forwarded(env):
    """The NAME=VALUE lines that carry `env` to another host: the launching shell's own
    variables, names that are not identifiers and values with a newline stay here."""
    return ["%s=%s" % (k, v) for k, v in env.items()
            if k not in NOT_FORWARDED and k.isidentifier() and "\n" not in v]


def remote_command(argv, cwd):
    """The one string a remote shell runs (ssh joins its words): the wrapper in cwd."""
    inner = ["sh", "-c", REMOTE_WRAPPER, "kolorun-worker"] + list(argv)
    return "cd %s && exec %s" % (shlex.quote(cwd), shlex.join(inner))


def launch_argv(host, argv, env, cwd, launcher_exec=None):
    """(argv to run here, env for it, lines to send first): the wrapper here, or
    ssh/--launcher-exec to `host` with the environment sent through the pipe."""
    if host is None:
        return ["sh", "-c", WRAPPER, "kolorun-worker"] + list(argv), env, []
    via = [launcher_exec] if launcher_exec else ["ssh", "-x", "-o", "BatchMode=yes"]
    return via + [host, remote_command(argv, cwd)], None, forwarded(env) + [""]


class OutputLabels:
    """Copies workers' output lines to kolorun's stdout/stderr, each line after the
    label its worker has when the line arrives ("[3] "); one lock keeps lines whole."""

    def __init__(self, out, err):
        self._streams = {1: out, 2: err}
        self._lock = threading.Lock()

    def pump(self, pipe, fd, label):
        """Starts a thread copying `pipe` to stream `fd` (1 or 2) until its end."""
        thread = threading.Thread(target=self._copy, args=(pipe, fd, label), daemon=True)
        thread.start()
        return thread

    def _copy(self, pipe, fd, label):
        with pipe:
            for line in iter(pipe.readline, b""):
                if not line.endswith(b"\n"):
                    line += b"\n"
                with self._lock:
                    stream = self._streams[fd]
                    stream.write(("[%s] " % label()).encode() + line)
                    stream.flush()


class Worker:
    """One worker process of a job, started by start(); the launcher's main thread
    polls it. `host` None: this host. Output goes to kolorun's own stdout/stderr,
    or through `labels` (an OutputLabels) with `label()` before each line."""

    def __init__(self, name, host, argv, env, cwd, launcher_exec=None, labels=None, label=None):
        self.name = name              # how messages name it: "rank 3 on h2", "h2[1]"
        self.host = host
        self.argv, self.env, self._first = launch_argv(host, argv, env, cwd, launcher_exec)
        self.cwd = cwd
        self._labels, self._label = labels, label
        self._proc = None
        self._pumps = []
        self.status = None            # exit status once known, as a shell gives it

    def start(self):
        """Starts the process; an OSError (no ssh, no sh) is raised to the caller."""
        pipe = subprocess.PIPE if self._labels else None
        self._proc = subprocess.Popen(self.argv, env=self.env, cwd=self.cwd,
                                      stdin=subprocess.PIPE, stdout=pipe, stderr=pipe,
                                      start_new_session=True)
        if self._first:
            try:
                self._proc.stdin.write("".join(line + "\n" for line in self._first).encode())
                self._proc.stdin.flush()
            except OSError:
                pass  # it ended already: its exit status says why
        if self._labels:
            self._pumps = [self._labels.pump(self._proc.stdout, 1, self._label),
                           self._labels.pump(self._proc.stderr, 2, self._label)]

    @property
    def pid(self):
        return self._proc.pid if self._proc else None

    def poll(self):
        """The exit status once the process ended (128 + N for signal N), else None."""
        if self.status is None and self._proc is not None:
            code = self._proc.poll()
            if code is not None:
                self.status = 128 - code if code < 0 else code
                self._close_pipe()
        return self.status

    def signal(self, name):
        """Sends signal `name` ("INT", "TERM", "USR1") to the worker's process group."""
        if self._proc is None:
            return
        try:
            self._proc.stdin.write(name.encode() + b"\n")
            self._proc.stdin.flush()
        except (OSError, ValueError):
            pass  # it has ended, or is ending

    def stop(self):
        """SIGTERM, then SIGKILL after GRACE_SECONDS (Note [A worker is held by a pipe])."""
        self._close_pipe()

    def kill(self):
        """SIGKILL to what runs here: the worker itself, or the ssh that carries it
        (whose end then stops the remote worker through the pipe)."""
        if self._proc is not None and self._proc.poll() is None:
            try:
                os.killpg(self._proc.pid, 9)
            except OSError:
                pass
        self._close_pipe()

    def wait_output(self, timeout=5):
        """Waits (bounded) until its output has been copied."""
        for thread in self._pumps:
            thread.join(timeout)

    def _close_pipe(self):
        if self._proc is not None and self._proc.stdin and not self._proc.stdin.closed:
            try:
                self._proc.stdin.close()
            except OSError:
                pass
