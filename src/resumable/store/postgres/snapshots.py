"""Snapshot refreshes on a thread of their own, with a database connection of their own.

A refresh reads the run's document and stores it whole: on a large run, tens of milliseconds of
work. Done on the worker's recorder thread, it held up the transactions that record outcomes and
bring the next claims, and the worker's slots ran out of claims meanwhile. Here it goes on beside
them; a run asked for again while its refresh waits is refreshed once. A refresh that fails is
left to the next numbering that finds the events after the snapshot outgrowing it.
"""

from __future__ import annotations

import queue
import threading

from resumable.errors import ResumableError
from resumable.store.postgres.append import refresh_snapshot
from resumable.store.postgres.place import Place


class Refresher:
    def __init__(self, url: str) -> None:
        self._place = Place(url)  # its own handles (documents) and connection: nothing is shared
        self._asked: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._waiting: set[str] = set()
        self._lock = threading.Lock()
        self._closing = False
        self._thread = threading.Thread(target=self._run, name="resumable-snapshots", daemon=True)
        self._thread.start()

    def ask(self, run_id: str) -> None:
        with self._lock:
            if self._closing or run_id in self._waiting:
                return
            self._waiting.add(run_id)
        self._asked.put(run_id)

    def _run(self) -> None:
        while True:
            run_id = self._asked.get()
            with self._lock:
                if run_id is None or self._closing:
                    return
                self._waiting.discard(run_id)
            try:
                refresh_snapshot(self._place, run_id)
            except ResumableError:
                pass  # the next numbering that finds the snapshot outgrown asks again

    def close(self) -> None:
        """Finish the refresh under way (the ones still waiting are left: see the module docstring)."""
        with self._lock:
            self._closing = True
        self._asked.put(None)
        self._thread.join()
        self._place.close()
