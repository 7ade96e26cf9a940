"""Natural order for benchmark parameters and variant names: numbers compare as numbers.

    sorted(["bytes:1024", "bytes:128", "bytes:16"], key=natural_key)
    -> ["bytes:16", "bytes:128", "bytes:1024"]

A string is split into runs of digits and runs of other characters; digit runs compare by
value (then by their text, so "007" and "7" keep a stable order), other runs as text. The
one sort every table and chart of the suite uses for parameters it cannot order from a
practice's definition.
"""
import re

_RUNS = re.compile(r"(\d+)")


def natural_key(text):
    """A sort key for `text` (any value; None sorts first) in natural order."""
    if text is None:
        return ((0, "", 0, ""),)
    parts = _RUNS.split(str(text))
    key = []
    for i, part in enumerate(parts):
        if i % 2:  # a run of digits
            key.append((1, "", int(part), part))
        elif part:
            key.append((2, part, 0, ""))
    return tuple(key)


def natural_sorted(values):
    """`values` in natural order (a new list)."""
    return sorted(values, key=natural_key)
