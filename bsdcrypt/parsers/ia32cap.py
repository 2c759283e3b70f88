"""OPENSSL_ia32cap: which grammar a libcrypto parses, and the one value bsdcrypt ever computes.

Pure. The rules are OpenSSL's own (docs/userland.md has the story, with the source lines):

* 1.0.2, 1.1.0 up to 1.1.0h, 1.1.1-pre1..pre8: `sscanf("%lli")` (crypto/cryptlib.c @OpenSSL_1_0_2u
  l.700-704): a sign is accepted (so `+0x...` is just `0x...`, it never meant "add"), and a signed
  conversion clamps anything >= 2^63 to LLONG_MAX, i.e. turns ON bits 0-62: bit 63 must be cleared.
  The second word is always zeroed first, so only a plain `:0x<EBX7>` sets it; bsdcrypt writes `:0`.
* 1.1.0i+, 1.1.1, 3.0-3.4: `ossl_strtouint64` since commit b86d57bb (crypto/cpuid.c @openssl-3.0.19
  l.94-156): `~v` masks the detected word, a plain `v` REPLACES it (and then nothing is detected at
  all), a missing `:W1` sets W1 to 0; a `+` is no digit, so `+0x...` means 0 (every asm path off).
* 3.5+: five words (crypto/cpuid.c @openssl-3.5.5 l.128-160): every word not given becomes 0.
* LibreSSL: never reads the variable.

A forced value is this host's own detected vector with only AES-NI (bit 57) and PCLMULQDQ (bit 33)
added: never `+`, never another machine's vector, never AVX/AVX2/VAES/SHA bits (a trial of AES
alone would pass while SHA or ChaCha20 code dies later, research §6.5).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from bsdcrypt.parsers import decimal
from bsdcrypt.parsers.openssl_version import OpensslVersion

AESNI_BIT = 57
PCLMULQDQ_BIT = 33
AESNI = 1 << AESNI_BIT
PCLMULQDQ = 1 << PCLMULQDQ_BIT
INITIALISED = 1 << 10  # OpenSSL always sets this reserved bit of W0 after parsing ("initialised")
HYPERVISOR = 1 << 63  # CPUID.1:ECX[31], kept in W0 by OpenSSL, used by no OpenSSL code
VAES_VPCLMULQDQ_W1 = (1 << 41) | (1 << 42)  # 3.2+ AVX512 VAES GCM ignores bit 57: mask these too
FORCED_BITS = AESNI | PCLMULQDQ
WORD_MASK = (1 << 64) - 1

Grammar = Literal["sscanf", "two-word", "five-word"]


@dataclass(frozen=True)
class Library:
    """How one libcrypto treats OPENSSL_ia32cap."""

    grammar: Grammar | None  # None: the variable is ignored (LibreSSL) or the version is unknown
    words: int  # how many words the grammar reads (0 when ignored)
    prints_vector: bool  # `openssl version -c` shows the detected vector (3.x)
    why: str  # one line: what bsdcrypt concluded and from what


def library(v: OpensslVersion | None) -> Library:
    """What the library of `openssl version` does with the variable."""
    if v is None:
        return Library(None, 0, False, "no openssl program answered `openssl version`")
    name = f"{v.library} {v.version}"
    if v.library == "LibreSSL":
        return Library(None, 0, False, f"{name} ignores OPENSSL_ia32cap (it runs CPUID itself, no override)")
    if v.major >= 3:
        if (v.major, v.minor) >= (3, 5):
            return Library("five-word", 5, True, f"{name} reads five words (3.5+)")
        return Library("two-word", 2, True, f"{name} reads two words (3.0-3.4)")
    if (v.major, v.minor) == (1, 1):
        old_pre = v.patch == 1 and v.prerelease is not None and _pre_number(v.prerelease) <= 8
        old_110 = v.patch == 0 and (v.letter or "") < "i"
        if old_pre or old_110:
            return Library("sscanf", 2, False, f"{name} parses with sscanf (before commit b86d57bb)")
        return Library("two-word", 2, False, f"{name} reads two words (1.1.0i+/1.1.1), prints no vector")
    if v.major == 1 or v.major == 0:
        return Library("sscanf", 2, False, f"{name} parses with sscanf: bit 63 must stay clear")
    return Library(None, 0, False, f"{name}: unknown version, bsdcrypt does not guess its parser")


def _pre_number(pre: str) -> int:
    n = decimal(pre[3:]) if pre.startswith("pre") else None
    return 99 if n is None else n


def format_value(words: tuple[int, ...]) -> str:
    """`0x..:0x..` as OpenSSL's own parser reads it: hex with `0x`, no sign, no blanks."""
    return ":".join(f"0x{w & WORD_MASK:x}" for w in words)


class CannotCompute(ValueError):
    """No safe value exists for this library and vector; str() says why, in one line."""


