"""Command-line plumbing shared by the benchmark entry points."""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from benchmarks import fscreate
from benchmarks.fsinfo import describe_or_refuse

REPO = Path(__file__).resolve().parent.parent


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--dir", default=str(REPO),
                   help="measure in a scratch directory created under DIR (default: the repo)")
    p.add_argument("--allow-tmpfs", action="store_true",
                   help="measure even on tmpfs (fsync is free there: ratios become meaningless)")
    return p


@contextmanager
def scratch(base: str, allow_tmpfs: bool, *, settle: bool = False) -> Iterator[tuple[Path, str]]:
    """A scratch directory under ``base``, removed afterwards. ``settle``: for a benchmark that
    creates a file per step, first wait for file creation to cost what it normally does
    (``fscreate``)."""
    Path(base).mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".proof-work-", dir=base))
    try:
        fs = describe_or_refuse(str(work), allow_tmpfs)
        print(f"filesystem: {fs}", flush=True)
        print(f"python: {sys.version.split()[0]} ({sys.executable})", flush=True)
        if settle:
            print(fscreate.settle(work), flush=True)
        yield work, fs
    finally:
        shutil.rmtree(work, ignore_errors=True)


def precompile() -> None:
    """Byte-compile resumable and click, as pip does when it installs them. With
    PYTHONDONTWRITEBYTECODE set (as on CI machines) nothing is ever written, and every command
    would compile every module it imports anew, about a quarter of a second that no installed copy
    pays."""
    import compileall
    import importlib.util

    for name in ("resumable", "click"):
        spec = importlib.util.find_spec(name)
        for where in (spec.submodule_search_locations or []) if spec is not None else []:
            compileall.compile_dir(where, quiet=1)
