"""AIME 2025: the 30 problems of AIME I and II 2025 (``MathArena/aime_2025``, train split).

MathArena's copy is used because it holds both exams in one split with LaTeX-checked statements
(``problem_idx``, ``problem``, ``answer``), and it is the source the MASLab fork that added AIME
2025 uses. Answers are integers from 0 to 999; the gold is ``answer`` as plain digits.
"""

from __future__ import annotations

from maslab.bench.benchmark import HubSource, NumberBenchmark, register_benchmark


@register_benchmark("aime2025")
class AIME2025(NumberBenchmark):
    """American Invitational Mathematics Examination 2025."""

    domain = "math"
    fields = ("problem", "answer")
    id_field = "problem_idx"
    hub = HubSource("MathArena/aime_2025", splits={"test": "train"})
