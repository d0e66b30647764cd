"""Probes for the security tests: a Spark job that records which settings reached it (by hash, never the
value), a search for secret values in files, and the listening sockets and command lines of a process tree."""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

# A stand-in for the Spark job (MVSINK_SPARK_JOB): hashes the settings ``keys`` into ``out``, then writes as usual.
PROBE_JOB = """\
import hashlib, json, sys
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
keys = {keys!r}
seen = {{k: hashlib.sha256(spark.conf.get(k, "").encode()).hexdigest() for k in keys}}
open({out!r}, "w").write(json.dumps(seen))
from mvsink.write.job import main
sys.exit(main())
"""


def grep_files(root: Path, needles: dict[str, str]) -> list[str]:
    """``"<name> in <file>"`` for every needle found in a file under ``root``."""
    hits = []
    for f in root.rglob("*"):
        if f.is_file():
            data = f.read_bytes()
            hits += [f"{name} in {f}" for name, s in needles.items() if s.encode() in data]
    return hits


def _hex_ip(text: str) -> str:
    raw = bytes.fromhex(text)
    if len(raw) == 4:
        return str(ipaddress.IPv4Address(raw[::-1]))
    addr = ipaddress.IPv6Address(b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4)))
    return str(addr.ipv4_mapped or addr)  # a JVM listens on IPv4-mapped IPv6 addresses


def listening_sockets(pids: set[int]) -> list[tuple[int, str, str, int]]:
    """(pid, command, ip, port) of every TCP socket in LISTEN state owned by ``pids``, from /proc (no ss)."""
    out = []
    for pid in pids:
        try:
            inodes = set()
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                except OSError:
                    continue
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            for table in ("tcp", "tcp6"):
                for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
                    cols = line.split()
                    if cols[3] == "0A" and cols[9] in inodes:  # 0A: LISTEN
                        ip, port = cols[1].rsplit(":", 1)
                        out.append((pid, cmd, _hex_ip(ip), int(port, 16)))
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue  # the process ended meanwhile
    return out


def process_tree(root_pid: int) -> set[int]:
    """``root_pid`` and all its descendants (empty once it has ended)."""
    import psutil

    try:
        p = psutil.Process(root_pid)
        return {root_pid, *(c.pid for c in p.children(recursive=True))}
    except psutil.NoSuchProcess:
        return set()
