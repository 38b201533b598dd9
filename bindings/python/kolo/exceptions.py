"""The exceptions kolo raises, chosen so that a Horovod user's ``except`` clauses work.

- A caller's mistake (bad dtype, non-contiguous array, bad root, ...) is a
  ``ValueError`` (:class:`KoloValueError`); nothing was started.
- What goes wrong in a collective (ranks disagree on a tensor, shutdown, transport
  failure) is a ``RuntimeError``: :class:`KoloError`, also exported as
  ``HorovodInternalError``. A mismatch is raised on every rank.
- A tensor name already in flight on this rank is both (:class:`DuplicateNameError`):
  Horovod raised it as a ValueError before the operation started, and a
  RuntimeError-catching training loop sees it too.
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


class KoloValueError(ValueError):
    """A caller-side mistake; nothing was started."""

    def __init__(self, message, status=None):
        super().__init__(message)
        self.status = status


class NotInitializedError(KoloValueError):
    """Called before kolo.init() or after kolo.shutdown() (Horovod raises ValueError too)."""


class DuplicateNameError(KoloError, ValueError):
    """A tensor of the same name is already in flight on this rank."""


class LibraryNotFoundError(ImportError):
    """libkolo could not be loaded; the message lists every path tried."""
