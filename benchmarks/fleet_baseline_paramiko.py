"""Baseline for benchmarks/fleet_bench.py: a minimal paramiko script, thread pool, one exec per host.

What a competent admin would write in 30 lines: SSHClient per host, key file, one exec of the
same probe script (`/bin/sh -s`, script on stdin), read all output, no parsing. known_hosts is
parsed once and each client gets its host's keys: the naive `client.load_host_keys(path)` per
host re-parses the whole file every time (quadratic: 8 hosts/s at 200 hosts here), which would
make the baseline a straw man. paramiko's default algorithms, as such a script would use.

    python benchmarks/fleet_baseline_paramiko.py HOSTS_FILE KNOWN_HOSTS KEY_FILE PARALLEL
"""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor

import paramiko

from bsdcrypt.probe import build_script, new_token


def probe(line: str, known: paramiko.HostKeys, key: str) -> int:
    user, _, rest = line.rpartition("@")
    host, _, port = rest.rpartition(":")
    token = new_token()
    client = paramiko.SSHClient()
    name = host if port == "22" else f"[{host}]:{port}"
    for key_type, host_key in (known.lookup(name) or {}).items():
        client.get_host_keys().add(name, key_type, host_key)
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    try:
        client.connect(host, int(port), username=user or "root", key_filename=key,
                       look_for_keys=False, allow_agent=False, timeout=30)
        stdin, stdout, _ = client.exec_command("/bin/sh -s")
        stdin.write(build_script(token))
        stdin.channel.shutdown_write()
        out = stdout.read()
        stdout.channel.recv_exit_status()
        return len(out)
    finally:
        client.close()


def main() -> None:
    hosts_file, known_hosts, key, parallel = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    lines = [ln.strip() for ln in open(hosts_file, encoding="utf-8") if ln.strip() and not ln.startswith("#")]
    known = paramiko.HostKeys(known_hosts)
    with ThreadPoolExecutor(parallel) as pool:
        sizes = list(pool.map(lambda ln: probe(ln, known, key), lines))
    print(f"{len(sizes)} hosts, {sum(sizes)} bytes")


if __name__ == "__main__":
    main()
