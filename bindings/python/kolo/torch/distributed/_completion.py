"""Completing torch futures when kolo completes: one watcher thread per process.

Contract: ``watch(handles, finish, what)`` returns, at once, the operation's
entry, whose ``future`` is a ``torch.futures.Future``; when every kolo Handle in
``handles`` has completed, ``finish()`` (which copies outputs into the caller's
tensors and returns the future's value) runs and the future gets its value; if a
handle failed, or ``finish`` raised, the future gets a RuntimeError carrying
kolo's message, prefixed by ``what``. Any thread may call ``watch``; the future
completes on a worker thread, or on the thread that calls ``complete_here`` for
it first (Note [A waiting caller completes its own operation]).

Note [Futures complete on workers, not on the watcher]
A future's callbacks run on the thread that completes it, and DDP's hooks wait
inside their callbacks for other collectives (PowerSGD's ``.then`` calls
``dist.all_reduce(...).get_future().wait()``). So the watcher thread, which must
keep noticing completions, only detects them; a completed operation is handed to
a worker, and a new worker is started whenever all of them are busy (blocked in
such a callback), so a chain of callbacks waiting on later collectives never
waits for itself.

Note [The watcher waits on the oldest operation]
Operations of one group complete in the order they were submitted almost always
(kolo negotiates them in cycles, oldest first), so the watcher blocks in
kolo_wait on the oldest pending handle, in slices of _SLICE_SECONDS (doubling,
up to _LONGEST_SLICE_SECONDS, while the same operation stays pending, so a
stalled one costs a few wake-ups a second), and polls the others after each
slice: a completion is noticed at once in the common case and within one slice
otherwise. kolo_wait sleeps on a condition variable (and
may run kolo's cycle itself), so a waiting watcher does not spin. With nothing
pending the watcher sleeps on a condition variable until ``watch`` is called.

Note [A waiting caller completes its own operation]
Most calls from torch.distributed's Python API wait at once (every call without
async_op=True). Through the watcher such a wait costs three hand-offs between
Python threads, each a wake-up and a pass of the GIL: to the watcher, to a
worker, back to the caller; at 4 KiB they were most of the call's time. So
``complete_here(entry)``, from KoloWork.wait(), takes the entry from the watcher
if no worker has it yet, waits for its handles on the caller's thread and
completes the future there; callbacks chained on the future then run on the
caller's thread, which was going to wait for them anyway. An entry a worker has
already taken is waited for as before.
"""

import collections
import threading

import torch

from ...exceptions import KoloTimeoutError

# Note [Errors reach the future through then()]
# A future failed from Python (Future.set_exception) keeps the Python exception,
# and a C++ thread that rethrows and drops it without the GIL (DDP's reducer, on
# the autograd thread) crashes the process. So the future handed out is
# base.then(outcome): the base always gets a result, and outcome() raises the
# error inside then(), which torch turns into a C++ std::runtime_error carrying
# the message ("Got the following error when running the callback: ...").

_SLICE_SECONDS = 0.002
_LONGEST_SLICE_SECONDS = 0.05
_MAX_WORKERS = 64


class _Entry:
    __slots__ = ("handles", "finish", "what", "on_error", "base", "future", "value", "error")

    def __init__(self, handles, finish, what, on_error):
        self.handles = handles
        self.finish = finish
        self.what = what
        self.on_error = on_error
        self.value = None
        self.error = None
        # Note [Errors reach the future through then()]
        self.base = torch.futures.Future()
        self.future = self.base.then(self._outcome)

    def _outcome(self, _):
        if self.error is not None:
            raise self.error
        return self.value

    def done(self):
        return all(h.poll() for h in self.handles)

    def wait_handles(self):
        for h in self.handles:
            try:
                h.wait()
            except Exception:  # noqa: BLE001 - _complete() reads the error again
                return

    def oldest_pending(self):
        for h in self.handles:
            if not h.done():
                return h
        return None


class _Workers:
    """Daemon threads that complete futures; one more starts when all are busy."""

    def __init__(self):
        self._cv = threading.Condition()
        self._queue = collections.deque()
        self._idle = 0
        self._count = 0

    def submit(self, entry):
        with self._cv:
            self._queue.append(entry)
            if self._idle == 0 and self._count < _MAX_WORKERS:
                self._count += 1
                threading.Thread(target=self._run, name="kolo-c10d-complete",
                                 daemon=True).start()
            self._cv.notify()

    def _run(self):
        while True:
            with self._cv:
                self._idle += 1
                while not self._queue:
                    self._cv.wait()
                self._idle -= 1
                entry = self._queue.popleft()
            _complete(entry)


def _complete(entry):
    try:
        for h in entry.handles:
            h.wait()  # done already: returns the result or raises kolo's error
        value = entry.finish()
    except Exception as e:  # noqa: BLE001 - every failure becomes the future's error
        entry.error = RuntimeError("%s: %s" % (entry.what, e))
        if entry.on_error is not None:
            entry.on_error(entry.error)
        entry.base.set_result(None)
        return
    entry.value = value
    entry.base.set_result(None)


class _Watcher:
    def __init__(self):
        self._cv = threading.Condition()
        self._pending = collections.deque()
        self._thread = None
        self._workers = _Workers()

    def watch(self, handles, finish, what, on_error=None):
        entry = _Entry(list(handles), finish, what, on_error)
        with self._cv:
            self._pending.append(entry)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="kolo-c10d-watch",
                                                daemon=True)
                self._thread.start()
            self._cv.notify()
        return entry

    def claim(self, entry):
        """Takes entry from the pending ones: True unless it was handed over."""
        with self._cv:
            if entry not in self._pending:
                return False
            self._pending.remove(entry)
            return True

    def _run(self):
        waited_on, slices = None, 0
        while True:
            with self._cv:
                while not self._pending:
                    self._cv.wait()
                entries = list(self._pending)
            finished = [e for e in entries if _poll(e)]
            if finished:
                with self._cv:  # a caller may have claimed some meanwhile
                    finished = [e for e in finished if e in self._pending]
                    for e in finished:
                        self._pending.remove(e)
                for e in finished:
                    self._workers.submit(e)
                continue
            oldest = entries[0].oldest_pending()
            if oldest is None:
                continue
            slices = slices + 1 if oldest is waited_on else 0
            waited_on = oldest
            try:
                oldest.wait(min(_SLICE_SECONDS * 2 ** min(slices, 5), _LONGEST_SLICE_SECONDS))
            except KoloTimeoutError:
                pass
            except Exception:  # noqa: BLE001 - failed: the next poll hands it over
                pass


def _poll(entry):
    try:
        return entry.done()
    except Exception:  # noqa: BLE001 - a failing poll is a completion with an error
        return True


_watcher = _Watcher()


def watch(handles, finish, what, on_error=None):
    """See the module comment; on_error(exception), if given, runs before a failed
    future gets its error."""
    return _watcher.watch(handles, finish, what, on_error)


def complete_here(entry):
    """Note [A waiting caller completes its own operation]: completes entry on this
    thread unless a worker has it; returns once it is complete or handed over."""
    if not _watcher.claim(entry):
        return
    entry.wait_handles()
    _complete(entry)


def completed(value):
    """A future that has completed already with ``value``."""
    future = torch.futures.Future()
    future.set_result(value)
    return future
