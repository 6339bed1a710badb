"""The one error a bad config raises: every problem found, one line each."""

from __future__ import annotations


class ConfigError(ValueError):
    """One or more invalid settings; ``problems`` holds one line each, naming the key, the value and
    what is allowed."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))
