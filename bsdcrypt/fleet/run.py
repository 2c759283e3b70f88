"""fleet-audit: the `status` pipeline on every host of a hosts file, concurrently and bounded.

Each host goes through exactly what `bsdcrypt status --host ...` does (`pipeline.status_of`): one
connection, one exec of the batched probe, the same parsers and assessment. A worker gets the probe's
output (`pipeline.probe_host`); the run's own thread parses and assesses it (`pipeline.status_from`), a
few hosts in a row. A host that cannot be audited becomes a Status with one `unknown` finding naming
the reason, never a crash.

Time is bounded: every host, SSH or replay, has a deadline (`timeout`) from the moment a worker of the
pool (concurrent.futures) takes it, covering its ssh config lookup (`ssh -G`), connect, authentication and
the probe, or the reading of its recording. The SSH hosts honour it in each wait; the watchdog (the
caller's thread) aborts a host that overruns it and, should a worker still be stuck (inside the system
resolver, or reading a hostile recording), gives the host up as timed out after a short grace. So the
wall time is at most about ceil(hosts / parallel) * (timeout + grace).

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
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bsdcrypt.errors import BsdcryptError, CutOff, HostError, ProbeError, kind_of
from bsdcrypt.fleet.dupes import Duplicates
from bsdcrypt.fleet.progress import Progress
from bsdcrypt.fleet.results import FleetInterrupted, FleetRun, HostResult, failed_status
from bsdcrypt.hostapi import Host, RunResult
from bsdcrypt.hosts import verbose
from bsdcrypt.hosts.open import open_host, replay_file
from bsdcrypt.hostsfile import HostEntry
from bsdcrypt.interrupts import signals_ignored, signame_of
from bsdcrypt.probe import MAX_OUTPUT as PROBE_MAX_OUTPUT
from bsdcrypt.probe import PROBE_MAGIC
from bsdcrypt.status import Status

DEFAULT_PARALLEL = 32
DEFAULT_TIMEOUT = 30.0
GRACE = 2.0  # after the deadline, how long an aborted worker may take to give up
FDS_PER_HOST = 4  # socket, agent socket, and a ProxyCommand's pipes
FD_RESERVE = 64
WATCH_TICK = 0.1  # seconds between two looks of the watchdog at the hosts in flight while progress is shown
# The run's own thread assesses the hosts whose output is in, 16 (or 4 MiB of output) in a row, or fewer
# when a look brought no result or the last host is in: one host at a time, between other threads' SSH
# work, cost the openssh path about 0.2 ms a host more (the interpreter's caches stay warm in a row;
# docs/performance.md, "Thirteenth session: the fleet assesses in its own thread").
ASSESS_BATCH = 16
ASSESS_BATCH_BYTES = 4 << 20
# ...but for at most a quarter of a second at a time (a host may send 1 MiB files that take seconds to
# parse): the watchdog and the progress line look in between.
ASSESS_BUDGET = 0.25




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


def _probe(host: Host, timeout: float) -> tuple[bytes, str]:
    """The status pipeline's first half, in a worker: the probe's output (pipeline.status_of, which
    `bsdcrypt status` calls, is the two halves in a row)."""
    from bsdcrypt.pipeline import probe_host

    try:
        return probe_host(host, timeout=timeout)
    finally:
        host.close()


def _assess(output: bytes, token: str, name: str, spec: str) -> Status:
    """Its second half, in the run's own thread: framing, parsing, assessment."""
    from bsdcrypt.pipeline import status_from

    return status_from(output, token, name, spec)


