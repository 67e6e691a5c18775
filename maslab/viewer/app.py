"""The viewer's aiohttp application and server, on 127.0.0.1 only.

``/`` is the leaderboard and the filtered sample list (see :class:`Filters` for its query
string), ``/sample?run=N&task=ID&repeat=R&back=QUERY`` one transcript, with links to the
samples before and after it in the list that ``back`` filters. Every page is redacted like the
report, and sent with a Content-Security-Policy that allows no script and no request elsewhere.
A request whose ``Host`` is not 127.0.0.1 or localhost gets 421 and nothing else.
"""

from __future__ import annotations

import asyncio
import errno
from collections.abc import Awaitable, Callable, Sequence
from html import escape
from urllib.parse import parse_qsl

from aiohttp import web
from yarl import URL

from maslab.analysis.triage import SIGNALS
from maslab.errors import ConfigError
from maslab.secrets import redact
from maslab.store.run_store import Key
from maslab.viewer import pages
from maslab.viewer.filters import Filters, select, whole_number
from maslab.viewer.runs import Run, name_runs
from maslab.viewer.search import Snippet, search

HOST = "127.0.0.1"
KNOWN_HOSTS = frozenset({HOST, "localhost"})
"""The host names the viewer answers to. A page elsewhere that points a name of its own at
127.0.0.1 (DNS rebinding) sends that name in ``Host``, and gets nothing."""
RUNS = web.AppKey("runs", list[Run])
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_POLICY = (
    "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; base-uri 'none'; "
    "frame-ancestors 'none'"
)


def _html(title: str, body: str, status: int = 200) -> web.Response:
    return web.Response(
        text=redact(pages.page(title, body)),
        status=status,
        content_type="text/html",
        headers={"Content-Security-Policy": _POLICY, "X-Content-Type-Options": "nosniff"},
    )


def _runs(request: web.Request) -> list[Run]:
    """The app's runs, each read again if its results changed since the last request."""
    runs = request.app[RUNS]
    for run in runs:
        run.refresh()
    return runs


def _signals(runs: Sequence[Run]) -> dict[str, str]:
    """Signal name -> description: the documented signals and any other a record holds."""
    seen = sorted({name for run in runs for name in run.signals} - SIGNALS.keys())
    return {**SIGNALS, **dict.fromkeys(seen, "")}


async def _found(runs: Sequence[Run], query: str) -> dict[int, dict[Key, Snippet]]:
    """Run number -> the keys whose transcript holds ``query``, each with where; a new query
    streams each run's traces in a worker thread, so other pages are served meanwhile."""
    found = {}
    for run in runs:
        if (keys := run.searched(query)) is None:
            keys = await asyncio.to_thread(search, run.traces_path, query)
            run.remember(query, keys)
        found[run.number] = keys
    return found


async def index(request: web.Request) -> web.Response:
    runs = _runs(request)
    filters = Filters.parse(request.query, len(runs))
    found = await _found(filters.runs(runs), filters.q) if filters.q else None
    rows = select(runs, filters, found)
    signals = _signals(runs)
    scoring = next((run.scoring for run in runs if run.scoring), None)
    verdicts = f" · the verdicts of scoring {escape(scoring)}" if scoring else ""
    body = (
        f'<h1>maslab view</h1><p class="muted">{len(runs)} run{"s" * (len(runs) != 1)}'
        f"{verdicts}</p>"
        f"<h2>Leaderboard</h2>{pages.leaderboard(runs)}"
        f"<h2>Samples</h2>{pages.filter_form(runs, filters, signals)}"
        f"{pages.sample_list(rows, filters, signals, found)}"
    )
    return _html("maslab view", body)


async def sample(request: web.Request) -> web.Response:
    runs = _runs(request)
    number = whole_number(request.query.get("run", ""))
    repeat = whole_number(request.query.get("repeat", ""))
    task = request.query.get("task", "")
    run = runs[number] if number is not None and number < len(runs) else None
    record = run.record((task, repeat)) if run and repeat is not None else None
    if run is None or record is None:
        body = '<p><a href="/">← samples</a></p><p>No such sample.</p>'
        return _html("not found · maslab view", body, status=404)
    trace = run.trace(record.key)
    back = request.query.get("back", "")
    neighbours = await _neighbours(runs, run, record.key, back)
    body = pages.transcript(run, record, trace, back, _signals(runs), neighbours)
    return _html(f"{task} · maslab view", body)


async def _neighbours(
    runs: Sequence[Run], run: Run, key: Key, back: str
) -> tuple[str | None, str | None]:
    """The addresses of the samples before and after ``run``'s ``key`` in the list that the
    query string ``back`` filters (None: none, or the sample is not in it)."""
    filters = Filters.parse(dict(parse_qsl(back)), len(runs))
    found = await _found(filters.runs(runs), filters.q) if filters.q else None
    rows = select(runs, filters, found)
    at = next((i for i, (r, record) in enumerate(rows) if r is run and record.key == key), None)
    if at is None:
        return None, None
    near = [rows[i] if 0 <= i < len(rows) else None for i in (at - 1, at + 1)]
    links = [pages.sample_link(*row, filters) if row else None for row in near]
    return links[0], links[1]


@web.middleware
async def _known_host_only(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Answer a request only if it names the viewer by one of :data:`KNOWN_HOSTS`."""
    try:
        name = URL(f"http://{request.host}").host
    except ValueError:
        name = None
    if name not in KNOWN_HOSTS:
        return web.Response(
            status=421, text=f"maslab view answers only to {' or '.join(sorted(KNOWN_HOSTS))}\n"
        )
    return await handler(request)


def make_app(runs: list[Run]) -> web.Application:
    name_runs(runs)
    app = web.Application(middlewares=[_known_host_only])
    app[RUNS] = runs
    app.router.add_get("/", index)
    app.router.add_get("/sample", sample)
    return app


async def start(runs: list[Run], port: int) -> tuple[web.AppRunner, str]:
    """Serve ``runs`` on 127.0.0.1:``port`` (0: a free port); (the runner, the viewer's URL).

    Raises ConfigError (one line) when the port cannot be had."""
    runner = web.AppRunner(make_app(runs), access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, HOST, port).start()
    except OSError as exc:
        await runner.cleanup()
        if exc.errno == errno.EADDRINUSE:
            raise ConfigError(
                f"port {port} on {HOST} is taken; pass --port with another (0 picks a free one)"
            ) from None
        raise ConfigError(f"cannot listen on {HOST}:{port} ({exc.strerror or exc})") from None
    return runner, f"http://{HOST}:{runner.addresses[0][1]}/"


async def serve(runs: list[Run], port: int, ready: Callable[[str], None]) -> None:
    """Serve ``runs`` until cancelled (Ctrl-C); ``ready`` gets the URL once it is listening."""
    runner, url = await start(runs, port)
    try:
        ready(url)
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
