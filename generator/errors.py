"""The one error type the generator reports: a clear message, exit code 2."""

from __future__ import annotations


class GeneratorError(Exception):
    """Bad input or an unusable output path. The CLI prints ``str(err)`` on one line and exits 2."""

    exit_code = 2

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))
