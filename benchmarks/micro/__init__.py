"""Micro-benchmarks of trio_h2t internals and of h2 alone (see ../README.md)."""
