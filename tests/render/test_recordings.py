"""Issue 28: `bsdcrypt recordings` marks what each shipped recording is made of (README, "How far it has been tried")."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_cli

from bsdcrypt.recording import description, shipped
from bsdcrypt.render.recordings import listing

ROOT = Path(__file__).resolve().parents[2]
RECORDINGS = sorted((ROOT / "fixtures" / "hosts").glob("*.yaml"))


def _header(path: Path) -> str:
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        lines.append(line)
    return "\n".join(lines)


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: p.stem)
def test_each_recording_says_what_it_is_made_of(path: Path) -> None:
    made = description(path, "made_of")
    assert made in ("real", "composite", "staged")
    header = _header(path)
    # real: the probe's own output, nothing derived; anything with derived steps is not real
    assert (made == "real") == ("nothing derived" in header), header[-400:]
    if made != "real":
        assert "shared/real-outputs/" in header or "real-outputs/" in header  # a published real output in it


def test_the_listing_shows_the_mark_of_every_recording() -> None:
    r = run_cli("recordings", check=True)
    marks = {line.split()[0]: line.split()[1] for line in r.stdout.splitlines()}
    assert marks == {name: description(path, "made_of") for name, path in shipped()}
    assert marks["freebsd-12.2-bhyve-aesni-flag-hidden"] == "staged"
    assert marks["freebsd-13.0-hyperv-builtin"] == "composite"
    assert marks["linux-debian12-local"] == "real"


def test_the_listing_fits_a_width() -> None:
    rows = [("freebsd-10.2-kvm-digitalocean-geli-hardware-kldloaded", "staged",
             "FreeBSD 10.2 KVM droplet: aesni.ko kldloaded by hand, not persisted; GELI provider on hardware crypto"),
            ("short", "real", "fits")]
    whole = listing(rows)
    assert len(whole.splitlines()) == 2
    narrow = listing(rows, 60).splitlines()
    assert narrow[0] == "freebsd-10.2-kvm-digitalocean-geli-hardware-kldloaded"
    assert all(len(line) <= 60 for line in narrow) and narrow[1].startswith("    [staged] FreeBSD 10.2")
    assert narrow[-2:] == ["short", "    [real] fits"]  # the columns are the long name's
    assert listing(rows[1:], 60) == "short  real  fits\n"
