"""A paper's reported figures, kept as data beside the study that holds them up against ours.

A figures file (YAML, next to its study's module) is a table of facts: where they come from
(the paper, the table or figure, the models they were measured on), the unit, the columns, and
one row per setting, each row's keys naming it (``model``, ``method``, ``condition``...) and
its values by column (``null`` where the paper printed none)::

    paper: "Ye et al., MASLab (arXiv 2505.16988)"
    where: "Table 2 of the April 2025 draft (page 4)"
    unit: percent
    columns: [math500, gsm_hard]
    rows:
      - {model: Qwen-2.5-7B-Instruct, method: vanilla, values: [77.0, 60.6]}

Values are read as fractions (a ``percent`` table's divided by 100), as maslab's accuracies are.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from maslab.config_files import load_yaml


class FigureRow(BaseModel):
    """One setting the paper reported: the keys that name it, its values by column."""

    model_config = ConfigDict(extra="allow", frozen=True)

    values: list[float | None]

    @property
    def keys(self) -> dict[str, str]:
        """What names the row (every field but ``values``), as text."""
        return {k: str(v) for k, v in (self.model_extra or {}).items()}


class PaperFigures(BaseModel):
    """A paper's table or figure, as its study compares with it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    paper: str = Field(description="the paper, as cited")
    where: str = Field(description="the table or figure, and the version of the paper")
    unit: Literal["percent", "fraction", "count"] = "percent"
    columns: list[str] = Field(min_length=1)
    rows: list[FigureRow] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _widths(self) -> Self:
        for row in self.rows:
            if len(row.values) != len(self.columns):
                raise ValueError(
                    f"row {row.keys} has {len(row.values)} values for {len(self.columns)} columns"
                )
        return self

    @property
    def scale(self) -> float:
        """What turns a value of the table into a fraction (1 for counts)."""
        return 0.01 if self.unit == "percent" else 1.0

    def value(self, column: str, **keys: str) -> float | None:
        """The value in ``column`` of the row whose keys include ``keys`` (as a fraction for a
        percent table); None when no row has it or the paper printed none."""
        if column not in self.columns:
            return None
        i = self.columns.index(column)
        for row in self.rows:
            if all(row.keys.get(k) == v for k, v in keys.items()):
                found = row.values[i]
                return None if found is None else found * self.scale
        return None

    def models(self) -> list[str]:
        """The models the paper's rows were measured on, in order."""
        return list(dict.fromkeys(row.keys["model"] for row in self.rows if "model" in row.keys))


def load_figures(path: Path) -> PaperFigures:
    """The figures file ``path`` (errors name its line and field)."""
    return load_yaml(path, PaperFigures)
