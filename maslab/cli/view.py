"""``maslab view``: the local web viewer over run directories (see :mod:`maslab.viewer`)."""

from __future__ import annotations

import argparse
import asyncio
import sys
import threading
from pathlib import Path

from maslab.cli.commands import about
from maslab.cli.console import console, number
from maslab.cli.reading import SCORING_HELP


def cmd_view(args: argparse.Namespace) -> int:
    import webbrowser

    from maslab.viewer.app import serve
    from maslab.viewer.runs import Run

    runs = [Run.open(i, path, args.scoring) for i, path in enumerate(args.runs)]

    def ready(url: str) -> None:
        count = f"{len(runs)} run{'s' * (len(runs) != 1)}"
        console.print(f"maslab view: {url} ({count}; Ctrl-C stops it)", highlight=False)
        sys.stdout.flush()
        if not args.no_browser:  # a console browser would block: open it beside the server
            threading.Thread(target=webbrowser.open, args=(url,), daemon=True).start()

    try:
        asyncio.run(serve(runs, args.port, ready))
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: how a viewer is meant to stop
        console.print("maslab view: stopped")
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("view", help=about("view"))
    p.add_argument("runs", nargs="+", type=Path)
    p.add_argument("--port", type=number(int, 0, 65535), default=8765, help="0 picks a free port")
    p.add_argument("--no-browser", action="store_true", help="do not open a web browser")
    p.add_argument("--scoring", metavar="LABEL", help=f"{SCORING_HELP}, in each run")
    p.set_defaults(func=cmd_view)
