"""Issue 26: a loader file the probe would not read (a device, a FIFO, over 1 MiB: status 2) is evidence
missing, never an absent file: whether the driver comes back at boot is unknown, and status says why."""

from __future__ import annotations

from pathlib import Path

import pytest

from bsdcrypt.assess import assess
from bsdcrypt.probe import Evidence, Step
from bsdcrypt.recording import load

HOSTS = Path(__file__).resolve().parent.parent / "fixtures" / "hosts"
NOT_LOADED = HOSTS / "freebsd-12.2-bhyve-not-loaded-overridden.yaml"


@pytest.mark.parametrize("path", ["/boot/loader.conf", "/boot/loader.conf.local"])
@pytest.mark.parametrize("why", ["not a regular file (a device, FIFO or socket): not read",
                                 "larger than 1 MiB (78643200 bytes): not read"])
def test_an_unread_loader_file_makes_persistence_unknown(path: str, why: str) -> None:
    ev = load(NOT_LOADED)[1]
    ev = Evidence({**ev.steps, f"file:{path}": Step(2, (why + "\n").encode())})
    status = assess(ev, "h", "t")
    assert status.persist.configured is None
    assert f"{path} (not read: {why})" in (status.persist.reason or ""), status.persist


def test_an_absent_loader_conf_local_is_still_absent() -> None:
    ev = load(NOT_LOADED)[1]
    ev = Evidence({**ev.steps, "file:/boot/loader.conf.local": Step(1, b"cat: /boot/loader.conf.local: No such file\n")})
    assert assess(ev, "h", "t").persist.configured is not None


def test_a_named_file_not_read_makes_it_uncertain() -> None:
    ev = load(NOT_LOADED)[1]
    ev = Evidence({**ev.steps,
                   "file:/boot/loader.conf": Step(0, b'loader_conf_files="/boot/site.conf"\n'),
                   "file:/boot/site.conf": Step(2, b"not a regular file (a device, FIFO or socket): not read\n")})
    status = assess(ev, "h", "t")
    assert status.persist.configured is None and "/boot/site.conf" in (status.persist.uncertain or "")
