"""The one error type of configuration loading: where the problem is and what it is."""

from __future__ import annotations


class ConfigError(ValueError):
    """A configuration problem, located by file, 1-based line and field path.

    `str(err)` reads `file:line: field: message`, e.g.
    `cluster.yaml:12: queues[1].hosts[0]: unknown host 'n99'`. `line` is 0 when no line
    applies (the file could not be read); `field` is "" when the problem is not in a
    field (YAML syntax).
    """

    def __init__(self, file: str, line: int, field: str, message: str) -> None:
        super().__init__(file, line, field, message)
        self.file = file
        self.line = line
        self.field = field
        self.message = message

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.field}: {self.message}"
