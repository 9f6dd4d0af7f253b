"""Shared machinery of the reliability goals: workloads, forked crash children, the power-loss
model, fault hooks and state comparison.

Everything here drives the store through ``resumable.fsio`` (the I/O seam): a hook sees every
write-side call before it happens and may count it, fail it, kill the process, or record what
would survive a power loss.
"""

from __future__ import annotations

import contextlib
import errno
import os
import random
import signal
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson

from resumable import api, fsio
from resumable.errors import NoRunError

TIME_KEYS = frozenset({"at", "createdAt", "updatedAt", "startedAt", "finishedAt", "resolvedAt"})


def strip_times(value: Any) -> Any:
    """The document without wall-clock stamps, so states from different runs compare equal."""
    if isinstance(value, dict):
        return {k: strip_times(v) for k, v in value.items() if k not in TIME_KEYS}
    if isinstance(value, list):
        return [strip_times(v) for v in value]
    return value


def load_state(snapshot: Path) -> dict[str, Any] | None:
    """The run's document as a fresh reader sees it (None: no run). Raises on corruption."""
    try:
        return strip_times(api.read_doc(snapshot))
    except NoRunError:
        return None


def snapshot_parses(snapshot: Path) -> bool:
    """What `cat`/`jq` and the seed tools read: absent, or one complete JSON object."""
    try:
        data = snapshot.read_bytes()
    except FileNotFoundError:
        return True
    try:
        return isinstance(orjson.loads(data), dict)
    except orjson.JSONDecodeError:
        return False


# --- a small run touching every kind of write (append, snapshot replace, archive renames) ----

Op = Callable[[api.Run], object]

SMALL_OPS: list[tuple[str, Op]] = [
    ("init", lambda r: r.init("proof", units=["a", "b", "c"])),
    ("unit a in_progress", lambda r: r.unit("a", "in_progress")),
    ("unit a done", lambda r: r.unit("a", "done", note="ok")),
    ("phase build running", lambda r: r.phase("build", "running")),
    ("item i1", lambda r: r.item({"id": "i1", "msg": "look"})),
    ("unit b done", lambda r: r.unit("b", "done")),
    ("resolve i1", lambda r: r.resolve(["i1"])),
    ("unit c deps", lambda r: r.unit("c", "pending", deps=["a"])),
    ("unit c done", lambda r: r.unit("c", "done")),
    ("phase build done", lambda r: r.phase("build", "done")),
    ("finalize done", lambda r: r.finalize("done", result="all good")),
    ("re-init (archives)", lambda r: r.init("second", units=["x"])),
    ("unit x done", lambda r: r.unit("x", "done")),
]


def run_ops(runs_dir: Path, ops: list[tuple[str, Op]], ack: Callable[[int], None] | None = None,
            *, start: int = 0, fresh: bool = True) -> None:
    """Apply ``ops[start:]``, each through a fresh ``Run`` (as separate CLI calls would) unless
    ``fresh`` is false; ``ack(i)`` after op i returned (= acknowledged)."""
    run = api.open_run("proof", runs_dir=runs_dir)
    for i in range(start, len(ops)):
        if fresh:
            run = api.open_run("proof", runs_dir=runs_dir)
        ops[i][1](run)
        if fresh:
            run.handle.writer.close()
        if ack is not None:
            ack(i)
    run.handle.writer.close()


def reference_states(base: Path, ops: list[tuple[str, Op]]) -> list[dict[str, Any] | None]:
    """states[j] = the document after the first j ops (states[0] = no run)."""
    runs = base / "reference"
    runs.mkdir(parents=True)
    states: list[dict[str, Any] | None] = [None]

    def ack(i: int) -> None:
        states.append(load_state(runs / "proof.json"))

    run_ops(runs, ops, ack)
    return states


def count_calls(fn: Callable[[], object]) -> int:
    n = 0

    def hook(op: str, path: str) -> None:
        nonlocal n
        n += 1

    prev = fsio.set_fault_hook(hook)
    try:
        fn()
    finally:
        fsio.set_fault_hook(prev)
    return n


# --- forked children -------------------------------------------------------------------------


class Child:
    """A forked worker reporting acknowledgements through a pipe."""

    def __init__(self, body: Callable[[Callable[[str], None]], None], *, quiet: bool = False) -> None:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # child
            code = 0
            try:
                os.close(r)

                def ack(text: str) -> None:
                    os.write(w, text.encode() + b"\n")

                body(ack)
            except BaseException as exc:  # report, never fall back into the parent's code
                with contextlib.suppress(Exception):
                    if not quiet:
                        os.write(2, f"child error: {type(exc).__name__}: {exc}\n".encode())
                code = 70
            finally:
                os._exit(code)
        os.close(w)
        self.pid = pid
        self._r = r

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)

    def wait(self) -> tuple[list[str], int]:
        chunks = []
        while True:
            chunk = os.read(self._r, 65536)
            if not chunk:
                break
            chunks.append(chunk)
        os.close(self._r)
        _, status = os.waitpid(self.pid, 0)
        text = b"".join(chunks).decode()
        return [line for line in text.split("\n") if line], status


