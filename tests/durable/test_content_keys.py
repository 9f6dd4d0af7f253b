"""Arguments keyed by content: numpy arrays, pandas objects, dataclasses, attrs and pydantic models,
bytes, paths, ``self``. The key of a value is the same in every process, run and Python (golden keys:
a change of any rule fails here), equal values get equal keys and different ones different keys, and
numpy and pandas are never imported to key anything else."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

from resumable.durable.content import TAG, Normalizer, call_key, custom_key, normal_text
from resumable.durable.keys import UnkeyableArguments, arguments_key

from .helpers import HERE, SRC
from .keycases import Config, Declared, Item, Point, cases

# Golden keys: a change here re-runs every user's recorded steps. Never change one without a
# migration story (docs/durable.md states the rules they follow).
GOLDEN = {
    "f8 array": "18a7c4077d3aa569dbe4",
    "i4 array": "743251dfc81520865634",
    "bool 0-d": "6751b681b6ea3c8fa3d5",
    "str array": "713078d3e8fe85c07d4b",
    "datetime array": "00de8ae81706061bc0e2",
    "structured": "39a338a79af6afef5a89",
    "object array": "dfcc51e533c0dc521f1d",
    "numpy scalars": "43a43067001cef34f3a7",
    "dataclass": "7dbac3f5f67b89a6f969",
    "attrs": "bf0029c8cac1357b7bc6",
    "pydantic": "6534dab5084290c2df53",
    "bytes": "0f5e527d8f934c41ebc9",
    "path": "6b12912f701797efff05",
    "enum set nan": "d80fce31df07a84a20d1",
    "dates": "6d7a2d72ecfde18a2f8e",
    "decimal uuid": "e48e9b4ce1a789217ae5",
    "int keys": "3291b2e1fb282ae4ee09",
    "nul string": "33b5ab3c01630e4c47a2",
    "dataframe": "c1b7ea64e95f3272e1ee",
    "series": "d70ed68076a712b6e03f",
}


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_golden_content_keys(name: str) -> None:
    assert call_key(cases()[name], "s") == GOLDEN[name]


def test_the_golden_keys_are_the_same_in_a_fresh_process() -> None:
    """Another interpreter (hash randomisation, its own imports) computes the same keys."""
    code = ("from keycases import cases\n"
            "from resumable.durable.content import call_key\n"
            "for name, bound in sorted(cases().items()): print(name, call_key(bound, 's'))\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), str(HERE)]), "PYTHONHASHSEED": "12345"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    got = dict(line.rsplit(" ", 1) for line in proc.stdout.splitlines())
    assert got == GOLDEN


def test_plain_json_arguments_keep_the_keys_they_had() -> None:
    bound = {"doc_id": "abc"}
    assert call_key(bound, "s") == arguments_key(bound, "s") == "f36dfe95e28c78662f91"


def norm(value: Any, paths: str = "name") -> str:
    return normal_text(Normalizer(paths).norm(value, "v"))


def test_an_array_is_keyed_by_dtype_shape_and_bytes_in_c_order() -> None:
    a = np.arange(12, dtype=np.float64).reshape(3, 4)
    assert norm(a) == norm(a.copy()) == norm(np.asfortranarray(a))  # memory order is not content
    assert norm(a[:, ::2]) == norm(np.ascontiguousarray(a[:, ::2]))  # a strided view: its values
    assert norm(a) != norm(a.astype(np.float32))
    assert norm(a) != norm(a.reshape(4, 3))
    assert norm(a) != norm(a.astype(">f8"))  # byte order is part of the dtype
    b = a.copy()
    b[2, 3] += 1e-12
    assert norm(a) != norm(b)
    assert norm(np.zeros((0, 3))) != norm(np.zeros((3, 0)))


def test_records_are_keyed_by_their_compared_fields() -> None:
    assert norm(Config(0.1, (1,), note="a")) == norm(Config(0.1, (1,), note="b"))
    assert norm(Config(0.1, (1,))) != norm(Config(0.2, (1,)))
    assert norm(Point(1, 2)) != norm(Point(2, 1))
    assert norm(Item(name="a", qty=1)) != norm(Item(name="a", qty=2))
    assert norm(Declared("x", cache=object())) == norm(Declared("x", cache=[1, 2]))
    assert norm(Declared("x", None)) != norm(Declared("y", None))


def test_a_string_like_a_tag_is_not_mistaken_for_one() -> None:
    array = np.zeros(1)
    forged = normal_text(Normalizer().norm(array, "v"))
    assert norm([TAG + "ndarray", "<f8", [1], "0" * 64]) != forged
    assert norm("\x00bytes") != norm("\x00\x00bytes") and norm({"k": "\x00x"}) != norm({"k": "\x00\x00x"})
    # A plain JSON call and a call with content never share a key.
    assert call_key({"a": [TAG + "bytes", "x"]}, "s") != call_key({"a": b"x"}, "s")


def test_paths_by_name_or_by_content(tmp_path: pathlib.Path) -> None:
    data = tmp_path / "data.csv"
    data.write_text("a,b\n1,2\n")
    by_name = norm(data)
    by_content = norm(data, "content")
    data.write_text("a,b\n1,3\n")
    assert norm(data) == by_name and norm(data, "content") != by_content
    moved = tmp_path / "moved.csv"
    data.rename(moved)
    assert norm(moved, "content") == norm(pathlib.Path(str(moved)), "content") != by_content
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "sub" / "f").write_text("x")
    (tree / "link").symlink_to("sub/f")
    before = norm(tree, "content")
    (tree / "sub" / "f").write_text("y")
    assert norm(tree, "content") != before


def test_a_special_file_is_refused_never_read(tmp_path: pathlib.Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    link = tmp_path / "zero"
    link.symlink_to("/dev/zero")
    for path in (fifo, link):
        with pytest.raises(UnkeyableArguments, match="not a regular file or a directory"):
            norm(path, "content")
    with pytest.raises(UnkeyableArguments, match="cannot read"):
        norm(tmp_path / "missing", "content")


@pytest.mark.parametrize("value", [object(), np.ma.masked_array([1, 2], mask=[0, 1]), {"a": (x for x in ())}])
def test_values_without_a_content_key_are_refused_in_one_line(value: Any) -> None:
    with pytest.raises(UnkeyableArguments) as caught:
        call_key({"x": value}, "embed")
    message = str(caught.value)
    assert message.startswith("step embed: argument 'x'") and "\n" not in message
    assert "key=" in message


def test_a_key_function_may_return_content_too() -> None:
    a = np.arange(3)
    assert custom_key(a, "s") == custom_key(a.copy(), "s") != custom_key(a + 1, "s")
    assert custom_key("doc-1", "s") == "doc-1"


def test_keying_loads_no_package_it_does_not_need() -> None:
    code = ("import sys\n"
            "from resumable.durable.content import call_key\n"
            "import dataclasses\n"
            "@dataclasses.dataclass\n"
            "class C:\n"
            "    x: bytes\n"
            "call_key({'c': C(b'x'), 'p': __import__('pathlib').Path('a'), 's': {1, 2}}, 's')\n"
            "print(sorted(m for m in ('numpy', 'pandas', 'attr', 'pydantic') if m in sys.modules))\n")
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "[]\n", "")


def test_hashing_a_large_array_makes_no_copy_of_it() -> None:
    import tracemalloc

    a = np.ones(4_000_000)  # 32 MB
    tracemalloc.start()
    try:
        norm(a)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000


def test_a_step_that_keys_paths_by_content(runs: pathlib.Path, tmp_path: pathlib.Path) -> None:
    import resumable
    from resumable.errors import InvalidInputError

    run = resumable.open_run("r", runs_dir=runs, task="t")
    calls: list[str] = []

    @run.step(paths="content")
    def count_lines(path: pathlib.Path) -> int:
        calls.append(path.name)
        return len(path.read_text().splitlines())

    data = tmp_path / "a.csv"
    data.write_text("x\ny\n")
    assert count_lines(data) == 2
    moved = data.rename(tmp_path / "b.csv")
    assert count_lines(moved) == 2 and calls == ["a.csv"]  # the same bytes: the same call
    moved.write_text("x\ny\nz\n")
    assert count_lines(moved) == 3 and calls == ["a.csv", "b.csv"]  # new bytes: a new call
    with pytest.raises(InvalidInputError, match=r"paths='bytes': use 'name' .* or 'content'"):
        run.step(lambda p: p, name="bad", paths="bytes")