def forced_value(detected: tuple[int, ...], lib: Library) -> str:
    """This host's detected vector (OpenSSL's CPUINFO words, without the variable set) plus AES-NI
    and PCLMULQDQ, in the grammar of `lib`. Raises CannotCompute."""
    if lib.grammar is None:
        raise CannotCompute(lib.why)
    if not detected:
        raise CannotCompute("no detected capability vector to start from")
    words = [w & WORD_MASK for w in detected]
    w0 = words[0] | FORCED_BITS
    if lib.grammar == "sscanf":
        return format_value(((w0 & ~HYPERVISOR), 0))
    rest = words[1:] + [0] * max(0, lib.words - len(words))
    return format_value((w0, *rest[: lib.words - 1]))


def mask_value(lib: Library, v: OpensslVersion) -> str:
    """The "AES-NI hidden" simulation for a before/after demo on a CPU that shows AES-NI: AES-NI and
    PCLMULQDQ off, everything else as detected (3.2+ also VAES/VPCLMULQDQ, whose GCM ignores bit 57)."""
    if lib.grammar == "five-word":
        return f"~0x{FORCED_BITS:x}:~0x{VAES_VPCLMULQDQ_W1:x}:~0x0:~0x0:~0x0"
    if lib.grammar == "two-word" and v.number >= (3, 2, 0):
        return f"~0x{FORCED_BITS:x}:~0x{VAES_VPCLMULQDQ_W1:x}"
    if lib.grammar == "two-word":
        return f"~0x{FORCED_BITS:x}:~0x0"
    raise CannotCompute(f"{lib.why}: no mask keeps the other words there")


def parse_value(text: str) -> tuple[int, ...] | None:
    """The words of a plain (no `~`, no empty field) value such as bsdcrypt writes; None otherwise."""
    out: list[int] = []
    for field in text.strip().split(":"):
        if not field.startswith(("0x", "0X")) or len(field) < 3 or len(field) > 18:
            return None
        try:
            out.append(int(field[2:], 16))
        except ValueError:
            return None
    return tuple(out) if out else None


def has_aesni(words: tuple[int, ...] | None) -> bool | None:
    return None if not words else bool(words[0] & AESNI)


def has_pclmulqdq(words: tuple[int, ...] | None) -> bool | None:
    return None if not words else bool(words[0] & PCLMULQDQ)


def echo_matches(value: str, printed: tuple[int, ...] | None) -> bool:
    """Did `env OPENSSL_ia32cap=value openssl version -c` print exactly the value's words (W0 with
    the initialised bit 10, missing words as 0) and bit 57? Only plain values can be checked."""
    words = parse_value(value)
    if words is None or not printed:
        return False
    want = [words[0] | INITIALISED, *words[1:]]
    got = list(printed)
    n = max(len(want), len(got))
    want += [0] * (n - len(want))
    got += [0] * (n - len(got))
    # 3.0-3.4 print only two words whatever was given: compare what was printed
    return want[: len(printed)] == got[: len(printed)] and bool(printed[0] & AESNI)


Hazard = Literal["plus", "no-0x", "replaces-w1", "stale", "ok", "mask"]


def classify_override(value: str, detected: tuple[int, ...] | None, lib: Library | None) -> tuple[Hazard, str]:
    """What an OPENSSL_ia32cap found on the host does, in one line (for status and the guard).

    `detected`: this host's vector as OpenSSL detects it now (without the variable)."""
    v = value.strip().strip("\"'")
    if v.startswith("~") or v.startswith(":"):
        return "mask", f"{v} masks the detected vector (switches features off; it never forces AES-NI on)"
    if v.startswith("+") or v.startswith("-"):
        if lib is not None and lib.grammar in ("two-word", "five-word"):
            return "plus", (
                f"{v} starts with a sign: OpenSSL 1.1.0i and later read it as 0, so EVERY assembler path is off "
                "(slower than no variable at all); it never meant 'add'"
            )
        return "plus", (
            f"{v} starts with a sign: it never meant 'add', the value REPLACES the vector (SSE, AVX... cleared); "
            "OpenSSL 1.1.0i and later read it as 0"
        )
    words = parse_value(v)
    if words is None:
        return "no-0x", (
            f"{v} is not a plain 0x-hex vector: OpenSSL reads it as decimal or octal up to the first other character"
        )
    if detected:
        ignore = FORCED_BITS | INITIALISED | HYPERVISOR
        n = len(words)
        mine = [w & ~ignore for w in words]
        now = [w & ~ignore for w in list(detected)[:n]] + [0] * max(0, n - len(detected))
        if mine[0] != now[0] or (n > 1 and len(detected) > 1 and mine[1] != now[1]):
            return "stale", (
                f"{v} was not derived from this host's current vector ({format_value(detected)}): the virtual CPU "
                "changed (migration, new CPU model); bits it forces may not exist here"
            )
    if len(words) < 2:
        return "replaces-w1", f"{v} gives only the first word: OpenSSL then sets the second to 0 (AVX2, SHA... off)"
    return "ok", f"{v} is this host's vector with AES-NI/PCLMULQDQ added"
