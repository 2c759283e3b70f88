"""fleet-audit: the `status` pipeline on every host of a hosts file, concurrently and bounded.

Each host goes through exactly what `bsdcrypt status --host ...` does (`pipeline.status_of`):
one connection, one exec of the batched probe, the same parsers and assessment. A host that
cannot be audited becomes a Status with one `unknown` finding naming the reason, never a crash.

Time is bounded: every host has a deadline (`timeout`, covering connect, authentication and
the probe). SSHHost honours it in each wait; a watchdog aborts a host that overruns it and,
should a worker still be stuck (e.g. inside the system resolver), gives the host up as timed
out after a short grace and starts a fresh worker. So the wall time is at most about
ceil(hosts / parallel) * (timeout + grace). That includes the ssh config lookup of each host
(a `Match exec` command may be slow or hang): with a `Match exec` in the config it is done by the
host's worker, under its deadline; without one every lookup is microseconds of CPU and is done before
the run, so duplicates are set aside there (`run_fleet(dedupe=True)`).

Ctrl-C and SIGTERM (the CLI turns it into `FleetInterrupted`) abort every host in flight, let the
workers close them, and kill the process group of every ProxyCommand still running.

paramiko is imported only if the fleet has SSH entries (replay-only fleets never load it).
"""

from __future__ import annotations

import os
import queue
import resource
import sys
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bsdcrypt.errors import BsdcryptError, CutOff, HostError, ProbeError, kind_of
from bsdcrypt.fleet.progress import Progress
from bsdcrypt.fleet.results import FleetInterrupted, FleetRun, HostResult, failed_status
from bsdcrypt.hostapi import Host, RunResult
from bsdcrypt.hosts import verbose
from bsdcrypt.hosts.open import open_host, replay_file
from bsdcrypt.hostsfile import Duplicate, HostEntry
from bsdcrypt.interrupts import signals_ignored, signame_of
from bsdcrypt.probe import MAX_OUTPUT as PROBE_MAX_OUTPUT
from bsdcrypt.probe import PROBE_MAGIC
from bsdcrypt.status import Status

DEFAULT_PARALLEL = 32
DEFAULT_TIMEOUT = 30.0
GRACE = 2.0  # after the deadline, how long an aborted worker may take to give up
FDS_PER_HOST = 4  # socket, agent socket, and a ProxyCommand's pipes
FD_RESERVE = 64




class _ProbeGuard:
    """Wraps a Host for the fleet: the probe script ends with `exit 0`, so any other exit status
    (or none, when the channel closed on a signal or a dropped connection) means the output was cut off."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self.name = host.name
        self.spec = host.spec

    @property
    def kind(self) -> str:
        return self.host.kind

    @property
    def can_exec(self) -> bool:
        return self.host.can_exec

    def run(self, command: str, *, input: bytes | None = None, timeout: float | None = None) -> RunResult:
        result = self.host.run(command, input=input, timeout=timeout)
        if PROBE_MAGIC in command and result.rc != 0:
            how = "without an exit status" if result.rc < 0 else f"with status {result.rc}"
            size = len(result.stdout)
            raise CutOff(f"the probe was cut off: the remote shell ended {how} after {size} bytes")
        return result

    def abort(self) -> None:
        self.host.abort()

    def close(self) -> None:
        self.host.close()


class _Duplicate(Exception):
    """Raised in a worker once a host's ssh config is known: an earlier-resolved line makes the same
    connection. `first` is that line's index in the run."""

    def __init__(self, first: int) -> None:
        super().__init__(first)
        self.first = first


# ---------------------------------------------------------------------------- assessment seam


def _status_of(host: Host, timeout: float) -> Status:
    """The one place the fleet calls the status pipeline (the same call `bsdcrypt status` makes)."""
    from bsdcrypt.pipeline import status_of

    return status_of(host, timeout=timeout)


# ---------------------------------------------------------------------------- one host


