"""Sizes for gpumemprof's Python side: parse "2 GiB" / "512MB" / 1024 into bytes and print bytes
the way `gpumemprof report` does ("0 B", "512 B", "4.00 MiB"), so that the pytest plugin's and
trace()'s tables read like the report's."""
import re

# every unit a power of 1024, with or without i and B, as the command line's sizes
# (gmp_cli_parse_size: `run --alert-threshold 2G`, `whatif --capacity`) and the agent's settings
_UNITS = {"": 1, "b": 1}
for _i, _u in enumerate("kmgt"):
    for _s in ("", "b", "ib"):
        _UNITS[_u + _s] = 1 << (10 * (_i + 1))
_SIZE = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([a-zA-Z]*)\s*$")


def parse_size(v):
    """Bytes from an int, or a string: a number and a unit (B; K, M, G, T with or without i and B,
    all powers of 1024 as on gpumemprof's command line; case ignored). Raises ValueError on
    anything else (a negative size, an unknown unit)."""
    if isinstance(v, bool):
        raise ValueError("a size, not a boolean: %r" % (v,))
    if isinstance(v, int):
        if v < 0:
            raise ValueError("a negative size: %d" % v)
        return v
    if isinstance(v, float):
        if v < 0 or v != v:
            raise ValueError("not a size: %r" % v)
        return int(v)
    m = _SIZE.match(str(v))
    if not m or m.group(2).lower() not in _UNITS:
        raise ValueError("not a size: %r (say e.g. \"2 GiB\", \"512 MB\" or a number of bytes)"
                         % (v,))
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def fmt_bytes(n):
    """As the report prints sizes: bytes below 1 KiB, else two decimals of the largest binary unit;
    a negative number keeps its sign."""
    if n is None:
        return "-"
    sign = "-" if n < 0 else ""
    n = abs(n)
    if n < 1024:
        return "%s%d B" % (sign, n)
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return "%s%.2f %s" % (sign, n / scale, unit)
    return "%s%d B" % (sign, n)  # not reached


def fmt_seconds(s):
    """A duration as the report prints it: 3 decimals of s, ms or us."""
    if s >= 1:
        return "%.3f s" % s
    if s >= 1e-3:
        return "%.3f ms" % (s * 1e3)
    return "%.3f us" % (s * 1e6)


def table(headers, rows, right=None):
    """Text columns, two spaces apart; the columns in `right` (indexes) aligned right."""
    right = set(range(1, len(headers))) if right is None else set(right)
    cols = [headers] + [[str(c) for c in r] for r in rows]
    w = [max(len(r[i]) for r in cols) for i in range(len(headers))]
    out = []
    for r in cols:
        out.append("  ".join(c.rjust(w[i]) if i in right else c.ljust(w[i])
                             for i, c in enumerate(r)).rstrip())
    return out