@dataclass
class Probed:
    """A host whose probe output is in, waiting for its assessment."""

    entry: HostEntry
    name: str
    spec: str
    output: bytes
    token: str
    elapsed: float


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
            entry.ssh,  # parsed once, when the hosts file was read
            ssh=self.ssh_context(),
            timeout=self.options.timeout,
            max_output=PROBE_MAX_OUTPUT,  # hosts answering garbage must not hold 32 MiB each
            client=self.options.client,
        )

    def audit(self, entry: HostEntry, on_host: Callable[[Host], None] | None = None) -> HostResult:
        """One host, start to end, in the caller's thread."""
        probed = self.probe(entry, on_host)
        return probed if isinstance(probed, HostResult) else self.assess(probed)

    def probe(self, entry: HostEntry, on_host: Callable[[Host], None] | None = None) -> HostResult | Probed:
        """The host's probe output, or its row if it could not be had."""
        start = time.monotonic()
        try:
            host = self.make_host(entry)
            if on_host is not None:
                on_host(host)
            output, token = _probe(_ProbeGuard(verbose.wrap(host)), self.options.timeout)
            return Probed(entry, host.name, host.spec, output, token, time.monotonic() - start)
        except _Duplicate:
            raise
        except Exception as exc:
            return _failed(entry, exc, time.monotonic() - start)

    def assess(self, probed: Probed) -> HostResult:
        """The row of a host whose output is in."""
        start = time.monotonic()
        try:
            status = _assess(probed.output, probed.token, probed.name, probed.spec)
            return HostResult(probed.entry, status, probed.elapsed + time.monotonic() - start)
        except Exception as exc:
            return _failed(probed.entry, exc, probed.elapsed + time.monotonic() - start)


def _failed(entry: HostEntry, exc: Exception, elapsed: float) -> HostResult:
    """The row of a host that could not be audited."""
    kind = "error"
    if isinstance(exc, (HostError, ProbeError)):  # cut-off, garbage, or the SSH failure's kind
        kind, reason = kind_of(exc), str(exc)
    elif isinstance(exc, BsdcryptError):
        kind = "recording" if entry.replay is not None else "config"
        reason = str(exc)
    else:  # a bug must cost one row, not the run
        reason = f"internal error: {type(exc).__name__}: {exc}"
    return HostResult(entry, failed_status(entry, kind, reason), elapsed, reason, kind)


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
    host: Any = None
    aborted: bool = False


def timed_out(entry: HostEntry, timeout: float, elapsed: float, why: str) -> HostResult:
    reason = f"timed out after {timeout:g}s ({why})"
    return HostResult(entry, failed_status(entry, "timeout", reason), elapsed, reason, "timeout")


