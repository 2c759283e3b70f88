"""The fleet's host order sorts any name: digit runs int() refuses ('1²2', 5,000 digits) as text."""

from __future__ import annotations

from bsdcrypt.hostsfile import HostEntry
from bsdcrypt.render.fleet import host_order


def test_names_sort_naturally_and_hostile_digits_sort_as_text() -> None:
    names = ["fw10", "fw2", "1²2", "a" + "9" * 5000, "fw١٢", "fw1"]
    entries = [HostEntry(spec=n, source=f"hosts:{i}", host=n) for i, n in enumerate(names, 1)]
    ordered = [e.host for e in sorted(entries, key=host_order)]
    assert ordered == ["1²2", "a" + "9" * 5000, "fw1", "fw2", "fw10", "fw١٢"]
    files = [HostEntry(spec=f"/tmp/{n}.txt", source="analyze") for n in ("1²2", "10", "9")]
    assert [e.spec for e in sorted(files, key=host_order)] == ["/tmp/1²2.txt", "/tmp/9.txt", "/tmp/10.txt"]
