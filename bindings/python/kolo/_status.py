"""Status to exception: the one place that turns a kolo_status_t into a Python error.

Every module that calls libkolo (``_core``, ``_process_sets``, the front ends) raises
through :func:`check` or :func:`error`; the classes and the rule that picks them
(where the error arose: returned by a call that started nothing, or the outcome of
a collective) are described in :mod:`kolo.exceptions`. This module sits directly
above ``_lib`` and imports nothing else of kolo, so any module may use it.
"""

from . import _lib
from .exceptions import (CollectiveRefusedError, DuplicateNameError, KoloError, KoloTimeoutError,
                         KoloValueError, MismatchError, NotInitializedError, RankFailedError,
                         ShutdownError, StalledError, TransportError, UnsupportedError)

# The class of an error returned by a call (nothing started): see kolo.exceptions.
_EXCEPTIONS = {
    _lib.ERR_INVALID_ARGUMENT: KoloValueError,
    _lib.ERR_NOT_INITIALIZED: NotInitializedError,
    _lib.ERR_ALREADY_INITIALIZED: KoloValueError,
    _lib.ERR_DUPLICATE_NAME: DuplicateNameError,
    _lib.ERR_MISMATCH: MismatchError,
    _lib.ERR_SHUTDOWN: ShutdownError,
    _lib.ERR_TIMEOUT: KoloTimeoutError,
    _lib.ERR_STALLED: StalledError,
    _lib.ERR_UNSUPPORTED: UnsupportedError,
    _lib.ERR_TRANSPORT: TransportError,
    _lib.ERR_INTERNAL: KoloError,
    _lib.ERR_RANK_FAILED: RankFailedError,
}

# The class of an error that completes a handle (or a join or barrier): it came out
# of the collective, so it is a HorovodInternalError (KoloError) whatever the status.
_COMPLETION_EXCEPTIONS = dict(_EXCEPTIONS)
_COMPLETION_EXCEPTIONS.update({
    _lib.ERR_INVALID_ARGUMENT: CollectiveRefusedError,
    _lib.ERR_NOT_INITIALIZED: KoloError,
    _lib.ERR_ALREADY_INITIALIZED: KoloError,
})


def status_name(status):
    """The kolo_status_t's name, e.g. "KOLO_ERR_MISMATCH"."""
    return _lib.load().kolo_status_string(status).decode()


def error(status, message, what=None, completed=False):
    """The exception for a kolo status (never called with KOLO_OK): returned by a
    call that started nothing, or (completed=True) the outcome of a collective."""
    cls = (_COMPLETION_EXCEPTIONS if completed else _EXCEPTIONS).get(status, KoloError)
    text = "%s: %s" % (status_name(status), message or "(no message)")
    if what:
        text = "%s: %s" % (what, text)
    return cls(text, status_name(status))


def check(status, what=None, completed=False):
    """Raises the exception for a non-OK status returned by a kolo call (completed:
    the call ran a collective, as kolo_join and kolo_barrier do)."""
    if status != _lib.OK:
        raise error(status, _lib.load().kolo_last_error().decode(errors="replace"), what,
                    completed)
