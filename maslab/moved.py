"""Where modules of maslab's flat layout went when it was regrouped into layers (CHANGELOG.md): the
old paths stay importable as aliases of the new modules, so code written against them (plug-ins,
notebooks) keeps working. New code imports the new paths."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from types import ModuleType

MOVED = {
    "maslab.topologies": "maslab.methods.dag_pipeline.topologies",
    "maslab.agreement": "maslab.analysis.agreement",
    "maslab.run_result": "maslab.analysis.run_result",
    "maslab.stats": "maslab.analysis.stats",
    "maslab.synergy": "maslab.analysis.synergy",
    "maslab.trajectory": "maslab.analysis.trajectory",
    "maslab.triage": "maslab.analysis.triage",
    "maslab.benchmark": "maslab.bench.benchmark",
    "maslab.data": "maslab.bench.data",
    "maslab.evaluation": "maslab.bench.evaluation",
    "maslab.agents": "maslab.core.agents",
    "maslab.answers": "maslab.core.answers",
    "maslab.context": "maslab.core.context",
    "maslab.messages": "maslab.core.messages",
    "maslab.method": "maslab.core.method",
    "maslab.roles": "maslab.core.roles",
    "maslab.scheduling": "maslab.core.scheduling",
    "maslab.task": "maslab.core.task",
    "maslab.topology": "maslab.core.topology",
    "maslab.distributed": "maslab.harness.distributed",
    "maslab.progress": "maslab.harness.progress",
    "maslab.ray_backend": "maslab.harness.ray_backend",
    "maslab.ray_watchdog": "maslab.harness.ray_watchdog",
    "maslab.runner": "maslab.harness.runner",
    "maslab.samples": "maslab.harness.samples",
    "maslab.shard": "maslab.harness.shard",
    "maslab.sweep": "maslab.harness.sweep",
    "maslab.aggregation": "maslab.kit.aggregation",
    "maslab.bridge": "maslab.kit.bridge",
    "maslab.bridge_client": "maslab.kit.bridge_client",
    "maslab.code_check": "maslab.kit.code_check",
    "maslab.code_tests": "maslab.kit.code_tests",
    "maslab.policy": "maslab.kit.learning",
    "maslab.parsing": "maslab.kit.parsing",
    "maslab.structured": "maslab.kit.structured",
    "maslab.tools": "maslab.kit.tools",
    "maslab.testing.scripted": "maslab.llm.scripted",
    "maslab.call_html": "maslab.report.call_html",
    "maslab.report_figures": "maslab.report.figures",
    "maslab.report_plots": "maslab.report.plots",
    "maslab.show": "maslab.report.show",
    "maslab.topology_svg": "maslab.report.topology_svg",
    "maslab.report_triage": "maslab.report.triage",
    "maslab.sandbox_launcher": "maslab.sandbox.launcher",
    "maslab.results": "maslab.store.run_store",
    "maslab.trace_index": "maslab.store.trace_index",
}
"""Old module path -> the module that took its place."""


class _Aliases(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports an old path as the module that took its place (the same module object)."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        return importlib.util.spec_from_loader(fullname, self) if fullname in MOVED else None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(MOVED[spec.name])

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module is the new one, already imported."""


def install() -> None:
    """Let the old paths import (once per process; after every other finder)."""
    if not any(isinstance(finder, _Aliases) for finder in sys.meta_path):
        sys.meta_path.append(_Aliases())
