"""One SSH exec with paramiko's message loop in the caller's thread: no transport thread, no handoffs.

paramiko runs every connection's messages in a thread of its own and the caller waits on events
that thread sets: a host costs two threads and about ten wake-ups (GIL and futex round trips), and
its auth and channel-open waits poll every 0.1 s. For a host that runs one command and is closed
(fleet-audit), `Transport.run()` is called here in the worker itself, and each step that would
wait (log in once the keys are exchanged, open the session once logged in, exec and send the script
once it is open) runs as the step before it completes, between two messages. Measured at 500
hosts (docs/performance.md): a bare one-line client built this way needs ~0.6x the CPU of the stock
threaded one; fleet-audit ~1 ms a host less than with paramiko's thread.

Since the tenth session fleet-audit's plain TCP hosts go over bsdcrypt's own client (direct.py);
this loop serves the rest of its hosts: through a ProxyCommand or ProxyJump, and servers that share
none of the direct client's algorithms (older sshd: CTR ciphers, DH groups). Used only where
`OneShot.supported()`: it relies on paramiko internals that 3.4-5.x share
(`_next_channel`, `_channels`, `channel_events`, `channels_seen`, `Channel._set_transport`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, cast

import paramiko
from paramiko.channel import Channel
from paramiko.common import MSG_IGNORE, cMSG_CHANNEL_OPEN

from bsdcrypt.ssh.transport import WireSocket, _DeadlinePacketizer, _Transport


class Later:
    """An Event stand-in: `set()` queues a step that the loop runs before it reads the next message.

    paramiko sets its events inside its handlers, some with the transport's lock held and before the
    state the next step needs (e.g. clear-to-send after new keys); running the step there would
    deadlock or race. Between two messages everything is settled."""

    def __init__(self, loop: Loop, step: Callable[[], None]) -> None:
        self._loop = loop
        self._step = step
        self._set = False

    def set(self) -> None:
        if not self._set:
            self._set = True
            self._loop.pending.append(self._step)

    def is_set(self) -> bool:
        return self._set

    def wait(self, timeout: float | None = None) -> bool:  # never blocks: there is no other thread to wait for
        return self._set

    def clear(self) -> None:
        self._set = False


class LoopPacketizer(_DeadlinePacketizer):
    """The packet reader, which also runs the loop's pending steps before each read, and whose
    deadline holds for the whole exec (paramiko's handshake timeout ends with the first message)."""

    loop: Loop | None = None
    wire: WireSocket | None = None

    def read_all(self, n: int, check_rekey: bool = False) -> bytes:
        """paramiko reads each packet in two exact-size pieces; when the socket's buffer holds a piece
        already (most packets arrive in flights), it is taken from there without paramiko's read
        loop and its deadline and rekey checks, which run with every read that waits for the network."""
        wire = self.wire
        if wire is not None and not self.__dict__.get("_Packetizer__remainder"):
            data = wire.take(n)
            if data is not None:
                return data
        return bytes(super().read_all(n, check_rekey))

    def handshake_timed_out(self) -> bool:
        loop = self.loop
        if loop is not None and time.monotonic() >= loop.deadline:
            return True
        return super().handshake_timed_out()

    def read_message(self) -> tuple[int, paramiko.Message]:
        loop = self.loop
        if loop is not None and loop.between_messages():
            return MSG_IGNORE, paramiko.Message()  # the loop ends: run() sees `active` False and returns
        return super().read_message()


class LoopTransport(_Transport):
    """A Transport whose `run()` the caller calls: `start_client` starts no thread."""

    def start(self) -> None:
        pass


class Loop:
    """The state of one exec driven by `LoopTransport.run()`: steps queued by `Later` events, the
    session channel once open, and how it ended (`finished`, or `error`)."""

    def __init__(self, transport: LoopTransport, deadline: float) -> None:
        self.transport: Any = transport
        self.deadline = deadline
        self.pending: list[Callable[[], None]] = []
        self.watch: Callable[[], bool] | None = None  # after the steps: True when the exec is over
        self.finished = False
        self.error: BaseException | None = None
        packetizer: Any = transport.packetizer
        packetizer.__class__ = LoopPacketizer
        packetizer.loop = self
        sock = transport.sock
        # only where paramiko keeps what it read past the banner where read_all looks (3.4-5.x)
        known = "_Packetizer__remainder" in packetizer.__dict__
        packetizer.wire = sock if isinstance(sock, WireSocket) and known else None

    def later(self, step: Callable[[], None]) -> threading.Event:
        """What paramiko takes for an event it sets when something is answered."""
        return cast(threading.Event, Later(self, step))

    def between_messages(self) -> bool:
        """Run what is due; True when the loop must end (finished, or a step failed). Nothing runs while
        keys are being exchanged again (a server may start that at any time): paramiko holds every
        message sent then until the exchange ends, which only this loop can carry through."""
        if self.transport.in_kex:
            return False
        try:
            while self.pending:
                self.pending.pop(0)()
            if self.watch is not None and self.watch():
                self.finished = True
        except BaseException as exc:  # the caller raises it (paramiko would log a traceback for it)
            self.error = exc
        if self.finished or self.error is not None:
            self.transport.active = False
            return True
        return False

    def open_session(self, window: int, max_packet: int, on_open: Callable[[], None]) -> Channel:
        """`Transport.open_session()` without its wait: `on_open` runs once the server confirms."""
        t: Any = self.transport
        m = paramiko.Message()
        with t.lock:
            chanid = t._next_channel()  # noqa: SLF001
            m.add_byte(cMSG_CHANNEL_OPEN)
            m.add_string("session")
            m.add_int(chanid)
            m.add_int(window)
            m.add_int(max_packet)
            chan: Any = Channel(chanid)
            t._channels.put(chanid, chan)  # noqa: SLF001
            t.channel_events[chanid] = self.later(on_open)
            t.channels_seen[chanid] = True
            chan._set_transport(t)  # noqa: SLF001
            chan._set_window(window, max_packet)  # noqa: SLF001
        t._send_user_message(m)  # noqa: SLF001
        return cast(Channel, chan)


def supported() -> bool:
    """paramiko has what `Loop` relies on."""
    t = paramiko.Transport
    return all(hasattr(t, name) for name in ("run", "_next_channel", "_send_user_message")) and all(
        hasattr(Channel, name) for name in ("_set_transport", "_set_window", "_event_pending")
    )
