"""Benchmarks for trio_h2t (see README.md)."""
