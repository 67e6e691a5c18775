"""What maslab knows and keeps: ``maslab list``, ``data`` and ``cache``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.table import Table

from maslab import defaults
from maslab.cli.console import console
from maslab.errors import ConfigError
from maslab.paths import default_response_cache


def _summary(cls: type) -> str:
    """The first line of a class's own docstring (not inherited); plugins need not have one."""
    lines = (cls.__doc__ or "").strip().splitlines()
    return lines[0] if lines else "(no description)"


def cmd_list(args: argparse.Namespace) -> int:
    if args.what == "methods":
        from maslab.method import get_method, list_methods

        rows = []
        for name in list_methods():
            cls = get_method(name)
            roles = f" Roles: {', '.join(cls.roles)}." if cls.roles else ""
            rows.append((name, _summary(cls) + roles))
    elif args.what == "benchmarks":
        from maslab.benchmark import get_benchmark, list_benchmarks

        rows = []
        for name in list_benchmarks():
            cls = get_benchmark(name)
            rows.append((name, f"{cls.domain}; scored by {cls.evaluator}"))
    elif args.what == "evaluators":
        from maslab.evaluation import get_evaluator, list_evaluators

        rows = [(n, _summary(get_evaluator(n))) for n in list_evaluators()]
    else:
        from maslab.llm.endpoints import load_endpoints
        from maslab.llm.registry import providers

        rows = [(f"{p}:<name>", "provider") for p in providers()]
        if args.endpoints:
            rows += [
                (f"openai:{alias}", "endpoints file") for alias in load_endpoints(args.endpoints)
            ]
    table = Table(show_header=False, box=None)
    for name, text in rows:
        table.add_row(f"[bold]{name}[/]", text)
    console.print(table)
    return 0


def cmd_data(args: argparse.Namespace) -> int:
    from maslab import data

    name = args.benchmark
    if args.action != "import" and args.file is not None:
        raise ConfigError(
            f"maslab data {args.action} takes no FILE; to use {args.file}, "
            f"`maslab data import {name} {args.file}`"
        )
    if args.action == "fetch":
        path = data.fetch(name, args.split)
    elif args.action == "import":
        if args.file is None:
            raise ConfigError(f"maslab data import needs a FILE: maslab data import {name} FILE")
        path = data.import_file(name, args.file, args.split)
    else:
        path = data.data_path(name, args.split)
        if not path.is_file():
            print(f"maslab: {_no_data_file(name, args.split, path)}", file=sys.stderr)
            return 1
    print(path)
    return 0


def _no_data_file(name: str, split: str, path: Path) -> str:
    """Why benchmark ``name`` has no cached file for ``split``, and how to add one."""
    from maslab.benchmark import get_benchmark

    bench = get_benchmark(name)()
    if split in bench.splits and bench.packaged_records(split) is not None:
        return f"{name} {split} data is built in, with no file: {bench.source(split)}"
    option = f" --split {split}" if split != defaults.SPLIT else ""
    ways = [f"`maslab data import {name} FILE{option}`"]
    if bench.hub is not None and split in bench.splits:
        ways.insert(0, f"`maslab data fetch {name}{option}`")
    return (
        f"{name} {split} data is not in the cache (it would be {path}); "
        f"add it with {' or '.join(ways)}"
    )


def cmd_cache(args: argparse.Namespace) -> int:
    from maslab.llm.cache import ResponseCache

    cache = ResponseCache(args.cache or default_response_cache())
    if args.action == "clear":
        console.print(f"removed {cache.clear()} cached responses from {cache.path}")
    else:
        stats = cache.stats()
        console.print(f"{cache.path}: {stats['entries']} responses, {stats['bytes']:,} bytes")
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("list", help="list methods, benchmarks, evaluators or models")
    p.add_argument("what", choices=["methods", "benchmarks", "evaluators", "models"])
    p.add_argument("--endpoints", type=Path)
    p.set_defaults(func=cmd_list)

    p = sub.add_parser(
        "data",
        help="fetch, import or locate benchmark data",
        description="fetch: download --split from the Hugging Face Hub into the cache "
        "(needs maslab[hf]). import: check FILE and copy it into the cache. path: print the "
        "cached file of --split; exits 1, saying why, when there is none.",
    )
    p.add_argument("action", choices=["fetch", "import", "path"])
    p.add_argument("benchmark")
    p.add_argument("file", nargs="?", type=Path, help="the data file to import")
    p.add_argument("--split", default=defaults.SPLIT)
    p.set_defaults(func=cmd_data)

    p = sub.add_parser("cache", help="response cache statistics or clearing")
    p.add_argument("action", choices=["stats", "clear"])
    p.add_argument("--cache", type=Path)
    p.set_defaults(func=cmd_cache)
