"""Errors shown to the user as one line, never as a traceback, and the remedy for each kind of failure.

A host that cannot be assessed becomes a Status with one `unknown` finding: its id names the failure's
kind (`fleet-timeout`, `host-auth`, `collect-cut-off`) and its remedy comes from the tables here, the
only place that words them.
"""


class BsdcryptError(Exception):
    """A user-facing error; str(exc) is the one-line message."""


class HostError(BsdcryptError):
    """The host could not be reached or could not run a command; `kind` is a key of REMEDIES."""

    kind = "error"


class ProbeError(BsdcryptError):
    """The probe output is missing, truncated or not from our probe."""

    kind = "garbage"


class CutOff(ProbeError):
    """The probe's output stops before its last step: the shell or the collecting engine cut it off."""

    kind = "cut-off"


class ActError(BsdcryptError):
    """Acting on a host (enable/disable: reading its loader files, a step of the plan) failed; str() is one line."""


def kind_of(exc: BaseException) -> str:
    """The REMEDIES key of a host failure: the error's own kind, `error` for anything else."""
    kind = getattr(exc, "kind", None) if isinstance(exc, (HostError, ProbeError)) else None
    return kind if isinstance(kind, str) else "error"


# Why a host could not be audited over SSH (or from a recording), as fleet-audit words the remedy.
REMEDIES: dict[str, str] = {
    "resolve": "Check the name: `ssh -G HOST | grep -i hostname`, DNS, or the hosts file entry.",
    "refused": "Is sshd running and listening on that port? (`service sshd status`, `sockstat -4l`)",
    "unreachable": "Check routing and firewalls between here and the host.",
    "timeout": "The host did not answer in time: is it up, filtered, or just slow? Raise --timeout if slow.",
    "no-ssh": (
        "Something other than sshd listens on that port (or sshd hangs): check the port in the hosts file."
    ),
    "closed": "sshd closed the connection: check its log (MaxStartups, tcp wrappers, AllowUsers).",
    "protocol": "The SSH negotiation failed: compare algorithms with `ssh -vv HOST`.",
    "hostkey-unknown": "Verify the key's fingerprint with the host's admin, then rerun with --accept-new.",
    "hostkey-changed": (
        "Find out why the key changed before anything else; if expected: `ssh-keygen -R HOST`."
    ),
    "hostkey-revoked": "The key is revoked in known_hosts: do not trust this host until its key is replaced.",
    "auth": (
        "Install your public key for that user (~/.ssh/authorized_keys) or load the right key into ssh-agent."
    ),
    "no-keys": "Load a key into ssh-agent or set IdentityFile in ~/.ssh/config (passwords are never used).",
    "proxy": "Check ProxyJump/ProxyCommand for this host: `ssh -G HOST`.",
    "unsupported": "The in-process client cannot honour what ssh_config or known_hosts asks: rerun with --ssh openssh.",
    "config": "Fix the ssh client configuration or the hosts file entry.",
    "cut-off": (
        "The probe did not finish: look for a login script or resource limit killing /bin/sh on the host."
    ),
    "garbage": (
        "The host's reply is not the probe's output: a login script printing to stdout, or not a shell."
    ),
    "recording": "Check the replay: path (relative paths are taken from the hosts file's folder).",
    "error": "Rerun `bsdcrypt status --host HOST` for this host alone to see the full error.",
}

# Where a single `status` run words it otherwise (it has no --accept-new).
STATUS_REMEDIES: dict[str, str] = {
    "hostkey-unknown": (
        "Verify the key's fingerprint with the host's admin, then add it to known_hosts "
        "(`ssh HOST` once, or `bsdcrypt fleet-audit --accept-new`)."
    ),
    "error": "Run `bsdcrypt status` by hand to see the error.",
}

# `analyze`: why a file (or one host of an engine's output) gave no evidence.
COLLECT_REMEDIES: dict[str, str] = {
    "unreachable": "The collecting engine could not reach the host: check its connection settings and rerun.",
    "failed": "The probe failed on the host: run the script there by hand (sh probe.sh) and look at the error.",
    "unreadable": "Check the path and its permissions.",
    "garbage": "This is not the probe's output: collect the stdout of `bsdcrypt probe-script` run with /bin/sh.",
    "cut-off": "The probe's output is incomplete: rerun it (a timeout or output limit of the engine cut it).",
    "skipped": "The engine skipped the host: check the play's conditions and limits.",
}


def fleet_remedy(kind: str) -> str:
    return REMEDIES.get(kind, REMEDIES["error"])


def status_remedy(kind: str) -> str | None:
    """The remedy `status` shows for a failure kind, None for a kind no table knows."""
    return STATUS_REMEDIES.get(kind) or REMEDIES.get(kind)


def collect_remedy(kind: str) -> str:
    return COLLECT_REMEDIES.get(kind, COLLECT_REMEDIES["garbage"])
