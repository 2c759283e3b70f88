"""SSH wire encodings (RFC 4251 section 5): building payloads and reading them back."""

from __future__ import annotations


class Truncated(Exception):
    """A payload ended before the field being read."""


class Malformed(Exception):
    """A field whose bytes the protocol does not allow (a name-list name that is not printable ASCII)."""


def u32(n: int) -> bytes:
    return n.to_bytes(4, "big")


def string(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


def text(value: str) -> bytes:
    return string(value.encode("utf-8"))


def name_list(names: tuple[str, ...] | list[str]) -> bytes:
    return string(",".join(names).encode("ascii"))


def mpint(unsigned: bytes) -> bytes:
    """An mpint from a big-endian unsigned number (a shared secret as X25519 or ECDH gives it)."""
    data = unsigned.lstrip(b"\0")
    if data and data[0] & 0x80:
        data = b"\0" + data
    return string(data)


_NAME_BYTES = bytes(range(0x21, 0x7F))  # what a name-list may hold (the comma separates)


class Reader:
    """Fields of one payload, in order; a read past the end is `Truncated`."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data = data
        self.pos = pos

    def byte(self) -> int:
        pos = self.pos
        if pos >= len(self.data):
            raise Truncated("a byte")
        self.pos = pos + 1
        return self.data[pos]

    def boolean(self) -> bool:
        return self.byte() != 0

    def u32(self) -> int:
        pos = self.pos
        end = pos + 4
        if end > len(self.data):
            raise Truncated("a uint32")
        self.pos = end
        return int.from_bytes(self.data[pos:end], "big")

    def string(self) -> bytes:
        size = self.u32()
        pos = self.pos
        end = pos + size
        if end > len(self.data):
            raise Truncated(f"a string of {size} bytes")
        self.pos = end
        return self.data[pos:end]

    def text(self) -> str:
        return self.string().decode("utf-8", "replace")

    def names(self) -> list[str]:
        """A name-list: names of printable US-ASCII without commas (RFC 4251 section 5)."""
        raw = self.string()
        if not raw:
            return []
        if raw.translate(None, _NAME_BYTES):
            raise Malformed("a name-list holding bytes that are not printable ASCII")
        return raw.decode("ascii").split(",")
