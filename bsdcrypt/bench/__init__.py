"""`bsdcrypt bench`: GELI on a swap-backed md(4) device, measured with fio.

Every action on the host is one `Host.run` call, named by a step, so a failure says
which step failed. The sequence for one measurement of one target:

    mdconfig -a -t swap -s SIZEm -L bsdcrypt-bench      -> prints "mdN"
    geli onetime -e AES-XTS -l 128 -s 4096 mdN          (target "geli" only)
    geli list mdN.eli                                   -> the Crypto: field
    fio ... --filename=/dev/mdN.eli --rw=write ...      (then --rw=read)
    geli detach mdN.eli                                 (target "geli" only)
    mdconfig -d -u N

The target "md" (no GELI) is the ceiling: what the same md device does without crypto.

Safety rules, enforced in one place (`Devices`):
* only md units this run created (the name mdconfig printed, `^md[0-9]+$`, not in the
  list taken before) are ever named in a command, and `.eli` only on top of those;
* cleanup runs on success, on any failing step, on KeyboardInterrupt and on SIGTERM
  (turned into an exception while a bench runs); it retries with force, verifies with
  `mdconfig -l`/`test -c`, and reports what could not be removed;
* devices carry the md label `bsdcrypt-bench` (mdconfig -L) and are also listed in
  /var/run/bsdcrypt-bench.units with the boot time, the owner (`<pid>@<machine>` of the
  bsdcrypt that made them), type and size. The next run removes a crashed run's leftovers
  (labelled, owner gone) and refuses while a bench still runs or ownership is in doubt;
  `bench --cleanup` also removes labelled units no entry claims. Without labels (old
  mdconfig) the unit is chosen, recorded and then created with `-u N`, and a state entry
  counts only while its unit is a swap md of the recorded size.
"""

from bsdcrypt.bench.model import (
    LABEL,
    MIB,
    NO_BEFORE_COMPILED_IN,
    NO_BEFORE_LOADED,
    RECORD_SCHEMA,
    ST_CREATE,
    ST_DESTROY,
    ST_DETACH,
    ST_FIO,
    ST_GELI,
    ST_GELI_LIST,
    ST_LEFTOVERS,
    ST_MDLIST,
    ST_MEMORY,
    ST_ONETIME,
    ST_ROOT,
    ST_STATE,
    ST_SWAP,
    ST_SYSCTL,
    STATE_FILE,
    BenchError,
    BenchInterrupted,
    BenchParams,
    BenchResult,
    CipherSpeed,
    CleanupReport,
    HostFacts,
    Measurement,
    Sample,
    Speedup,
    UserlandResult,
    compare,
    fio_args,
    no_before_reason,
    userland_record,
)
from bsdcrypt.bench.openssl import IA32CAP_MASK, USERLAND_CIPHERS, userland, userland_advice
from bsdcrypt.bench.run import cleanup_leftovers, measure
from bsdcrypt.bench.session import RETRY_DELAY_S, BenchSession, Leftover
from bsdcrypt.interrupts import signals_deferred, sigterm_raises

__all__ = [
    "LABEL",
    "STATE_FILE",
    "MIB",
    "RECORD_SCHEMA",
    "RETRY_DELAY_S",
    "ST_ROOT",
    "ST_FIO",
    "ST_GELI",
    "ST_SYSCTL",
    "ST_SWAP",
    "ST_MEMORY",
    "ST_LEFTOVERS",
    "ST_MDLIST",
    "ST_CREATE",
    "ST_STATE",
    "ST_ONETIME",
    "ST_GELI_LIST",
    "ST_DETACH",
    "ST_DESTROY",
    "BenchError",
    "BenchInterrupted",
    "BenchParams",
    "HostFacts",
    "fio_args",
    "Sample",
    "Measurement",
    "CleanupReport",
    "CipherSpeed",
    "UserlandResult",
    "BenchResult",
    "Speedup",
    "compare",
    "no_before_reason",
    "NO_BEFORE_COMPILED_IN",
    "NO_BEFORE_LOADED",
    "userland_record",
    "Leftover",
    "sigterm_raises",
    "signals_deferred",
    "BenchSession",
    "measure",
    "cleanup_leftovers",
    "USERLAND_CIPHERS",
    "IA32CAP_MASK",
    "userland",
    "userland_advice",
]
