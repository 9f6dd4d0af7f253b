"""The docs site builds with `mkdocs build --strict` (a broken link, a missing anchor, a page left
out of the nav fail it), its CLI reference documents every command, and three of its pages, served
over HTTP on 127.0.0.1, render in headless Chromium with no console message and no failed request.

Chromium is Debian's (/usr/bin/chromium; .ci/run installs it): under CI=true a missing one fails
these tests, elsewhere they are skipped with one line."""

from __future__ import annotations

import http.server
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from docpages import DOCS, ROOT

from corehelpers import needs

CHROMIUM = "/usr/bin/chromium"
needs_chromium = needs(CHROMIUM, ".ci/run installs it with apt-get install -y chromium")
# The pages shot: the home page, Getting started (the pictures, code blocks), the generated CLI reference.
PAGES = ["", "getting-started/", "reference/cli/"]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run([str(Path(sys.executable).parent / "mkdocs"), "build", "--strict", "--site-dir", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return out


class Server:
    """The built site over HTTP on 127.0.0.1 (a port the kernel picks), recording every request."""

    def __init__(self, root: Path) -> None:
        self.requests: list[tuple[str, int]] = []
        requests = self.requests

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args: object, **kwargs: object) -> None:
                super().__init__(*args, directory=str(root), **kwargs)  # type: ignore[arg-type]

            def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
                requests.append((self.path, int(code) if str(code).isdigit() else 0))

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def served(site: Path) -> Iterator[Server]:
    server = Server(site)
    try:
        yield server
    finally:
        server.close()


def chromium(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync",
         "--disable-background-networking", "--disable-component-update", "--disable-extensions",
         f"--user-data-dir={tmp / 'profile'}", "--enable-logging=stderr", "--v=0", "--window-size=1280,900",
         "--virtual-time-budget=4000", *args],
        capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": str(tmp)}, check=False)


def console_messages(stderr: str) -> list[str]:
    """What the pages said on their console (Chromium logs each message as INFO:CONSOLE)."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


def test_the_cli_reference_documents_every_command() -> None:
    from resumable.cli.main import LAZY_COMMANDS

    page = (DOCS / "reference" / "cli.md").read_text()
    for name, (module, attr, _) in LAZY_COMMANDS.items():
        assert f":module: {module}\n    :command: {attr}\n    :prog_name: resumable {name}\n" in page, name
    assert "<!-- low-level-verbs -->" in page  # the low-level verbs, from their --help table (docs/_hooks)


def test_the_built_cli_reference_shows_every_command_and_option(site: Path) -> None:
    from resumable.cli.main import LAZY_COMMANDS, VERBS

    html = (site / "reference" / "cli" / "index.html").read_text()
    for name in [*LAZY_COMMANDS, *VERBS]:
        assert f'id="resumable-{name}"' in html, name
    for option in ("--dry-run", "--explain", "--keep-going", "--watch", "--store", "--require-validation"):
        assert option in html, option
    assert "Sentinel" not in html  # click's marker for "no default" is never shown as one


@needs_chromium
@pytest.mark.parametrize("page", PAGES, ids=lambda p: p or "home")
def test_the_page_renders_without_console_errors(page: str, served: Server, tmp_path: Path) -> None:
    shot = tmp_path / "page.png"
    proc = chromium(tmp_path, f"--screenshot={shot}", served.url + page)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000  # not a blank page
    assert console_messages(proc.stderr) == []
    failed = [(path, code) for path, code in served.requests if code >= 400]
    assert failed == [], failed
    loaded = [path for path, _ in served.requests]
    assert f"/{page}" in loaded and any(re.search(r"/assets/javascripts/bundle\.[0-9a-f]+\.min\.js", p)
                                        for p in loaded), loaded
    if page == "getting-started/":
        assert "/images/status-failed.svg" in loaded


@needs_chromium
def test_the_site_shows_its_navigation(served: Server, tmp_path: Path) -> None:
    proc = chromium(tmp_path, "--dump-dom", served.url)
    assert proc.returncode == 0, proc.stderr[-3000:]
    dom = proc.stdout
    assert 'class="md-nav' in dom
    for title in ("Getting started", "Guides", "Coming from another tool", "Reference", "Explanations",
                  "Performance", "The step runner", "Durable Python functions"):
        assert f">{title}<" in dom or f"> {title} <" in dom or re.search(rf">\s*{re.escape(title)}\s*<", dom), title


@needs_chromium
def test_a_console_error_would_be_caught(served: Server, site: Path, tmp_path: Path) -> None:
    """The check above can fail: a page that logs an error and loads a missing file is caught."""
    (site / "broken.html").write_text('<html><body><img src="missing.png">'
                                      '<script>console.error("broken page")</script></body></html>')
    proc = chromium(tmp_path, f"--screenshot={tmp_path / 'b.png'}", served.url + "broken.html")
    (site / "broken.html").unlink()
    assert any("broken page" in line for line in console_messages(proc.stderr)), proc.stderr[-3000:]
    assert ("/missing.png", 404) in served.requests


def test_the_diagram_of_the_parts_is_the_layering_contract() -> None:
    """docs/images/architecture.svg is drawn from pyproject.toml's layers (scripts/docs-pictures
    architecture): a layer added or moved there without redrawing it fails here."""
    import tomllib

    contract = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"][0]
    layers = [m.strip() for layer in contract["layers"] for m in layer.split("|")]
    svg = (DOCS / "images" / "architecture.svg").read_text()
    drawn = [name for name in re.findall(r'font-weight="bold"[^>]*>(resumable\.[\w.]+)<', svg)
             if name.count(".") == 1]
    assert drawn == layers, (drawn, layers)
    for picture in ("run-live.svg", "status-watch.svg", "status-failed.svg", "report.png"):
        assert (DOCS / "images" / picture).stat().st_size > 2000, picture  # made by scripts/docs-pictures
