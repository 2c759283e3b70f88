"""The parsers of what the bench reads from the host (swapinfo, kern.boottime, mdconfig -l)."""

from __future__ import annotations

from bench_host import SWAPINFO_OUT

from bsdcrypt.bench.model import LABEL
from bsdcrypt.parsers.mdconfig import parse_mdconfig_list
from bsdcrypt.parsers.swapinfo import parse_swapinfo_avail_kib
from bsdcrypt.parsers.sysctl import parse_boottime


def test_parsers_of_host_output() -> None:
    assert parse_swapinfo_avail_kib(SWAPINFO_OUT) == 4194304
    two = (
        SWAPINFO_OUT
        + "/dev/ada1p3       1048576     1024  1047552     0%\n"
        + "Total             5242880     1024  5241856     0%\n"
    )
    assert parse_swapinfo_avail_kib(two) == 4194304 + 1047552
    assert parse_swapinfo_avail_kib("Device          1K-blocks     Used    Avail Capacity\n") == 0
    assert parse_boottime("{ sec = 1732000000, usec = 415202 } Tue Nov 19") == 1732000000
    entries = parse_mdconfig_list(
        "md0\tmalloc\t   64M\t-\t-\tcompress\nmd1\tswap\t  1.0G\t-\tbsdcrypt-bench\t\n"
    )
    assert [(e.name, e.type, e.label) for e in entries] == [("md0", "malloc", None), ("md1", "swap", LABEL)]
    old = parse_mdconfig_list("md0\tswap\t  1.0G\n")
    assert old[0].label is None and old[0].type == "swap"
    assert [e.name for e in parse_mdconfig_list("md0 md3 \n")] == ["md0", "md3"]
