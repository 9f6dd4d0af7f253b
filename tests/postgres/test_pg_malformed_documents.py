"""A malformed run document is refused in one line by every reader, in both stores (the readers'
handles share one check, ``core.model.refuse_unreadable``). The document is planted as an
import would adopt it: a ``base`` event carrying it."""

from __future__ import annotations

import pytest
from pgtests import assert_error
from storecase import StoreCase

import resumable


def _plant(store: StoreCase, doc: dict[str, object]) -> None:
    kw = {"store_url": store.url} if store.kind == "postgres" else {"runs_dir": store.runs}
    run = resumable.open_run("r", **kw)  # type: ignore[arg-type]
    run.init("t", units=["a"])
    run.handle.commit([{"t": "base", "at": "2026-01-01T00:00:00Z", "reason": "import", "doc": doc}])
    run.close()


@pytest.mark.parametrize("store", ["files", "postgres"], indirect=True)
def test_a_malformed_document_is_refused_by_every_reader(store: StoreCase) -> None:
    _plant(store, {"schemaVersion": 2, "id": "r", "task": "t", "status": "running", "units": 5})
    before = store.state()
    for args in (["get", "r"], ["resume", "r"], ["status", "r"], ["get", "r", "--summary"]):
        assert_error(store.r(*args), 1, "run r is malformed: 'units' is a number, not an object")
    assert store.state() == before
