"""Hosts file parsing for fleet-audit (pure)."""

from __future__ import annotations

import pytest

from bsdcrypt.hostsfile import HostsFileError, parse_hosts
from bsdcrypt.hostspec import SpecError, split_spec


def test_forms_comments_and_blank_lines() -> None:
    text = """
# the fleet
fw1.example.org
root@nas.example.org:2222   # trailing comment
admin@192.0.2.10
[2001:db8::7]:2200
ops@[2001:db8::8]
2001:db8::9
replay:recordings/opnsense.yaml
\t
"""
    hosts = parse_hosts(text, "hosts.txt", "/srv")
    got = [(e.user, e.host, e.port, e.replay) for e in hosts.entries]
    assert got == [
        (None, "fw1.example.org", None, None),
        ("root", "nas.example.org", 2222, None),
        ("admin", "192.0.2.10", None, None),
        (None, "2001:db8::7", 2200, None),
        ("ops", "2001:db8::8", None, None),
        (None, "2001:db8::9", None, None),
        (None, "", None, "recordings/opnsense.yaml"),
    ]
    assert hosts.entries[1].source == "hosts.txt:4"
    assert hosts.entries[3].ssh_spec == "[2001:db8::7]:2200"
    assert hosts.entries[6].base_dir == "/srv"
    assert hosts.duplicates == []


def test_bad_lines_name_file_and_line_all_at_once() -> None:
    text = "good.example\nbad host name\nx.example:99999\nroot@[::1\n@nohost\nweb:abc\n[not-v6]:22\n"
    with pytest.raises(HostsFileError) as info:
        parse_hosts(text, "fleet.txt")
    problems = info.value.problems
    assert [p.split(":")[1] for p in problems] == ["2", "3", "4", "5", "6", "7"]
    assert all(p.startswith("fleet.txt:") for p in problems)
    assert "out of range" in problems[1]
    assert "fleet.txt:2:" in str(info.value)


def test_duplicates_reported_once_and_audited_once() -> None:
    text = "a.example\nroot@b.example\nA.EXAMPLE\na.example\nroot@b.example:22\nroot@b.example\n"
    hosts = parse_hosts(text, "h")
    assert [e.spec for e in hosts.entries] == ["a.example", "root@b.example", "root@b.example:22"]
    assert len(hosts.duplicates) == 2
    first = hosts.duplicates[0]
    assert (first.spec, first.first, first.others) == ("a.example", "h:1", ["h:3", "h:4"])
    assert "listed more than once" in str(first)


def test_stdin_origin_and_empty_file() -> None:
    with pytest.raises(HostsFileError, match=r"<stdin>: no hosts"):
        parse_hosts("# nothing\n\n", "-")
    with pytest.raises(HostsFileError, match=r"<stdin>:1: bad host name"):
        parse_hosts("-bad\n", "-")


def test_replay_with_hash_in_path_and_bad_replay() -> None:
    hosts = parse_hosts("replay:a#b.yaml\n", "h")
    assert hosts.entries[0].replay == "a#b.yaml"
    with pytest.raises(HostsFileError, match="h:1: replay: needs"):
        parse_hosts("replay:\n", "h")


@pytest.mark.parametrize(
    "spec, want",
    [
        ("h", (None, "h", None)),
        ("u@h:1", ("u", "h", 1)),
        ("u.name@h-1.example:65535", ("u.name", "h-1.example", 65535)),
        ("[fe80::1%eth0]:22", (None, "fe80::1%eth0", 22)),
        ("user@host@bastion", ("user@host", "bastion", None)),
    ],
)
def test_split_spec(spec: str, want: tuple[object, ...]) -> None:
    assert split_spec(spec) == want


@pytest.mark.parametrize("spec", ["", "h:0", "h:", ":22", "[::1]x", "a..b", "h h", "1:2:3:zz"])
def test_split_spec_rejects(spec: str) -> None:
    with pytest.raises(SpecError):
        split_spec(spec)


def test_a_byte_order_mark_is_ignored() -> None:
    from bsdcrypt.hostsfile import parse_hosts

    hosts = parse_hosts("\ufeffroot@fw1:2222\n", "hosts.txt")
    assert len(hosts.entries) == 1 and hosts.entries[0].host == "fw1"


def test_a_user_may_hold_an_at_sign_but_not_end_in_one() -> None:
    import pytest

    from bsdcrypt.hostspec import SpecError, split_spec

    assert split_spec("alice@corp.example@fw1:22") == ("alice@corp.example", "fw1", 22)
    with pytest.raises(SpecError, match="bad user name"):
        split_spec("user@@fw1")


def test_bad_lines_are_one_per_line_and_capped() -> None:
    text = "".join(f"bad host {i}\n" for i in range(25))
    with pytest.raises(HostsFileError) as info:
        parse_hosts(text, "big.txt")
    lines = str(info.value).splitlines()
    assert len(lines) == 21 and lines[0].startswith("big.txt:1: ") and lines[19].startswith("big.txt:20: ")
    assert lines[20] == "big.txt: and 5 more bad lines"
    assert len(info.value.problems) == 25


def test_dedupe_with_another_identity() -> None:
    from bsdcrypt.hostsfile import dedupe, read_hosts

    entries = read_hosts("fw1\nfw1:22\nfw2\nfw1\n", "h")
    assert len(entries) == 4
    hosts = dedupe(entries, lambda e: e.host)
    assert [e.spec for e in hosts.entries] == ["fw1", "fw2"]
    assert str(hosts.duplicates[0]) == "fw1 is listed more than once (h:1, also h:2 as fw1:22, h:4); audited once"
