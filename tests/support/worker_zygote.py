"""Real ``warren worker`` processes started in milliseconds: forked from a process that imported Warren once.

``python -m tests.support.worker_zygote`` reads ``CONFIG LOG`` lines on stdin; for each it forks a child that
runs ``warren worker --config CONFIG --log-format json`` with its output in LOG, and prints the child's pid.
A test that kills dozens of workers with SIGKILL is then bounded by the broker, not by Python's start-up
(about a second of CPU per process on these machines). The zygote reaps its children; at EOF (the test
ended, however it ended) it kills those still running and exits, and a child dies with the zygote
(``PR_SET_PDEATHSIG``), so no worker outlives the test.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys

from warren.cli import main as warren_main

_PR_SET_PDEATHSIG = 1


def _child(config: str, log: str) -> None:
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
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
    children: list[int] = []
    for line in sys.stdin:
        config, log = line.split()
        pid = os.fork()
        if pid == 0:
            _child(config, log)
        children.append(pid)
        print(pid, flush=True)
    for pid in children:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


if __name__ == "__main__":
    main()
