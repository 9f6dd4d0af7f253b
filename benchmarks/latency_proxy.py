"""A TCP proxy on 127.0.0.1 that adds a set delay each way: workers connected to PostgreSQL through
it stand in for workers on other hosts (a round trip costs twice the delay more than on the
loopback), so what a design costs per round trip shows up in the figures and in the tests.

    with LatencyProxy(("127.0.0.1", 5432), delay=0.001) as proxy:
        url = proxy.url("postgresql://root@127.0.0.1:5432/db")   # the same database, 1 ms away

Every chunk read from one side is written to the other ``delay`` seconds after it arrived, in
order; bandwidth is not limited. ``requests()`` counts the chunks clients sent: each is a request
the client then waited on, or part of one (a round trip is at least one). The proxy runs an
asyncio loop in a process of its own and stops with the ``with`` block (its connections are closed).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any
from urllib.parse import urlsplit, urlunsplit


class LatencyProxy:
    """The proxy, in a process of its own: it never waits for the GIL of the process using it (a
    client spinning on a socket in the same process would hold it for the switch interval, 5 ms)."""

    def __init__(self, target: tuple[str, int], *, delay: float) -> None:
        self.target = target
        self.delay = delay
        self.port = 0
        self._process: Any = None
        self._sent: Any = None

    def url(self, url: str) -> str:
        """``url`` pointed at the proxy (host 127.0.0.1, the proxy's port)."""
        parts = urlsplit(url)
        user = f"{parts.username}@" if parts.username else ""
        return urlunsplit(parts._replace(netloc=f"{user}127.0.0.1:{self.port}"))

    def __enter__(self) -> LatencyProxy:
        import multiprocessing

        context = multiprocessing.get_context("spawn")
        ours, theirs = context.Pipe()
        self._sent = context.Value("q", 0, lock=False)
        self._process = context.Process(target=serve, args=(self.target, self.delay, theirs, self._sent), daemon=True,
                                        name="latency-proxy")
        self._process.start()
        if not ours.poll(30):
            self._process.kill()
            raise RuntimeError("the latency proxy did not start")
        self.port = int(ours.recv())
        return self

    def requests(self) -> int:
        """Chunks the clients have sent so far (through every connection)."""
        return int(self._sent.value) if self._sent is not None else 0

    def __exit__(self, *exc: object) -> None:
        if self._process is not None:
            self._process.terminate()
            self._process.join(10)
            self._process = None


def serve(target: tuple[str, int], delay: float, report: Any, sent: Any = None) -> None:
    """The proxy's process: listen on 127.0.0.1 (a free port, sent through ``report``) until killed;
    ``sent`` (a shared counter) counts the chunks clients send."""
    async def main() -> None:
        proxy = _Proxy(target, delay, sent)
        server = await asyncio.start_server(proxy.serve, "127.0.0.1", 0)
        report.send(server.sockets[0].getsockname()[1])
        async with server:
            await server.serve_forever()

    asyncio.run(main())


class _Proxy:
    def __init__(self, target: tuple[str, int], delay: float, sent: Any = None) -> None:
        self.target = target
        self.delay = delay
        self.sent = sent

    async def serve(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            server_reader, server_writer = await asyncio.open_connection(*self.target)
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(self._pump(client_reader, server_writer, self.sent),
                             self._pump(server_reader, client_writer), return_exceptions=True)

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, count: Any = None) -> None:
        """Copy ``reader`` to ``writer``, each chunk ``delay`` seconds after it was read."""
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def deliver() -> None:
            while True:
                due, data = await queue.get()
                if not data:
                    break
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                writer.write(data)
                await writer.drain()

        sender = asyncio.ensure_future(deliver())
        try:
            while True:
                data = await reader.read(65536)
                if count is not None and data:
                    count.value += 1
                await queue.put((time.monotonic() + self.delay, data))
                if not data:
                    break
            await sender
        except (OSError, asyncio.CancelledError):
            sender.cancel()
        finally:
            with contextlib.suppress(Exception):
                writer.close()


def round_trip(url: str, n: int = 50) -> float:
    """The median seconds of ``SELECT 1`` on ``url`` (to show what the proxy adds)."""
    import statistics

    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            conn.execute("SELECT 1").fetchone()
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv: Any = None) -> None:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default="postgresql://root@127.0.0.1:5432/postgres")
    ap.add_argument("--delay", type=float, default=0.001)
    args = ap.parse_args(argv)
    parts = urlsplit(args.url)
    with LatencyProxy((parts.hostname or "127.0.0.1", parts.port or 5432), delay=args.delay) as proxy:
        print(f"direct {round_trip(args.url) * 1e3:.2f} ms, through the proxy"
              f" {round_trip(proxy.url(args.url)) * 1e3:.2f} ms a round trip")


if __name__ == "__main__":
    main()