def kill_at_call(k: int) -> fsio.FaultHook:
    n = 0

    def hook(op: str, path: str) -> None:
        nonlocal n
        n += 1
        if n == k:
            os.kill(os.getpid(), signal.SIGKILL)

    return hook


@contextlib.contextmanager
def no_fsync() -> Iterator[None]:
    """Real fsync is irrelevant where durability is simulated (power-loss model) and costs time."""
    real = os.fsync
    os.fsync = lambda fd: None  # type: ignore[assignment]
    try:
        yield
    finally:
        os.fsync = real  # type: ignore[assignment]


# --- the power-loss model --------------------------------------------------------------------


class PowerLoss(BaseException):
    """Raised by the recorder at the chosen call; the process state after it is irrelevant."""


class PowerLossRecorder:
    """Tracks what is durable, the way a journaling filesystem in ordered mode can lose it.

    - file data is durable up to the content seen at its last completed fsync; bytes written
      after that may be dropped, torn at any byte, or kept;
    - a directory entry (create, rename, unlink, replace) is durable once its directory was
      fsynced; an unsynced entry change may be dropped or kept, independently per name.

    At the k-th hooked call (before it happens) ``image`` builds the disk a reboot would find,
    choosing every undetermined outcome at random, and raises ``PowerLoss``.
    """

    def __init__(self, root: Path, k: int, rng: random.Random, out: Path) -> None:
        self.root = root
        self.k = k
        self.rng = rng
        self.out = out
        self.n = 0
        self.data: dict[int, bytes] = {}
        self.dirs: dict[int, dict[str, tuple[int, bool]]] = {}
        for dirpath, _dirnames, _files in os.walk(root):
            self.dirs[os.stat(dirpath).st_ino] = self._listing(Path(dirpath))
        for dirpath, _dirnames, files in os.walk(root):
            for f in files:
                p = Path(dirpath) / f
                self.data[os.stat(p).st_ino] = p.read_bytes()

    @staticmethod
    def _listing(d: Path) -> dict[str, tuple[int, bool]]:
        out = {}
        for name in os.listdir(d):
            st = os.lstat(d / name)
            out[name] = (st.st_ino, stat.S_ISDIR(st.st_mode))
        return out

    def __call__(self, op: str, path: str) -> None:
        self.n += 1
        if self.n == self.k:
            self.image()
            raise PowerLoss()
        if op == "fsync":
            p = Path(path)
            self.data[os.stat(p).st_ino] = p.read_bytes()
        elif op == "fsync_dir":
            p = Path(path)
            self.dirs[os.stat(p).st_ino] = self._listing(p)

    def image(self) -> None:
        current: dict[int, Path] = {}
        for dirpath, dirnames, files in os.walk(self.root):
            for name in (*dirnames, *files):
                current[os.lstat(Path(dirpath) / name).st_ino] = Path(dirpath) / name
        self.out.mkdir(parents=True)
        self._build(os.stat(self.root).st_ino, self.root, self.out, current)

    def _build(self, dino: int, cur: Path | None, out: Path, current: dict[int, Path]) -> None:
        durable = self.dirs.get(dino, {})
        now = self._listing(cur) if cur is not None and cur.is_dir() else {}
        for name in sorted(set(durable) | set(now)):
            choices = {durable.get(name), now.get(name)}
            entry = self.rng.choice(sorted(choices, key=repr))
            if entry is None:
                continue
            ino, is_dir = entry
            if is_dir:
                (out / name).mkdir()
                self._build(ino, current.get(ino), out / name, current)
                continue
            path_now = current.get(ino)
            now_bytes = path_now.read_bytes() if path_now is not None and path_now.is_file() else None
            synced = self.data.get(ino, b"")
            if now_bytes is None or now_bytes == synced:
                content = synced if now_bytes is None else now_bytes
            elif len(now_bytes) >= len(synced):
                # Appended, or written over bytes the file had (the journal's padding): the
                # unsynced bytes are dropped, kept, or torn at any byte (a prefix of them kept).
                same = _common_prefix(synced, now_bytes)
                fate = self.rng.randrange(3)
                cut = same + self.rng.randrange(len(now_bytes) - same + 1)
                content = synced if fate == 0 else now_bytes if fate == 1 else (
                    now_bytes[:cut] + synced[cut:])
            else:
                content = self.rng.choice([synced, now_bytes])
            (out / name).write_bytes(content)


def _common_prefix(a: bytes, b: bytes) -> int:
    lo, hi = 0, min(len(a), len(b))  # a[:lo] == b[:lo]; binary search on slice equality (C speed)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


# --- fault injection for CLI children --------------------------------------------------------

FAULT_CHILD = Path(__file__).with_name("faultcli.py")


def tree_state(root: Path, *, skip: Callable[[Path], bool] = lambda p: False) -> dict[str, Any]:
    """Names, link targets and contents of everything under ``root`` (for "nothing changed")."""
    out: dict[str, Any] = {}
    for dirpath, dirnames, files in os.walk(root):
        for name in (*dirnames, *files):
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            if skip(p):
                continue
            if p.is_symlink():
                out[rel] = ("link", os.readlink(p))
            elif p.is_dir():
                out[rel] = ("dir",)
            else:
                out[rel] = ("file", p.read_bytes())
    return out


def errno_code(name: str) -> int:
    return int(getattr(errno, name))


def dumps(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
