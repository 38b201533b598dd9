"""What every part of kolorun shares: the one error a caller can fix."""

import re


class UsageError(Exception):
    """A mistake the caller can fix: printed as one line, exit status 2."""


def positive_int(text):
    """The value of a decimal integer > 0, or None."""
    return int(text) if re.fullmatch(r"[0-9]+", text) and int(text) > 0 else None