@dataclass
class FleetOptions:
    parallel: int = DEFAULT_PARALLEL
    timeout: float = DEFAULT_TIMEOUT
    ssh_config: str | None = None
    accept_new: bool = False
    client: str = "paramiko"  # --ssh: paramiko's public API, or the system ssh client ("openssh")


class Auditor:
    """Turns one HostEntry into a HostResult; shares one SSH context per run."""

    def __init__(self, options: FleetOptions) -> None:
        self.options = options
        self._ctx: Any = None
        self._ctx_lock = threading.Lock()

    def ssh_context(self) -> Any:
        with self._ctx_lock:
            if self._ctx is None:
                if self.options.client == "openssh":
                    from bsdcrypt.ssh.openssh import OpenSSHContext

                    self._ctx = OpenSSHContext(self.options.ssh_config, accept_new=self.options.accept_new)
                else:
                    from bsdcrypt.ssh import SSHContext

                    self._ctx = SSHContext(self.options.ssh_config, accept_new=self.options.accept_new)
            return self._ctx

    def prepare(self, entries: Sequence[HostEntry], strict: bool = False) -> None:
        """Before any host's deadline starts: import what the hosts need (paramiko alone takes ~0.5 s on
        a loaded machine) and build the SSH context (config parsed, Includes read) once. `strict`
        raises a bad ssh config (the CLI: one error line); otherwise each SSH host's row reports it."""
        import bsdcrypt.pipeline  # noqa: F401 - every host goes through it

        if any(e.is_replay for e in entries):
            import bsdcrypt.recording  # noqa: F401
        if any(not e.is_replay for e in entries):
            try:
                self.ssh_context()
            except BsdcryptError:
                if strict:
                    raise

    def quick_identity(self, entry: HostEntry) -> Hashable:
        """What makes two hosts-file lines the same host before anything is looked up (no ssh config:
        a `Match exec` may take long, see `host_identity`): a replay entry is its recording's resolved
        file (`replay:a.yaml` and `replay:../x/a.yaml` may be one file), an SSH line its text (user,
        host name without case, port)."""
        if entry.replay is not None:
            try:
                return ("replay", os.path.realpath(replay_path(entry)))
            except (BsdcryptError, OSError):
                return entry.key
        return entry.key

    def eager_identity(self, entry: HostEntry) -> Hashable | None:
        """An SSH line's identity before the run: never (each line's ssh config is looked up by its
        worker, under the host's deadline: `ssh -G` is a process, and a `Match exec` may be slow)."""
        return None

    def host_identity(self, entry: HostEntry, host: Host) -> Hashable | None:
        """An SSH host's identity, looked up by its worker (paramiko path: `ssh -G`, abortable): everything
        the ssh config makes of the line (host name, port, user, proxy, keys, known_hosts...), so `fw1` and
        `fw1:22` are one host unless the config gives `fw1` another Port; on the openssh path the line as
        written (ssh resolves the rest). None for anything else (replays were compared by quick_identity)."""
        if entry.replay is not None:
            return None
        inner = getattr(host, "host", host)  # under -v, the VerboseHost's host
        resolve = getattr(inner, "resolve", None)
        if resolve is not None:
            return ("ssh", *resolve().identity())
        identity = getattr(inner, "identity", None)
        return identity() if identity is not None else None

    def make_host(self, entry: HostEntry) -> Host:
        if entry.replay is not None:
            # as `status --host` does: the source is what the line says (`replay:NAME`, or the path as written),
            # never where a shipped recording happens to be installed (labels must not change when the venv moves)
            return open_host(entry.ssh_spec, base_dir=entry.base_dir or "")
        return open_host(
            entry.ssh_spec,
            ssh=self.ssh_context(),
            timeout=self.options.timeout,
            max_output=PROBE_MAX_OUTPUT,  # hosts answering garbage must not hold 32 MiB each
            client=self.options.client,
        )

    def audit(self, entry: HostEntry, on_host: Callable[[Host], None] | None = None) -> HostResult:
        start = time.monotonic()
        kind = "error"
        try:
            host = self.make_host(entry)
            if on_host is not None:
                on_host(host)
            status = _status_of(_ProbeGuard(verbose.wrap(host)), self.options.timeout)
            return HostResult(entry, status, time.monotonic() - start)
        except _Duplicate:
            raise
        except (HostError, ProbeError) as exc:  # cut-off, garbage, or the SSH failure's kind
            kind, reason = kind_of(exc), str(exc)
        except BsdcryptError as exc:
            kind = "recording" if entry.replay is not None else "config"
            reason = str(exc)
        except Exception as exc:  # a bug must cost one row, not the run
            reason = f"internal error: {type(exc).__name__}: {exc}"
        return HostResult(entry, failed_status(entry, kind, reason), time.monotonic() - start, reason, kind)


