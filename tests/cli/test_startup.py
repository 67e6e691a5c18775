"""Start-up stays cheap: importing maslab, or running a scripted sample, loads only what it uses."""

from __future__ import annotations

import subprocess
import sys

import pytest


def _loaded_after(code: str) -> set[str]:
    """The top-level modules a fresh interpreter holds after running ``code``."""
    probe = f"{code}\nimport sys\nprint(' '.join(sorted({{m.split('.')[0] for m in sys.modules}})))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


@pytest.mark.system
def test_importing_maslab_loads_none_of_its_layers():
    loaded = _loaded_after("import maslab")
    assert not loaded & {"aiohttp", "networkx", "numpy", "matplotlib", "pydantic", "tenacity"}


def test_a_public_name_loads_on_first_use():
    import maslab

    assert maslab.get_method("vanilla").name == "vanilla"
    assert "get_method" in dir(maslab)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        maslab.nope  # noqa: B018


@pytest.mark.system
@pytest.mark.parametrize(
    ("name", "modules"),
    [
        ("vanilla", ["maslab.methods.vanilla"]),
        # a module of a family package: the package and the module, with what it imports
        ("agentprune", ["maslab.methods.graph_designers", "maslab.methods.graph_designers."
                        "agentprune", "maslab.methods.graph_designers.spacetime"]),
    ],
)  # fmt: skip
def test_looking_a_method_up_imports_its_module_only(name, modules):
    code = (
        f"import sys\nfrom maslab.core.method import get_method\nget_method({name!r})\n"
        "print(sorted(m for m in sys.modules if m.startswith('maslab.methods.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str(modules)


def test_listing_still_finds_every_bundled_method():
    from maslab.core.method import list_methods

    names = {"vanilla", "llm_debate", "goagent", "mas_gpt", "agentprune", "g_designer"}
    assert names <= set(list_methods())
    assert "graph_designers" not in list_methods() and "spacetime" not in list_methods()


@pytest.mark.system
def test_a_scripted_run_never_loads_the_http_client(tmp_path):
    code = (
        "from maslab.cli import main\n"
        f"main(['run', '--method', 'vanilla', '--benchmark', 'arith', '--limit', '1', "
        f"'--model', 'scripted:echo', '--out', {str(tmp_path / 'run')!r}, '--quiet'])"
    )
    loaded = _loaded_after(code)
    assert "aiohttp" not in loaded and "openai" not in loaded


def test_entry_points_are_read_once_for_every_plugin_group(monkeypatch):
    from importlib.metadata import EntryPoints

    from maslab import plugins
    from maslab.registry import Registry

    reads = []
    monkeypatch.setattr(plugins, "entry_points", lambda: reads.append(1) or EntryPoints([]))
    plugins._installed_entry_points.cache_clear()
    try:
        Registry("method", "maslab.methods").names()
        Registry("benchmark", "maslab.benchmarks").names()
        Registry("evaluator", "maslab.evaluators").names()
    finally:
        plugins._installed_entry_points.cache_clear()
    assert len(reads) == 1


def test_the_command_table_names_every_command_with_the_module_that_adds_it():
    import argparse
    import importlib

    from maslab.cli import build_parser
    from maslab.cli.commands import COMMANDS

    for module in {command.module for command in COMMANDS.values()}:
        parser = argparse.ArgumentParser()
        sub = parser.add_subparsers()
        importlib.import_module(f"maslab.cli.{module}").add_commands(sub)
        assert set(sub.choices) == {n for n, c in COMMANDS.items() if c.module == module}
    every = build_parser()._subparsers._group_actions[0]  # type: ignore[union-attr]
    helps = {action.dest: action.help for action in every._choices_actions}
    assert helps == {name: command.help for name, command in COMMANDS.items()}


@pytest.mark.system
@pytest.mark.parametrize(
    ("argv", "loaded", "not_loaded"),
    [
        (["--help"], set(), {"run", "catalogue", "triage", "reading"}),
        (["run", "--help"], {"run"}, {"catalogue", "triage", "attribution", "study"}),
        (["list", "--help"], {"catalogue"}, {"run", "triage", "sweep"}),
    ],
)
def test_a_command_loads_only_its_own_module(argv, loaded, not_loaded):
    code = (
        "import sys, contextlib, io\nfrom maslab.cli import main\n"
        f"with contextlib.redirect_stdout(io.StringIO()): main({argv!r})\n"
        "print(' '.join(m.rpartition('.')[2] for m in sys.modules if m.startswith('maslab.cli.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    modules = set(out.stdout.split())
    assert loaded <= modules and not modules & not_loaded


def test_help_lists_every_command_and_a_command_still_parses(capsys):
    from maslab.cli import build_parser, main
    from maslab.cli.commands import COMMANDS

    assert main(["--help"]) == 0
    shown = capsys.readouterr().out
    assert all(name in shown for name in COMMANDS)
    args = build_parser(["show", "x"]).parse_args(["show", "x"])
    assert args.command == "show" and args.func.__name__ == "cmd_show"
    assert main(["nope"]) == 2 and "invalid choice: 'nope'" in capsys.readouterr().err
