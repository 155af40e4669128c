"""The one error type of requirement strings: where the problem is and what was expected."""

from __future__ import annotations


class ResReqError(ValueError):
    """A problem in a requirement (`-R`) string, located by 1-based column.

    `column` points at the offending character or token of the original string;
    the end of input is `len(text) + 1`. `str(err)` reads
    `requirement error at column 12: expected a number or name after '>'`.
    """

    column: int
    message: str

    def __init__(self, column: int, message: str) -> None:
        super().__init__(column, message)
        self.column = column
        self.message = message

    def __str__(self) -> str:
        return f"requirement error at column {self.column}: {self.message}"
