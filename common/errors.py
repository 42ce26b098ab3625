"""Errors shared by the pure models (capacity, placement): which input is wrong, and the fix."""

from __future__ import annotations


class InputError(ValueError):
    """Invalid model input; ``field`` names the parameter, ``str()`` says what is wrong and the fix."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