def replay_path(entry: HostEntry) -> Path:
    """The recording of a replay: entry: relative to the hosts file's folder, else as given, else shipped."""
    assert entry.replay is not None
    return replay_file(entry.replay, entry.base_dir or None)


# ---------------------------------------------------------------------------- the run


def fd_limit_parallel(wanted: int) -> int:
    """Cap concurrency by RLIMIT_NOFILE, raising the soft limit toward the hard one if needed."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = FD_RESERVE + wanted * FDS_PER_HOST
    if soft != resource.RLIM_INFINITY and need > soft:
        new_soft = need if hard == resource.RLIM_INFINITY else min(need, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (new_soft, hard))
            soft = new_soft
        except (ValueError, OSError):
            pass
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(1, min(wanted, (soft - FD_RESERVE) // FDS_PER_HOST))


@dataclass
class _Running:
    started: float
    deadline: float
    thread: int  # the worker's thread id (its Match exec commands are killed by it)
    host: Any = None
    aborted: bool = False


def timed_out(entry: HostEntry, timeout: float, elapsed: float, why: str) -> HostResult:
    reason = f"timed out after {timeout:g}s ({why})"
    return HostResult(entry, failed_status(entry, "timeout", reason), elapsed, reason, "timeout")


def _duplicate_notes(entries: Sequence[HostEntry], dup_of: dict[int, int]) -> list[str]:
    """One note per audited line that had duplicates, in line order; `dup_of` maps a duplicate's index
    to the index of the line it is a duplicate of (which may be a duplicate itself)."""
    groups: dict[int, Duplicate] = {}
    for i in sorted(dup_of):
        root = dup_of[i]
        while root in dup_of:
            root = dup_of[root]
        first = entries[root]
        dup = groups.setdefault(root, Duplicate(first.spec, first.source))
        dup.others.append(entries[i].source)
        dup.other_specs.append(entries[i].spec)
    return [str(groups[root]) for root in sorted(groups)]


def run_fleet(
    entries: Sequence[HostEntry],
    options: FleetOptions,
    progress: Progress | None = None,
    auditor: Auditor | None = None,
    dedupe: bool = False,
) -> FleetRun:
    """Audit every entry; returns one result per entry, in input order.

    With `dedupe`, a host listed twice is audited once and `FleetRun.duplicates` says so. The lowest
    line of a group is always the one audited and named first. Lines equal as written and replays of
    one file are set aside before the run, and so are lines the ssh config makes one connection when
    the config has no `Match exec` (lookups are then cheap). With a `Match exec`, lookups run in the
    workers under each host's deadline: a line whose lookup finds an earlier line of the same identity
    under way is dropped at once; one that finds only a later line goes on, both are audited, and the
    later row is dropped after the run (doubled work only then). If the lowest line's lookup failed
    or hung, it is no member of the group, and the next lowest line is kept. Duplicates have no row.
    """
    started = time.monotonic()
    auditor = auditor or Auditor(options)
    auditor.prepare(entries)  # before the first deadline starts (the CLI has done it already)
    dup_of: dict[int, int] = {}  # index of a duplicate -> index of the line it duplicates
    order = list(range(len(entries)))
    claims: dict[Hashable, list[int]] = {}  # ssh identity -> the lines audited for it (lowest first)
    if dedupe:
        seen: dict[Hashable, int] = {}
        for i, entry in enumerate(entries):
            ident = auditor.eager_identity(entry)
            if ident is not None:
                claims.setdefault(ident, [i])  # the workers find it claimed already (its duplicates never start)
            else:
                ident = auditor.quick_identity(entry)
            first = seen.setdefault(ident, i)
            if first != i:
                dup_of[i] = first
        order = [i for i in order if i not in dup_of]
    total = len(order)
    if progress is not None:
        progress.total = total
    parallel = fd_limit_parallel(max(1, min(options.parallel, total or 1)))
    results: dict[int, HostResult] = {}
    running: dict[int, _Running] = {}
    lock = threading.Lock()
    stopping = threading.Event()
    next_index = iter(order)
    done_q: queue.SimpleQueue[tuple[int, HostResult | _Duplicate]] = queue.SimpleQueue()
    threads: list[threading.Thread] = []

    def worker() -> None:
        while True:
            with lock:
                i = None if stopping.is_set() else next(next_index, None)
                if i is None:
                    return
                now = time.monotonic()
                slot = _Running(now, now + options.timeout, threading.get_ident())
                running[i] = slot

            def on_host(host: Host, slot: _Running = slot, i: int = i) -> None:
                slot.host = host
                if dedupe:  # the config is known now: the same connection as a line already under way?
                    ident = auditor.host_identity(entries[i], host)
                    if ident is not None:
                        # An earlier line already under way for it: this one is its duplicate. A later
                        # one (its lookup finished first; only with Match exec) does not stop this line:
                        # both are audited and the later row is dropped after the run.
                        with lock:
                            lines = claims.setdefault(ident, [])
                            first = lines[0] if lines and lines[0] < i else None
                            if first is None and i not in lines:
                                lines.insert(0, i)
                        if first is not None:
                            host.close()
                            raise _Duplicate(first)
                if slot.aborted:
                    host.abort()

            try:
                res: HostResult | _Duplicate = auditor.audit(entries[i], on_host)
            except _Duplicate as dup:
                res = dup
            if slot.aborted and slot.host is None and isinstance(res, HostResult) and res.error is not None:
                res = timed_out(entries[i], options.timeout, res.elapsed,
                                 "looking up its ssh config (a slow Match exec?)")
            with lock:
                # The host is judged when its worker is done, not when the main loop gets to its result:
                # a finished host leaves `running` here, so a backlog of results can never time it out.
                finished = running.get(i) is slot
                if finished:
                    del running[i]
            if finished:
                done_q.put((i, res))
            # else it was given up (its row says timeout); this late result is dropped

    def spawn() -> None:
        t = threading.Thread(target=worker, name="fleet-worker", daemon=True)
        threads.append(t)
        t.start()

    done = failed = given_up = 0
    try:
        for _ in range(min(parallel, total)):  # the only workers of the run: never more than `parallel`
            spawn()
        while done < total:
            batch: list[tuple[int, HostResult | _Duplicate]] = []
            try:
                batch.append(done_q.get(timeout=0.1))
                while True:  # take the whole backlog at once
                    batch.append(done_q.get_nowait())
            except queue.Empty:
                pass
            for i, res in batch:
                if isinstance(res, _Duplicate):
                    dup_of[i] = res.first
                else:
                    results[i] = res
                    failed += res.error is not None
                done += 1
            if batch and progress:
                progress.update(done, failed)
            now = time.monotonic()
            with lock:
                overdue = [(j, s) for j, s in running.items() if now >= s.deadline]
            for j, slot in overdue:
                if not slot.aborted:
                    slot.aborted = True
                    if slot.host is not None and hasattr(slot.host, "abort"):
                        slot.host.abort()  # its socket, ProxyCommand, ssh or `ssh -G` process
                elif now >= slot.deadline + GRACE:
                    with lock:  # unless its worker finished meanwhile (its result is then in the queue)
                        gone = running.get(j) is slot
                        if gone:
                            del running[j]
                    if not gone:
                        continue
                    # The worker is stuck beyond the abort (e.g. in getaddrinfo, which cannot be
                    # interrupted): the host is given up. No worker is added: the stuck one takes the
                    # next host when it comes back, and its late result is dropped.
                    results[j] = timed_out(entries[j], options.timeout, now - slot.started,
                                            "the host did not give up when aborted")
                    done += 1
                    failed += 1
                    given_up += 1
                    if progress:
                        progress.update(done, failed)
            if progress:
                progress.tick()
    except BaseException as exc:
        with signals_ignored():  # a second Ctrl-C/SIGTERM must not cut this bounded cleanup short
            in_flight = _stop(stopping, lock, running, threads)
            if progress:
                progress.finish()
        if isinstance(exc, KeyboardInterrupt):
            interrupted = exc if isinstance(exc, FleetInterrupted) else FleetInterrupted(signame_of(exc))
            interrupted.counted, interrupted.done, interrupted.in_flight = True, done, in_flight
            interrupted.not_started = max(0, total - done - in_flight)
            if interrupted is exc:
                raise
            raise interrupted from None
        raise
    if given_up:  # their workers are stuck: what they started must not outlive the run
        _sweep()
    if progress:
        progress.finish()
    # Lines of one identity that were all audited (a later line's lookup finished before the earlier
    # one's): the lowest line with a row is kept, whatever the order the lookups finished in.
    for lines in claims.values():
        kept = [i for i in sorted(set(lines)) if i in results]
        for i in kept[1:]:
            del results[i]
            dup_of[i] = kept[0]
    for i, first in list(dup_of.items()):  # a duplicate of a line whose row was dropped: of the kept one
        while first in dup_of and first not in results:
            first = dup_of[first]
        dup_of[i] = first
    final = [results[i] for i in sorted(results)]
    run = FleetRun(final, time.monotonic() - started, parallel, options.timeout, workers=len(threads))
    run.duplicates = _duplicate_notes(entries, dup_of)
    return run


def _stop(
    stopping: threading.Event, lock: threading.Lock, running: dict[int, _Running], threads: list[threading.Thread]
) -> int:
    """An interrupted run: no new host starts, every host in flight is aborted (its ProxyCommand's process
    group killed), the workers get GRACE seconds to close them, then any ProxyCommand still alive is
    killed. Returns how many hosts were in flight."""
    stopping.set()
    held = lock.acquire(timeout=1.0)  # not forever: the interrupt may have hit the main thread holding it
    try:
        slots = list(running.values())
    finally:
        if held:
            lock.release()
    for slot in slots:
        slot.aborted = True  # a worker that has not made its host yet aborts it in on_host
        if slot.host is not None and hasattr(slot.host, "abort"):
            try:
                slot.host.abort()
            except Exception:
                pass
    end = time.monotonic() + GRACE
    for t in threads:
        t.join(max(0.0, end - time.monotonic()))
    _sweep()
    return len(slots)


def _sweep() -> None:
    """Kill what hosts that were given up or interrupted may have left running: ProxyCommands (their
    process groups)."""
    sockets = sys.modules.get("bsdcrypt.ssh.sockets")  # loaded only if a host used SSH
    if sockets is not None:
        sockets.kill_all()


def default_parallel() -> int:
    """Handshakes are mostly waiting on the network; 32 keeps a 2-core client busy without thrashing."""
    return max(8, min(DEFAULT_PARALLEL, 16 * (os.cpu_count() or 2)))
