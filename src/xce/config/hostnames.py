"""Host name ranges: `n[01-10]`, `n[1-3,7]`, `rack[1-2]n[01-02]`, expanded into names
and names folded back into them."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable

MAX_NAMES = 100_000


def expand_hostnames(pattern: str) -> list[str]:
    """Expand a host name pattern into host names, in order.

    `n[02-10]` gives n02..n10 (zero padding taken from the width of the range start),
    `n[1-3,7]` gives n1 n2 n3 n7, several bracket groups give every combination
    (`rack[1-2]n[01-02]` -> rack1n01 rack1n02 rack2n01 rack2n02), a plain name gives
    itself. Raises ValueError on a bad pattern: empty, whitespace, unbalanced or empty
    brackets, non-numeric or reversed ranges, or more than MAX_NAMES names.
    """
    if not pattern:
        raise ValueError("empty host name")
    if any(ch.isspace() for ch in pattern):
        raise ValueError(f"host name {pattern!r} contains whitespace")
    groups = _parse(pattern)
    count = 1
    for group in groups:
        count *= _group_size(group)
        if count > MAX_NAMES:
            raise ValueError(f"{pattern!r} expands to more than {MAX_NAMES} names")
    choices = [_group_names(group) for group in groups]
    return ["".join(parts) for parts in itertools.product(*choices)]


# A pattern is a list of groups; a group is a literal (str) or the ranges of one
# bracket: (first, last, width) with numbers as ints.
_Range = tuple[int, int, int]
_Group = str | list[_Range]


def _parse(pattern: str) -> list[_Group]:
    groups: list[_Group] = []
    pos = 0
    while pos < len(pattern):
        open_at = pattern.find("[", pos)
        close_at = pattern.find("]", pos)
        if close_at != -1 and (open_at == -1 or close_at < open_at):
            raise ValueError(f"unbalanced ']' in {pattern!r}")
        if open_at == -1:
            groups.append(pattern[pos:])
            break
        if open_at > pos:
            groups.append(pattern[pos:open_at])
        if close_at == -1:
            raise ValueError(f"unclosed '[' in {pattern!r}")
        body = pattern[open_at + 1 : close_at]
        if "[" in body:
            raise ValueError(f"nested '[' in {pattern!r}")
        groups.append(_parse_ranges(body, pattern))
        pos = close_at + 1
    return groups


def _parse_ranges(body: str, pattern: str) -> list[_Range]:
    if not body:
        raise ValueError(f"empty brackets in {pattern!r}")
    ranges: list[_Range] = []
    for item in body.split(","):
        first_text, dash, last_text = item.partition("-")
        if not dash:
            last_text = first_text
        if not (_is_digits(first_text) and _is_digits(last_text)):
            raise ValueError(f"bad range {item!r} in {pattern!r}: expected numbers like 01-10 or 7")
        first, last = int(first_text), int(last_text)
        if last < first:
            raise ValueError(f"reversed range {item!r} in {pattern!r}")
        ranges.append((first, last, len(first_text)))
    return ranges


def _is_digits(text: str) -> bool:
    # str.isdigit() accepts superscripts and other scripts' digits; a host name does not.
    return bool(text) and all("0" <= ch <= "9" for ch in text)


def _group_size(group: _Group) -> int:
    if isinstance(group, str):
        return 1
    return sum(last - first + 1 for first, last, _ in group)


def _group_names(group: _Group) -> list[str]:
    if isinstance(group, str):
        return [group]
    return [
        f"{number:0{width}d}" for first, last, width in group for number in range(first, last + 1)
    ]


_NUMBERED = re.compile(r"^(.*?)([0-9]+)([^0-9]*)$")


def fold_hostnames(names: Iterable[str]) -> list[str]:
    """Host names folded into patterns, the inverse of `expand_hostnames`:
    n011 n012 n013 n014 n020 -> `n[011-014,020]`. Names that differ only in one run of
    digits of the same width fold together (in the order each group first appears);
    a name alone, or without digits, stays as it is."""
    groups: dict[tuple[str, str, int], list[int]] = {}
    order: list[tuple[str, str, int] | str] = []
    for name in names:
        match = _NUMBERED.match(name)
        if match is None:
            order.append(name)
            continue
        prefix, digits, suffix = match.groups()
        key = (prefix, suffix, len(digits))
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(int(digits))
    folded: list[str] = []
    for item in order:
        if isinstance(item, str):
            folded.append(item)
            continue
        prefix, suffix, width = item
        numbers = sorted(set(groups[item]))
        if len(numbers) == 1:
            folded.append(f"{prefix}{numbers[0]:0{width}d}{suffix}")
            continue
        runs: list[str] = []
        start = prev = numbers[0]
        for number in [*numbers[1:], None]:
            if number is not None and number == prev + 1:
                prev = number
                continue
            runs.append(f"{start:0{width}d}" + (f"-{prev:0{width}d}" if prev != start else ""))
            if number is not None:
                start = prev = number
        folded.append(f"{prefix}[{','.join(runs)}]{suffix}")
    return folded
