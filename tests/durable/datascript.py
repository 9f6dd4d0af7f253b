"""Data and ML code as a user writes it, without a single ``key=`` or serializer option: numpy arrays
and a dataclass configuration go into steps, arrays and dataclasses come out, and a method of a
dataclass whose instances are the model is a step too.

    python datascript.py RUNS_DIR EXEC_LOG OUT N

Every execution appends "<pid> <step> <time>" to EXEC_LOG (O_APPEND: a whole line or nothing), so a
test can count executions and kill the script once some are recorded. At the end the script writes
every result it got (pickled) to OUT, for the test to compare runs element by element.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import sys
import time

import numpy as np

import resumable

RUNS, EXEC_LOG, OUT, N = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])


def log(step: str) -> None:
    fd = os.open(EXEC_LOG, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, f"{os.getpid()} {step} {time.time()}\n".encode())
    finally:
        os.close(fd)
    time.sleep(float(os.environ.get("ITEM_SLEEP", "0.01")))


@dataclasses.dataclass(frozen=True)
class Config:
    scale: float
    clip: tuple[float, float]
    name: str


@dataclasses.dataclass
class Summary:
    mean: np.ndarray
    spread: float
    config: Config


def sample(i: int) -> np.ndarray:
    return np.random.default_rng(i).normal(size=(8, 3))


with resumable.open_run("data", runs_dir=RUNS, task="normalise, summarise and predict") as run:

    @run.step
    def normalise(x: np.ndarray, cfg: Config) -> np.ndarray:
        log("normalise")
        return np.clip((x - x.mean(axis=0)) * cfg.scale, *cfg.clip)

    @run.step
    def summarise(x: np.ndarray, cfg: Config) -> Summary:
        log("summarise")
        return Summary(mean=x.mean(axis=0), spread=float(x.std()), config=cfg)

    @dataclasses.dataclass(frozen=True)
    class Model:  # its instances are the configuration: a method step is keyed by their fields
        weights: np.ndarray
        bias: float

        @run.step
        def predict(self, x: np.ndarray) -> np.ndarray:
            log("predict")
            return x @ self.weights + self.bias

    cfg = Config(scale=2.0, clip=(-3.0, 3.0), name="baseline")
    inputs = [sample(i) for i in range(N)]
    normalised = run.map(normalise, inputs, [cfg] * N, jobs=4, progress=False)
    summaries = [summarise(x, cfg) for x in normalised]
    model = Model(weights=np.linspace(-1.0, 1.0, 3), bias=0.25)
    predictions = run.map(model.predict, normalised, jobs=4, progress=False)
    status = run.finish()
    with open(OUT, "wb") as f:
        # Plain values (a test process cannot import this script's classes): each summary's fields,
        # and the types the calls returned.
        pickle.dump({"normalised": normalised, "predictions": predictions,
                     "summaries": [dataclasses.asdict(s) for s in summaries],
                     "types": sorted({f"{type(s).__name__}/{type(s.config).__name__}" for s in summaries})}, f)
    print(status)
