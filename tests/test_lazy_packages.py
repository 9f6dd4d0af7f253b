"""Packages that load their names on first use still show them: ``dir()``, ``help()`` and an
editor's completion list every exported name, and listing them loads nothing."""

from __future__ import annotations

import subprocess
import sys

import pytest

PACKAGES = {"resumable": "resumable.api", "resumable.ledger": "resumable.ledger.api"}


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_dir_lists_every_lazy_name_without_loading_it(package: str) -> None:
    code = f"""
import sys, rlcompleter
import {package} as pkg
names = dir(pkg)
assert set(pkg.__all__) <= set(names), sorted(set(pkg.__all__) - set(names))
assert names == sorted(names)
assert {PACKAGES[package]!r} not in sys.modules, "dir() loaded the API"
# rlcompleter (the interactive interpreter's completion) offers them too.
prefix = "pkg.r"
offered, state = [], 0
completer = rlcompleter.Completer({{"pkg": pkg}})
while (word := completer.complete(prefix, state)) is not None:
    offered.append(word)
    state += 1
wanted = sorted("pkg." + n for n in pkg.__all__ if n.startswith("r"))
assert set(wanted) <= {{w.rstrip("(") for w in offered}}, (wanted, offered)
# Every name listed resolves to what its module defines.
for name in pkg.__all__:
    getattr(pkg, name)
print("ok")
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "ok\n", "")


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    import resumable.ledger

    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        resumable.ledger.nope  # noqa: B018
