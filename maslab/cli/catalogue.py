"""What maslab knows and keeps: ``maslab list``, ``data`` and ``cache``."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from rich.markup import escape
from rich.table import Table

from maslab import defaults
from maslab.cli.commands import about
from maslab.cli.console import console, import_option, plain_text
from maslab.errors import ConfigError
from maslab.paths import default_response_cache
from maslab.plugins import describe, origin

if TYPE_CHECKING:
    from maslab.bench.benchmark import Benchmark


def _summary(obj: object) -> str:
    """The first line of an object's own docstring (not inherited), as plain text; plugins need
    not have one."""
    lines = (obj.__doc__ or "").strip().splitlines()
    return plain_text(lines[0]) if lines else "(no description)"


def _method_text(cls: type) -> str:
    """A method's summary, then a line each for its category, paper, calls and roles."""
    facts = {
        "Category": getattr(cls, "category", ""),
        "Paper": getattr(cls, "paper", ""),
        "LLM calls per task": getattr(cls, "calls", ""),
        "Roles": ", ".join(getattr(cls, "roles", ())),
    }
    return "\n".join([_summary(cls), *(f"{key}: {value}" for key, value in facts.items() if value)])


def _benchmark_rows() -> list[tuple[str, object, str]]:
    """Each benchmark with whether its test split works offline, and how to add it if not."""
    from maslab.bench.benchmark import get_benchmark, list_benchmarks
    from maslab.bench.data import data_path

    rows: list[tuple[str, object, str]] = []
    for name in list_benchmarks():
        cls = get_benchmark(name)
        try:  # plugin code: a benchmark that cannot tell still lists
            bench = cls()
            if data_path(name).is_file():
                data = f"offline: cached {data_path(name)}"
            elif bench.packaged_records("test") is not None:
                data = f"offline: {bench.packaged_source('test')}"
            else:
                data = f"needs {' or '.join(_ways_to_add(bench, 'test'))}"
        except Exception as exc:
            data = f"data unknown ({describe(exc)})"
        rows.append((name, cls, f"{cls.domain or '?'}; scored by {cls.evaluator}; {data}"))
    return rows


def _tool_rows() -> list[tuple[str, object, str]]:
    """Each tool with its description (its factory is plugin code: a failing one still lists)."""
    from maslab.kit.tools import tool_factories

    rows: list[tuple[str, object, str]] = []
    for name, factory in tool_factories().items():
        try:
            text = factory().description
        except Exception as exc:
            text = f"(its factory fails: {describe(exc)})"
        rows.append((name, factory, text))
    return rows


def _model_rows(endpoints: Path | None) -> list[tuple[str, object, str]]:
    """Providers, the embedded presets and the aliases of an endpoints file."""
    from maslab.defaults import DEMO_MODEL
    from maslab.llm.endpoints import load_endpoints
    from maslab.llm.local import INSTALL_HINT, PRESETS, resolve_gguf
    from maslab.llm.registry import providers

    rows: list[tuple[str, object, str]] = [
        (f"{prefix}:<name>", factory, _summary(factory)) for prefix, factory in providers().items()
    ]
    for preset, (package, filename) in PRESETS.items():
        try:
            resolve_gguf(preset)
            ready = importlib.util.find_spec("llama_cpp") is not None
        except ConfigError:
            ready = False
        spec = f"local:{preset}"
        default = ", the default model" if spec == DEMO_MODEL else ""
        state = "runs offline" if ready else f"needs {INSTALL_HINT}"
        rows.append((spec, "bundled", f"embedded preset {filename} ({package}{default}); {state}"))
    if endpoints:
        for alias, served in load_endpoints(endpoints).items():
            urls = ", ".join(endpoint.base_url for endpoint in served)
            rows.append((f"openai:{alias}", str(endpoints), urls))
    return rows


def cmd_list(args: argparse.Namespace) -> int:
    """One row per item: its name, where it comes from (bundled, the plugin's distribution, a
    module) and what it is; with ``--brief``, one line: its name and what it is in short (a
    method's category)."""
    rows: list[tuple[str, object, str]]
    if args.what == "methods":
        from maslab.core.method import get_method, list_methods

        rows = []
        for name in list_methods():
            cls = get_method(name)
            text = (cls.category or _summary(cls)) if args.brief else _method_text(cls)
            rows.append((name, cls, text))
    elif args.what == "benchmarks":
        rows = _benchmark_rows()
    elif args.what == "evaluators":
        from maslab.bench.evaluation import get_evaluator, list_evaluators

        rows = [(n, get_evaluator(n), _summary(get_evaluator(n))) for n in list_evaluators()]
    elif args.what == "tools":
        rows = _tool_rows()
    else:
        rows = _model_rows(args.endpoints)
    table = Table(show_header=False, box=None)
    # nothing is cut short or dropped: names stay on one line, and where the terminal is too
    # narrow a long origin or word folds onto the next line
    table.add_column(no_wrap=True)
    if not args.brief:
        table.add_column(overflow="fold")
    table.add_column(overflow="fold", min_width=20)
    for name, source, text in rows:
        if args.brief:
            table.add_row(f"[bold]{escape(name)}[/]", escape(text.partition("\n")[0]))
            continue
        where = source if isinstance(source, str) else origin(source)
        table.add_row(f"[bold]{escape(name)}[/]", f"[dim]{escape(where)}[/]", escape(text))
    console.print(table)
    return 0