class _Run:
    """One run: a thread pool of `parallel` workers (concurrent.futures) and, in the caller's thread, the
    deadline watchdog. A host's deadline starts when a worker takes it; the watchdog aborts a host past it
    and, after GRACE, gives it up as timed out (its worker, stuck in something abort cannot reach, such as
    the resolver or a replay being read, is not replaced: it takes the next host when it comes back)."""

    def __init__(self, entries: Sequence[HostEntry], options: FleetOptions, auditor: Auditor,
                 dupes: Duplicates | None, progress: Progress | None) -> None:
        self.entries, self.options, self.auditor, self.dupes, self.progress = entries, options, auditor, dupes, progress
        self.running: dict[int, _Running] = {}
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.threads: set[int] = set()
        self.results: dict[int, HostResult] = {}
        self.waiting: deque[tuple[int, Probed]] = deque()  # probed, not yet assessed
        self.waiting_bytes = 0
        self.done = self.failed = self.given_up = 0

    def task(self, i: int) -> HostResult | Probed | _Duplicate | None:
        """One host, in a worker; None when it was given up meanwhile (its row says timeout) or the run stops."""
        with self.lock:
            if self.stopping.is_set():
                return None
            self.threads.add(threading.get_ident())
            now = time.monotonic()
            slot = _Running(now, now + self.options.timeout)
            self.running[i] = slot

        def on_host(host: Host) -> None:
            slot.host = host
            if slot.aborted:
                host.abort()
            if self.dupes is not None:  # the config is known now: the same connection as a line under way?
                ident = self.auditor.host_identity(self.entries[i], host)
                first = self.dupes.claim(ident, i) if ident is not None else None
                if first is not None:
                    host.close()
                    raise _Duplicate(first)

        try:
            res: HostResult | Probed | _Duplicate = self.auditor.probe(self.entries[i], on_host)
        except _Duplicate as dup:
            res = dup
        with self.lock:  # judged when its worker is done: a backlog of results can never time it out
            finished = self.running.get(i) is slot
            if finished:
                del self.running[i]
        return res if finished else None

    def take(self, i: int, res: HostResult | Probed | _Duplicate | None) -> None:
        if res is None:
            return
        if isinstance(res, Probed):  # done with its host (an interrupt counts it so), assessed soon
            self.waiting.append((i, res))
            self.waiting_bytes += len(res.output)
        elif isinstance(res, _Duplicate):
            assert self.dupes is not None
            self.dupes.dropped(i, res.first)
        else:
            self.results[i] = res
            self.failed += res.error is not None
        self.done += 1

    def batch_full(self) -> bool:
        return len(self.waiting) >= ASSESS_BATCH or self.waiting_bytes >= ASSESS_BATCH_BYTES

    def assess_waiting(self, budget: float) -> None:
        """Assess the hosts whose output is in, in the order they came, until `budget` seconds are spent
        (the rest wait for the next look: the watchdog and the progress line are not held up)."""
        end = time.monotonic() + budget
        while self.waiting:
            i, probed = self.waiting.popleft()
            self.waiting_bytes -= len(probed.output)
            res = self.results[i] = self.auditor.assess(probed)
            self.failed += res.error is not None
            if time.monotonic() >= end:
                break

    def watch(self, given: set[int]) -> None:
        """Abort hosts past their deadline; give up those past the grace too (their index into `given`)."""
        now = time.monotonic()
        with self.lock:
            overdue = [(j, s) for j, s in self.running.items() if now >= s.deadline]
        for j, slot in overdue:
            if not slot.aborted:
                slot.aborted = True
                if slot.host is not None:
                    slot.host.abort()  # its socket, ProxyCommand, ssh or `ssh -G` process
            elif now >= slot.deadline + GRACE:
                with self.lock:  # unless its worker finished meanwhile (its result is then in its future)
                    gone = self.running.get(j) is slot
                    if gone:
                        del self.running[j]
                if not gone:
                    continue
                why = "the host did not give up when aborted" if slot.host is not None else \
                    "it was still being opened (a replay being read, or a name being resolved)"
                self.results[j] = timed_out(self.entries[j], self.options.timeout, now - slot.started, why)
                given.add(j)
                self.done += 1
                self.failed += 1
                self.given_up += 1

    def next_look(self, live: bool) -> float:
        """How long the watchdog may wait for a result: WATCH_TICK while a progress line is live, else until
        the first host in flight is due (its deadline; once aborted, the end of its grace), at most a
        second, and never past the deadline of a host a worker starts meanwhile (at least `timeout` away)."""
        if live:
            return WATCH_TICK
        now = time.monotonic()
        with self.lock:
            dues = [s.deadline + (GRACE if s.aborted else 0.0) for s in self.running.values()]
        return max(0.01, min([1.0, self.options.timeout, *(due - now for due in dues)]))

    def stop(self) -> int:
        """An interrupted run: no new host starts, every host in flight is aborted; returns how many."""
        self.stopping.set()
        held = self.lock.acquire(timeout=1.0)  # not forever: the interrupt may have hit us holding it
        try:
            slots = list(self.running.values())
        finally:
            if held:
                self.lock.release()
        for slot in slots:
            slot.aborted = True  # a worker that has not made its host yet aborts it in on_host
            if slot.host is not None:
                try:
                    slot.host.abort()
                except Exception:
                    pass
        return len(slots)


