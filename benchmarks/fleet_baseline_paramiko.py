"""Baseline for benchmarks/fleet_bench.py: a minimal paramiko script, thread pool, one exec per host.

What a competent admin would write in 30 lines: SSHClient per host, key file, one exec, read all
output, no parsing. known_hosts is parsed once and each client gets its host's keys: the naive
`client.load_host_keys(path)` per host re-parses the whole file every time (quadratic: 8 hosts/s at
200 hosts here), which would make the baseline a straw man. paramiko's default algorithms, as such
a script would use. PROBE chooses what runs on each host:
  oneline   `uname -a; kldstat -q -m nexus/aesni; echo aesni=$?` (the cheapest useful audit)
  v1        bsdcrypt's probe as every step writing straight to stdout (`build_script(buffered=False)`)
  buffered  bsdcrypt's probe as bsdcrypt sends it (`build_script()`), through `/bin/sh -s`

    python benchmarks/fleet_baseline_paramiko.py HOSTS_FILE KNOWN_HOSTS KEY_FILE PARALLEL PROBE
"""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor

import paramiko

from bsdcrypt.probe import build_script, new_token

ONELINE = "uname -a; kldstat -q -m nexus/aesni; echo aesni=$?"


def probe(line: str, known: paramiko.HostKeys, key: str, kind: str) -> int:
    user, _, rest = line.rpartition("@")
    host, _, port = rest.rpartition(":")
    client = paramiko.SSHClient()
    name = host if port == "22" else f"[{host}]:{port}"
    for key_type, host_key in (known.lookup(name) or {}).items():
        client.get_host_keys().add(name, key_type, host_key)
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    try:
        client.connect(host, int(port), username=user or "root", key_filename=key,
                       look_for_keys=False, allow_agent=False, timeout=30)
        if kind == "oneline":
            _, stdout, _ = client.exec_command(ONELINE)
        else:
            stdin, stdout, _ = client.exec_command("/bin/sh -s")
            stdin.write(build_script(new_token(), buffered=kind == "buffered"))
            stdin.channel.shutdown_write()
        out = stdout.read()
        stdout.channel.recv_exit_status()
        return len(out)
    except Exception as exc:  # a failed host is a row, as in any audit script
        print(f"{line}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return -1
    finally:
        client.close()


def main() -> None:
    hosts_file, known_hosts, key, parallel, kind = sys.argv[1:6]
    lines = [ln.strip() for ln in open(hosts_file, encoding="utf-8") if ln.strip() and not ln.startswith("#")]
    known = paramiko.HostKeys(known_hosts)
    with ThreadPoolExecutor(int(parallel)) as pool:
        sizes = list(pool.map(lambda ln: probe(ln, known, key, kind), lines))
    failed = sum(1 for s in sizes if s < 0)
    print(f"{len(sizes)} hosts, {sum(s for s in sizes if s > 0)} bytes, {failed} failed")


if __name__ == "__main__":
    main()