def cmd_data(args: argparse.Namespace) -> int:
    from maslab.bench import data
    from maslab.bench.benchmark import get_benchmark

    name = args.benchmark
    if args.action != "import" and args.file is not None:
        raise ConfigError(
            f"maslab data {args.action} takes no FILE; to use {args.file}, "
            f"`maslab data import {name} {args.file}`"
        )
    pinned = data.pypi_file(name)
    if pinned is not None:  # a pinned file (BFCL's wheel): one per name, no splits
        if args.action == "fetch":
            path = data.fetch_pypi_file(pinned)
        elif args.action == "import":
            if args.file is None:
                raise ConfigError(
                    f"maslab data import needs a FILE: maslab data import {name} {pinned.filename}"
                )
            path = data.import_pypi_file(pinned, args.file)
        elif not (path := pinned.path).is_file():
            print(f"maslab: {pinned.missing()}", file=sys.stderr)
            return 1
    elif args.action == "path":
        path = data.data_path(name, args.split)
        if not path.is_file():
            print(f"maslab: {_no_data_file(name, args.split, path)}", file=sys.stderr)
            return 1
    else:
        bench = get_benchmark(name)()
        if args.action == "fetch":
            path, done = data.fetch(bench, args.split), "fetched"
        elif args.file is None:
            raise ConfigError(f"maslab data import needs a FILE: maslab data import {name} FILE")
        else:
            path, done = data.import_file(bench, args.file, args.split), "imported"
        tasks = len(bench.load(args.split))  # as a run reads them: from the cache
        print(f"{done} {tasks} {name} tasks ({args.split} split) into {path}")
        return 0
    print(path)
    return 0


def _no_data_file(name: str, split: str, path: Path) -> str:
    """Why benchmark ``name`` has no cached file for ``split``, and how to add one."""
    from maslab.bench.benchmark import get_benchmark

    bench = get_benchmark(name)()
    if split in bench.splits and bench.packaged_records(split) is not None:
        return f"{name} {split} data is built in, with no file: {bench.source(split)}"
    return (
        f"{name} {split} data is not in the cache (it would be {path}); "
        f"add it with {' or '.join(_ways_to_add(bench, split))}"
    )


def _ways_to_add(bench: Benchmark, split: str) -> list[str]:
    """The commands that put ``split`` of ``bench`` into the data cache."""
    option = f" --split {split}" if split != defaults.SPLIT else ""
    ways = [f"`maslab data import {bench.name} FILE{option}`"]
    if bench.hub is not None and split in bench.splits:
        ways.insert(0, f"`maslab data fetch {bench.name}{option}`")
    return ways


def cmd_cache(args: argparse.Namespace) -> int:
    from maslab.llm.cache import ResponseCache

    cache = ResponseCache(args.cache or default_response_cache(), create=False)
    if args.action == "clear":
        console.print(f"removed {cache.clear()} cached responses from {cache.path}")
    else:
        stats = cache.stats()
        console.print(f"{cache.path}: {stats['entries']} responses, {stats['bytes']:,} bytes")
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "list",
        help=about("list"),
        description="Each row: the name, where it comes from (bundled, the distribution of the "
        "plugin that installed it, or the module that defined it) and what it is. Methods "
        "show their summary, category, paper, LLM calls per task and roles (--brief: one line "
        "each, name and category). Benchmarks say whether they work offline; models list the "
        "providers, the embedded presets and, with --endpoints, the file's aliases.",
    )
    p.add_argument("what", choices=["methods", "benchmarks", "evaluators", "tools", "models"])
    p.add_argument(
        "--brief",
        action="store_true",
        help="one line per item: its name and what it is in short (a method's category)",
    )
    p.add_argument("--endpoints", type=Path)
    import_option(p)
    p.set_defaults(func=cmd_list)

    p = sub.add_parser(
        "data",
        help=about("data"),
        description="fetch: download --split from the Hugging Face Hub into the cache "
        "(needs maslab[hf]); `fetch bfcl` downloads BFCL's pinned wheel from PyPI. import: "
        "check FILE and copy it into the cache as --split. Both say how many tasks the split "
        "now holds. path: print the cached file of --split; exits 1, saying why, when there is "
        "none.",
    )
    p.add_argument("action", choices=["fetch", "import", "path"])
    p.add_argument("benchmark")
    p.add_argument("file", nargs="?", type=Path, help="the data file to import")
    p.add_argument("--split", default=defaults.SPLIT)
    p.set_defaults(func=cmd_data)

    p = sub.add_parser(
        "cache",
        help=about("cache"),
        description="stats: the responses cached and the file's size. clear: delete them all "
        "and shrink the file. Either refuses a cache file that does not exist.",
    )
    p.add_argument("action", choices=["stats", "clear"])
    p.add_argument(
        "--cache", type=Path, metavar="FILE", help="the cache file (by default the user's)"
    )
    p.set_defaults(func=cmd_cache)
