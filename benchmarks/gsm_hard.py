"""GSM-Hard: GSM8K with larger numbers (``reasoning-machines/gsm-hard``, its only split, train).

``target`` is a float computed by the reference program; the gold is its plain text
(``3.0`` -> "3"). The split is served as our ``test``.
"""

from __future__ import annotations

from maslab.bench.benchmark import HubSource, NumberBenchmark, register_benchmark


@register_benchmark("gsm_hard")
class GSMHard(NumberBenchmark):
    """GSM8K problems rewritten with large, awkward numbers."""

    domain = "math"
    fields = ("input", "target")
    hub = HubSource("reasoning-machines/gsm-hard", splits={"test": "train"})
