"""The exceptions kolo raises, chosen so that a Horovod user's ``except`` clauses work.

Horovod's rule, which kolo follows: what the caller got wrong locally is raised
before anything starts, as a ``ValueError`` (or ``TypeError``); what comes out of a
collective - from other ranks or from the negotiation that every rank takes part in -
is a ``RuntimeError``, ``HorovodInternalError``, which elastic training loops catch
to reset. So the class depends on the status *and* on where it arose:

- INVALID_ARGUMENT returned by the call: :class:`KoloValueError` (a ValueError;
  :class:`KoloTypeError`, also a TypeError, for an argument of the wrong type).
  Completing a handle: :class:`CollectiveRefusedError` (the negotiation refused it on
  every rank, e.g. an allgather while a rank has joined).
- NOT_INITIALIZED returned by the call: :class:`NotInitializedError` (a ValueError,
  as in Horovod). ALREADY_INITIALIZED: :class:`KoloValueError` (kolo.init() swallows
  it). Neither completes a handle (if one did, it would be a :class:`KoloError`).
- DUPLICATE_NAME: :class:`DuplicateNameError`, both a ValueError (Horovod's class
  for it) and a KoloError.
- MISMATCH, SHUTDOWN, TIMEOUT, STALLED, UNSUPPORTED, TRANSPORT, INTERNAL, RANK_FAILED:
  :class:`MismatchError`, :class:`ShutdownError`, :class:`KoloTimeoutError` (also a
  TimeoutError), :class:`StalledError`, :class:`UnsupportedError`,
  :class:`TransportError`, :class:`KoloError`, :class:`RankFailedError`.

Every class from a completing handle is a :class:`KoloError`, which *is*
``HorovodInternalError`` (a ``RuntimeError``). A negotiated error (mismatch,
refusal, stall) is raised on every rank with the same message.
:class:`HostsUpdatedInterrupt` is raised by ``State.check_host_updates()`` (and so
``commit()``) in a job started by ``kolorun --elastic`` when the hosts changed
(kolo.elastic).
"""


class KoloError(RuntimeError):
    """A collective failed. ``status`` is the kolo_status_t name, e.g. "KOLO_ERR_MISMATCH"."""

    def __init__(self, message, status=None):
        super().__init__(message)
        self.status = status


HorovodInternalError = KoloError


class MismatchError(KoloError):
    """Ranks submitted the same name with different dtype, shape, op, root or device."""


class ShutdownError(KoloError):
    """kolo shut down (on this or another rank) before the operation completed."""


class StalledError(KoloError):
    """Some ranks never submitted the tensor and the stall timeout shut kolo down."""


class RankFailedError(KoloError):
    """A peer rank died or went silent; the message names it. kolo is unusable after it."""


class TransportError(KoloError):
    """The transport (MPI, NCCL) reported an error."""


class UnsupportedError(KoloError):
    """Valid, but not supported by this build of kolo (e.g. GPU tensors without NCCL)."""


class KoloTimeoutError(KoloError, TimeoutError):
    """A wait with a timeout expired; the operation is still in flight."""


class CollectiveRefusedError(KoloError):
    """The negotiation refused the collective on every rank, e.g. an allgather,
    broadcast, alltoall or reducescatter while some rank has joined (Horovod raises
    HorovodInternalError there too)."""


class HostsUpdatedInterrupt(RuntimeError):
    """Horovod elastic's signal that the hosts changed: raised on every rank at the
    same step by kolo.elastic's ``State.check_host_updates()`` in a job started by
    ``kolorun --elastic``; ``skip_sync`` is true when hosts were only removed (the
    survivors' states agree, so run() re-forms without syncing)."""

    def __init__(self, skip_sync=False):
        super().__init__("hosts updated")
        self.skip_sync = skip_sync


class KoloValueError(ValueError):
    """A caller-side mistake; nothing was started."""

    def __init__(self, message, status=None):
        super().__init__(message)
        self.status = status


class KoloTypeError(KoloValueError, TypeError):
    """An argument of the wrong type (e.g. a list where a tensor is expected); both a
    TypeError and, as kolo raised it before, a ValueError."""


class NotInitializedError(KoloValueError):
    """Called before kolo.init() or after kolo.shutdown() (Horovod raises ValueError too)."""


class DuplicateNameError(KoloError, ValueError):
    """A tensor of the same name is already in flight on this rank."""


class LibraryNotFoundError(ImportError):
    """libkolo could not be loaded; the message lists every path tried."""
