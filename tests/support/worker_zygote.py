"""Real ``warren worker`` processes started in milliseconds: forked from a process that imported Warren once.

``python -m tests.support.worker_zygote`` reads ``CONFIG LOG`` lines on stdin; for each it forks a child that
runs ``warren worker --config CONFIG --log-format json`` with its output in LOG, and prints the child's pid.
A test that kills dozens of workers with SIGKILL is then bounded by the broker, not by Python's start-up
(about a second of CPU per process on these machines). The zygote reaps its children; it exits at EOF.
"""

from __future__ import annotations

import os
import signal
import sys

from warren.cli import main as warren_main


def _child(config: str, log: str) -> None:
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(out, 1)
    os.dup2(out, 2)
    sys.argv = ["warren", "worker", "--config", config, "--log-format", "json"]
    code = 0
    try:
        warren_main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def main() -> None:
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    for line in sys.stdin:
        config, log = line.split()
        pid = os.fork()
        if pid == 0:
            _child(config, log)
        print(pid, flush=True)


if __name__ == "__main__":
    main()
