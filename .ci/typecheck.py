"""mypy on maslab and its plug-in folders, each module under the name it is installed as.

The plug-in folders (methods/, benchmarks/, evaluators/) install as maslab.methods etc. through
the package-dir table of pyproject.toml, which the editable install serves with an import hook
that mypy cannot follow: given the folders, mypy would name their modules methods.cot etc. and
find no maslab.methods.cot to import. So this names each file as installed and runs mypy's build
with the options of [tool.mypy]; arguments are passed on to mypy (--no-incremental, ...).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from mypy import build, util
from mypy.errors import CompileError
from mypy.main import process_options

ROOT = Path(__file__).resolve().parent.parent
# pyproject.toml's [tool.setuptools.package-dir]: folder -> the package it installs as
PLUGIN_FOLDERS = {folder: f"maslab.{folder}" for folder in ("methods", "benchmarks", "evaluators")}


def main(argv: list[str]) -> int:
    os.chdir(ROOT)
    sources, options = process_options(["maslab", *PLUGIN_FOLDERS, *argv])
    for source in sources:
        top, dot, rest = (source.module or "").partition(".")
        if top in PLUGIN_FOLDERS:
            source.module = PLUGIN_FOLDERS[top] + dot + rest
    try:
        messages, blockers = build.build(sources, options).errors, False
    except CompileError as error:
        messages, blockers = error.messages, True
    for message in messages:
        print(message)
    n_errors, _, n_files = util.count_stats(messages)
    formatter = util.FancyFormatter(sys.stdout, sys.stderr, options.hide_error_codes)
    if n_errors:
        print(
            formatter.format_error(
                n_errors, n_files, len(sources), blockers=blockers, use_color=False
            )
        )
        return 2 if blockers else 1
    print(formatter.format_success(len(sources), use_color=False))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
