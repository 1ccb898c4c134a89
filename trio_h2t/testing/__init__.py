"""Public helpers for testing code that uses trio_h2t (like ``trio.testing``)."""

__all__: list[str] = []
