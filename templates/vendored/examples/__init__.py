"""Runnable examples built on the generated package (``python -m <pkg>.examples.server``)."""
