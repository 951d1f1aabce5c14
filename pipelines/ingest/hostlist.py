"""Slurm compressed host lists (``node-[001-004,017],gpu-b[7-8]``): ``expand_hostlist`` and its
inverse ``compress_hostlist`` (used by the simulator). The grammar and its errors:
docs/landing.md, "slurm/sacct.txt"; hostile input is counted before anything is generated."""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["MAX_HOSTS", "expand_hostlist", "count_hostlist", "compress_hostlist"]

#: Largest number of host names one expression may expand to.
MAX_HOSTS = 100_000

# Longest run of digits accepted as a range bound (keeps int() cheap and bounded).
_MAX_DIGITS = 18
# Characters allowed in the literal (non-bracket) parts of a host name.
_NAME_CHARS = re.compile(r"[A-Za-z0-9._\-]*")
_RANGE_ITEM = re.compile(r"(\d+)(?:-(\d+))?")


def _show(s: str, limit: int = 80) -> str:
    return repr(s if len(s) <= limit else s[:limit] + "...")


def _split_top_level(s: str) -> list[str]:
    """Split on commas outside brackets; check bracket balance and nesting."""
    parts: list[str] = []
    depth = 0
    start = 0
    for i, ch in enumerate(s):
        if ch == "[":
            if depth:
                raise ValueError(f"nested '[' at position {i} in host list {_show(s)}")
            depth = 1
        elif ch == "]":
            if not depth:
                raise ValueError(f"unbalanced ']' at position {i} in host list {_show(s)}")
            depth = 0
        elif ch == "," and not depth:
            parts.append(s[start:i])
            start = i + 1
    if depth:
        raise ValueError(f"unbalanced '[' (no closing ']') in host list {_show(s)}")
    parts.append(s[start:])
    return parts


def _parse_bracket(body: str, whole: str) -> list[tuple[int, int, int]]:
    """``"001-004,017"`` -> ``[(1, 4, 3), (17, 17, 3)]`` as (lo, hi, width)."""
    if not body:
        raise ValueError(f"empty '[]' in host list {_show(whole)}")
    ranges = []
    for item in body.split(","):
        m = _RANGE_ITEM.fullmatch(item)
        if m is None:
            raise ValueError(
                f"bad range {_show(item)} inside [...] in host list {_show(whole)} "
                "(expected N or LO-HI with decimal digits)"
            )
        lo_s, hi_s = m.group(1), m.group(2)
        if len(lo_s) > _MAX_DIGITS or (hi_s is not None and len(hi_s) > _MAX_DIGITS):
            raise ValueError(f"range bound too long in {_show(item)} in host list {_show(whole)}")
        lo = int(lo_s)
        hi = int(hi_s) if hi_s is not None else lo
        if hi < lo:
            raise ValueError(f"reversed range {_show(item)} ({lo} > {hi}) in host list {_show(whole)}")
        ranges.append((lo, hi, len(lo_s)))
    return ranges


def _parse_expr(expr: str, whole: str) -> tuple[list[str], list[list[tuple[int, int, int]]]]:
    """Split one host expression into literal pieces and bracket groups.

    Returns ``(literals, groups)`` with ``len(literals) == len(groups) + 1``.
    """
    literals: list[str] = []
    groups: list[list[tuple[int, int, int]]] = []
    pos = 0
    while True:
        open_at = expr.find("[", pos)
        lit = expr[pos:] if open_at < 0 else expr[pos:open_at]
        if not _NAME_CHARS.fullmatch(lit):
            bad = next(ch for ch in lit if not _NAME_CHARS.fullmatch(ch))
            raise ValueError(f"character {bad!r} not allowed in a host name in host list {_show(whole)}")
        literals.append(lit)
        if open_at < 0:
            return literals, groups
        close_at = expr.find("]", open_at)  # balance already checked
        groups.append(_parse_bracket(expr[open_at + 1 : close_at], whole))
        pos = close_at + 1


