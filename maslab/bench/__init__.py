"""Benchmarks and scoring: Benchmark and its registry, where the data comes from (the data
cache), and Evaluator and Score."""
