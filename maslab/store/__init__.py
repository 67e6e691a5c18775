"""The run format: a run directory's records, traces, manifest and learned state, written by
one process at a time and read by everything above.

:mod:`maslab.store.records` defines the format (each file's record type and
:data:`~maslab.store.records.FORMAT_VERSION`), :mod:`maslab.store.run_store` writes and reads a
run directory, :mod:`maslab.store.trace_index` finds a trace line without parsing the others.
The record types are importable from here too (each loads its module on first use)."""

from typing import TYPE_CHECKING

from maslab.lazy import lazy_exports

if TYPE_CHECKING:  # each name below loads on first use (see maslab.lazy)
    from maslab.store.records import (
        FORMAT_VERSION,
        ChatTurn,
        FormatTooNew,
        LearnedStateFile,
        Manifest,
        ResultRecord,
        ToolCall,
        TopologyGraph,
        Trace,
        TraceCall,
        TraceMessage,
    )
    from maslab.store.run_store import RunStore, existing_run

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "FORMAT_VERSION": "maslab.store.records",
        "ChatTurn": "maslab.store.records",
        "FormatTooNew": "maslab.store.records",
        "LearnedStateFile": "maslab.store.records",
        "Manifest": "maslab.store.records",
        "ResultRecord": "maslab.store.records",
        "ToolCall": "maslab.store.records",
        "TopologyGraph": "maslab.store.records",
        "Trace": "maslab.store.records",
        "TraceCall": "maslab.store.records",
        "TraceMessage": "maslab.store.records",
        "RunStore": "maslab.store.run_store",
        "existing_run": "maslab.store.run_store",
    },
)

__all__ = [
    "FORMAT_VERSION",
    "ChatTurn",
    "FormatTooNew",
    "LearnedStateFile",
    "Manifest",
    "ResultRecord",
    "RunStore",
    "ToolCall",
    "TopologyGraph",
    "Trace",
    "TraceCall",
    "TraceMessage",
    "existing_run",
]
