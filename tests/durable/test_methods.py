"""@run.step on methods: ``self`` is part of the key (a dataclass by its fields, any class by its
``__resumable_key__``), ``run.map`` takes an instance's method, and an instance without a key is
refused in one line saying how to give it one."""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import resumable
from resumable.durable import UnkeyableArguments
from resumable.errors import InvalidInputError

from .helpers import python, read_doc, step_units


def open_run(runs: Path) -> resumable.Run:
    return resumable.open_run("r", runs_dir=runs, task="t")


def test_a_dataclass_whose_instances_are_the_configuration(runs: Path) -> None:
    run = open_run(runs)
    calls: list[tuple[float, int]] = []

    @dataclasses.dataclass(frozen=True)
    class Trainer:
        lr: float
        epochs: int

        @run.step
        def train(self, seed: int) -> np.ndarray:
            calls.append((self.lr, seed))
            return np.full(2, self.lr * seed)

    fast, slow = Trainer(0.1, 3), Trainer(0.01, 3)
    assert fast.train(1).tolist() == [0.1, 0.1]
    assert slow.train(1).tolist() == [0.01, 0.01]
    assert Trainer(0.1, 3).train(1).tolist() == [0.1, 0.1]  # an equal instance: the same calls
    assert calls == [(0.1, 1), (0.01, 1)]
    assert run.map(fast.train, [1, 2, 3], progress=False)[2].tolist() == [0.30000000000000004] * 2
    assert calls == [(0.1, 1), (0.01, 1), (0.1, 2), (0.1, 3)]
    ids = sorted(step_units(read_doc(runs, "r")))
    assert len(ids) == 4 and all(uid.startswith("Trainer.train:") for uid in ids)
    assert read_doc(runs, "r")["maps"]["Trainer.train"]["units"] == 4


def test_a_class_declares_what_identifies_an_instance(runs: Path) -> None:
    run = open_run(runs)
    calls: list[str] = []

    class Client:
        def __init__(self, model: str) -> None:
            self.model = model
            self.session = object()  # a connection: not part of what the calls mean

        def __resumable_key__(self) -> str:
            return self.model

        @run.step(retries=1, backoff=0)
        def ask(self, prompt: str) -> str:
            calls.append(prompt)
            return f"{self.model}: {prompt}"

    assert Client("m1").ask("hi") == Client("m1").ask("hi") == "m1: hi"
    assert Client("m2").ask("hi") == "m2: hi"
    assert calls == ["hi", "hi"]


def test_an_instance_without_a_key_is_refused_with_the_ways_to_give_one(runs: Path) -> None:
    run = open_run(runs)

    class Plain:
        @run.step
        def go(self, x: int) -> int:
            return x

    with pytest.raises(UnkeyableArguments) as caught:
        Plain().go(1)
    message = str(caught.value)
    assert message.startswith("step Plain.go: argument 'self' is a ") and "Plain, which has no content key" in message
    assert "__resumable_key__" in message and "key=" in message


def test_a_method_of_one_instance_is_refused_as_a_step(runs: Path) -> None:
    run = open_run(runs)

    @dataclasses.dataclass
    class Model:
        k: int

        def predict(self, x: int) -> int:
            return x + self.k

    with pytest.raises(InvalidInputError, match="is a method of one instance: decorate the function in its class body"):
        run.step(Model(1).predict)
    Model.predict = run.step(Model.predict)  # type: ignore[method-assign]  # decorated after the class: fine
    assert Model(2).predict(1) == 3


def test_classmethods_and_staticmethods(runs: Path) -> None:
    run = open_run(runs)

    class Tools:
        @classmethod
        @run.step
        def make(cls, n: int) -> str:
            return f"{cls.__name__}{n}"

        @staticmethod
        @run.step
        def double(n: int) -> int:
            return 2 * n

    assert Tools.make(1) == "Tools1" and Tools.double(2) == 4
    assert run.map(Tools.make, [2, 3], progress=False) == ["Tools2", "Tools3"]


SCRIPT = textwrap.dedent('''
    import dataclasses, sys
    import numpy as np
    import resumable

    with resumable.open_run("p", runs_dir=sys.argv[1], task="t") as run:
        @dataclasses.dataclass(frozen=True)
        class Scaler:
            factor: float

            @run.step
            def apply(self, x: np.ndarray) -> np.ndarray:
                with open(sys.argv[2], "a") as log:
                    log.write("ran\\n")
                return x * self.factor

        if __name__ == "__main__":
            out = run.map(Scaler(2.0).apply, [np.arange(3) + i for i in range(6)], executor="process", jobs=2)
            print(sum(float(o.sum()) for o in out))
''')


def test_a_method_step_on_worker_processes(tmp_path: Path) -> None:
    script, log = tmp_path / "scale.py", tmp_path / "exec.log"
    script.write_text(SCRIPT)
    outputs: list[Any] = []
    for _ in range(2):
        proc = python([str(script), str(tmp_path / "runs"), str(log)], tmp_path)
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        outputs.append(out.strip())
    assert outputs == ["126.0", "126.0"]
    assert log.read_text().count("ran") == 6  # the second run executed nothing
