"""A step with three levels of descendants, for reliability goals R8 and R10.

    python steptree.py tree DIR LEVEL   level 1 spawns 2, which ignores SIGTERM and spawns 3,
                                        which execs `sleep` holding the step's stdout
    python steptree.py once DIR         one copy at a time: takes DIR/step.lock (flock) or logs
                                        DOUBLE; logs "start <pid>"; waits for DIR/go, then exits 0
    python steptree.py guarded DIR      as once, but ignoring SIGTERM, and with a grandchild in a
                                        session of its own that shares the lock (so the lock is
                                        free only once every process of the attempt is gone);
                                        logs "start <pid> <grandchild pid>"
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time


def tree(d: str, level: int) -> None:
    if level == 2:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    with open(os.path.join(d, f"pid{level}.tmp"), "w") as f:
        f.write(str(os.getpid()))
    os.rename(os.path.join(d, f"pid{level}.tmp"), os.path.join(d, f"pid{level}"))
    if level == 3:
        sys.stdout.flush()
        os.execvp("sleep", ["sleep", "600"])  # holds stdout open
    subprocess.Popen([sys.executable, __file__, "tree", d, str(level + 1)])
    time.sleep(600)


def once(d: str) -> None:
    fd = os.open(os.path.join(d, "step.lock"), os.O_RDWR | os.O_CREAT, 0o644)
    log = os.path.join(d, "log")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        with open(log, "a") as f:
            f.write(f"DOUBLE {os.getpid()}\n")
        sys.exit(3)
    with open(log, "a") as f:
        f.write(f"start {os.getpid()}\n")
    while not os.path.exists(os.path.join(d, "go")):
        time.sleep(0.02)


def guarded(d: str) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    fd = os.open(os.path.join(d, "step.lock"), os.O_RDWR | os.O_CREAT, 0o644)
    log = os.path.join(d, "log")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        with open(log, "a") as f:
            f.write(f"DOUBLE {os.getpid()}\n")
        sys.exit(3)
    child = subprocess.Popen([sys.executable, "-c", "import os, signal, time; os.setsid();"
                              " signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"],
                             pass_fds=(fd,))
    with open(log, "a") as f:
        f.write(f"start {os.getpid()} {child.pid}\n")
    while not os.path.exists(os.path.join(d, "go")):
        time.sleep(0.02)
    child.kill()
    child.wait()


if __name__ == "__main__":
    if sys.argv[1] == "tree":
        tree(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1] == "guarded":
        guarded(sys.argv[2])
    else:
        once(sys.argv[2])