def run_fleet(
    entries: Sequence[HostEntry],
    options: FleetOptions,
    progress: Progress | None = None,
    auditor: Auditor | None = None,
    dedupe: bool = False,
) -> FleetRun:
    """Audit every entry; returns one result per entry, in input order.

    With `dedupe`, a host listed twice is audited once and `FleetRun.duplicates` says so (fleet/dupes.py):
    lines equal as written and replays of one file are set aside before the run; lines the ssh config
    makes one connection are found in the workers, each under its host's deadline. Duplicates have no row.
    """
    started = time.monotonic()
    auditor = auditor or Auditor(options)
    auditor.prepare(entries)  # before the first deadline starts (the CLI has done it already)
    dupes = Duplicates() if dedupe else None
    order = dupes.set_aside([auditor.quick_identity(e) for e in entries]) if dupes else list(range(len(entries)))
    total = len(order)
    if progress is not None:
        progress.total = total
    parallel = fd_limit_parallel(max(1, min(options.parallel, total or 1)))
    run = _Run(entries, options, auditor, dupes, progress)
    pool = ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="fleet-worker")
    # Finished futures arrive on a queue: one wake-up per result or per tick of the watchdog, whatever the
    # number of hosts (wait() on every pending future would take each one's lock at every wake-up).
    finished: queue.SimpleQueue[Future[HostResult | Probed | _Duplicate | None]] = queue.SimpleQueue()
    index: dict[Future[HostResult | Probed | _Duplicate | None], int] = {}
    for i in order:
        future = pool.submit(run.task, i)
        index[future] = i
        future.add_done_callback(finished.put)
    pending = set(index)
    given: set[int] = set()
    try:
        while pending or run.waiting:
            # once every host is in, no result can come: the look only waits while some may
            look = run.next_look(progress is not None and progress.enabled) if pending else 0.0
            ready = _drain(finished, look)
            before = (run.done, run.failed)
            for future in ready:
                if future in pending:  # not given up meanwhile
                    pending.discard(future)
                    run.take(index[future], future.result())
            if run.waiting and (run.batch_full() or not ready or not pending):  # or a quiet moment
                run.assess_waiting(ASSESS_BUDGET)
            run.watch(given)
            if given:  # the hosts given up since the last look: their futures are no longer waited for
                pending = {f for f in pending if index[f] not in given}
                given.clear()
            if progress:
                if (run.done, run.failed) != before:
                    progress.update(run.done, run.failed)
                progress.tick()
    except BaseException as exc:
        with signals_ignored():  # a second Ctrl-C/SIGTERM must not cut this bounded cleanup short
            in_flight = run.stop()
            pool.shutdown(wait=False, cancel_futures=True)
            wait(pending, timeout=GRACE)
            _sweep()
            if progress:
                progress.finish()
        if isinstance(exc, KeyboardInterrupt):
            interrupted = exc if isinstance(exc, FleetInterrupted) else FleetInterrupted(signame_of(exc))
            interrupted.counted, interrupted.done, interrupted.in_flight = True, run.done, in_flight
            interrupted.not_started = max(0, total - run.done - in_flight)
            if interrupted is exc:
                raise
            raise interrupted from None
        raise
    pool.shutdown(wait=not run.given_up)  # a stuck worker is left behind, not waited for
    if run.given_up:  # their workers are stuck: what they started must not outlive the run
        _sweep()
    if progress:
        progress.finish()
    results = run.results
    if dupes is not None:
        dupes.settle(results)  # type: ignore[arg-type]
    final = [results[i] for i in sorted(results)]
    fleet = FleetRun(final, time.monotonic() - started, parallel, options.timeout, workers=len(run.threads))
    fleet.duplicates = dupes.notes(entries) if dupes is not None else []
    return fleet


def _drain(finished: queue.SimpleQueue[Any], timeout: float) -> list[Any]:
    """What is on `finished` now, waiting up to `timeout` for the first one."""
    try:
        ready = [finished.get(timeout=timeout)]
    except queue.Empty:
        return []
    while True:
        try:
            ready.append(finished.get_nowait())
        except queue.Empty:
            return ready


def _sweep() -> None:
    """Kill what hosts that were given up or interrupted may have left running: ProxyCommands (their
    process groups)."""
    sockets = sys.modules.get("bsdcrypt.ssh.sockets")  # loaded only if a host used SSH
    if sockets is not None:
        sockets.kill_all()


def default_parallel() -> int:
    """Handshakes are mostly waiting on the network; 32 keeps a 2-core client busy without thrashing."""
    return max(8, min(DEFAULT_PARALLEL, 16 * (os.cpu_count() or 2)))
