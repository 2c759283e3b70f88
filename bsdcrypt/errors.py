"""Errors shown to the user as one line, never as a traceback."""


class BsdcryptError(Exception):
    """A user-facing error; str(exc) is the one-line message."""


class HostError(BsdcryptError):
    """The host could not be reached or could not run a command."""


class ProbeError(BsdcryptError):
    """The probe output is missing, truncated or not from our probe."""