def _count(groups: list[list[tuple[int, int, int]]]) -> int:
    n = 1
    for g in groups:
        n *= sum(hi - lo + 1 for lo, hi, _ in g)
        if n > MAX_HOSTS:  # stop early: the product only grows
            return n
    return n


def _parse_all(s: str) -> tuple[str, list, int]:
    if not isinstance(s, str):
        raise TypeError(f"host list must be str, not {type(s).__name__}")
    text = s.strip()
    if not text:
        return text, [], 0
    parsed = []
    total = 0
    for expr in _split_top_level(text):
        if not expr:
            raise ValueError(f"empty host name (stray ',') in host list {_show(text)}")
        literals, groups = _parse_expr(expr, text)
        total += _count(groups)
        if total > MAX_HOSTS:
            raise ValueError(f"host list {_show(text)} expands to more than {MAX_HOSTS:,} hosts; refusing")
        parsed.append((literals, groups))
    return text, parsed, total


def count_hostlist(s: str) -> int:
    """Validate a host-list expression and return how many names it expands to, without
    expanding it. Raises ``ValueError`` exactly when ``expand_hostlist`` would."""
    return _parse_all(s)[2]


def expand_hostlist(s: str) -> list[str]:
    """Expand a Slurm host-list expression into host names, in order, duplicates kept:
    ``node-[001-002,017],gpu-b[7-8]`` gives node-001, node-002, node-017, gpu-b7, gpu-b8."""
    _, parsed, _ = _parse_all(s)
    out: list[str] = []
    for literals, groups in parsed:
        names = [literals[0]]
        for group, lit in zip(groups, literals[1:]):
            suffixes = [f"{n:0{width}d}{lit}" for lo, hi, width in group for n in range(lo, hi + 1)]
            names = [head + tail for head in names for tail in suffixes]
        out.extend(names)
    return out


_LAST_NUMBER = re.compile(r"^(.*?)(\d+)([^0-9]*)$", re.S)


def compress_hostlist(names: Iterable[str]) -> str:
    """Host names as a Slurm host-list expression (the inverse of ``expand_hostlist``): deduplicated,
    sorted, consecutive numbers of one padding as ``LO-HI``. node-003, node-001, node-002, gpu-b8
    and gpu-b7 give ``gpu-b[7-8],node-[001-003]``."""
    if isinstance(names, str):
        raise TypeError("compress_hostlist takes an iterable of names, not a str")
    groups: dict[tuple[str, str], set[tuple[int, str]]] = {}
    plain: set[str] = set()
    for name in names:
        if not isinstance(name, str) or not name:
            raise ValueError(f"bad host name {name!r}")
        if not _NAME_CHARS.fullmatch(name):
            raise ValueError(f"host name {_show(name)} has characters not allowed in a host list")
        m = _LAST_NUMBER.match(name)
        if m is None or len(m.group(2)) > _MAX_DIGITS:
            plain.add(name)
            continue
        prefix, digits, suffix = m.groups()
        groups.setdefault((prefix, suffix), set()).add((int(digits), digits))

    pieces: list[tuple[tuple[str, str, int], str]] = []
    for name in plain:
        pieces.append(((name, "", -1), name))
    for (prefix, suffix), items in groups.items():
        ordered = sorted(items)
        if len(ordered) == 1:
            pieces.append(((prefix, suffix, ordered[0][0]), prefix + ordered[0][1] + suffix))
            continue
        runs: list[list[tuple[int, str]]] = []
        for n, digits in ordered:
            if runs:
                run = runs[-1]
                width = len(run[0][1])
                if n == run[-1][0] + 1 and digits == f"{n:0{width}d}":
                    run.append((n, digits))
                    continue
            runs.append([(n, digits)])
        body = ",".join(r[0][1] if len(r) == 1 else f"{r[0][1]}-{r[-1][1]}" for r in runs)
        pieces.append(((prefix, suffix, ordered[0][0]), f"{prefix}[{body}]{suffix}"))
    pieces.sort(key=lambda p: p[0])
    return ",".join(text for _, text in pieces)
