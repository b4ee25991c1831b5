"""Where a run's CPU time went (Linux /proc): a process's, the broker's, and the whole machine's.

The machine's two cores are shared by the broker, the publisher, the receiver and the consumer, so a delivery
rate alone cannot say which of them a change made cheaper or dearer: CPU seconds per 1,000 deliveries can.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

TICKS = os.sysconf("SC_CLK_TCK")


def process_seconds(pid: int | None) -> float | None:
    """User + system CPU time of a process so far; None when it is gone or unknown."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime: fields 14 and 15 of stat(5)


def machine_busy_seconds() -> float:
    """CPU time all cores have spent on anything but idling and waiting for I/O, since boot."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
    return (user + nice + system + irq + softirq + steal) / TICKS


def listener_pid(port: int) -> int | None:
    """The local process that listens on TCP ``port`` (the broker's AMQP port), if this user may see it."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "0A" and int(fields[1].rpartition(":")[2], 16) == port:  # 0A: LISTEN
                inodes.add(f"socket:[{fields[9]}]")
    if not inodes:
        return None
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            for fd in (proc / "fd").iterdir():
                if os.readlink(fd) in inodes:
                    return int(proc.name)
        except OSError:
            continue  # gone, or not ours to read
    return None


def broker_pid(amqp_url: str) -> int | None:
    """The RabbitMQ node behind ``amqp_url`` when it runs on this machine (its beam process), else None."""
    parts = urlsplit(amqp_url)
    if parts.hostname not in ("127.0.0.1", "localhost", "::1"):
        return None
    return listener_pid(parts.port or 5672)
