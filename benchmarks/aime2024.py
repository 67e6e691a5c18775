"""AIME 2024: the 30 problems of AIME I and II 2024 (``Maxwell-Jia/AIME_2024``, train split).

Answers are integers from 0 to 999; the gold is ``Answer`` as plain digits.
"""

from __future__ import annotations

from maslab.bench.benchmark import HubSource, NumberBenchmark, register_benchmark


@register_benchmark("aime2024")
class AIME2024(NumberBenchmark):
    """American Invitational Mathematics Examination 2024."""

    domain = "math"
    fields = ("Problem", "Answer")
    id_field = "ID"
    hub = HubSource("Maxwell-Jia/AIME_2024", splits={"test": "train"})
