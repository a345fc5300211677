"""Rows an operator emits: the Rust SDK's ``Output`` builder.

    out = weir.Output()
    out.utf8("txn_id", txn_ids)          # str or bytes, None for null
    out.float64("score", scores)
    out.int64("ts", times)
    return out                           # from process: the default output
    weir.emit("scores", other)           # or to a named output

Every column must have the same number of rows; the host checks that (and
the Arrow invariants) again before anything reaches a sink.
"""

from itertools import accumulate

from wit_world.imports import outputs as _outputs
from wit_world.imports import types as _t

__all__ = ["Output", "emit", "validity_bitmap"]


def validity_bitmap(values):
    """An Arrow validity bitmap, or None when no value is None."""
    if None not in values:
        return None
    bits = bytearray((len(values) + 7) // 8)
    for i, v in enumerate(values):
        if v is not None:
            bits[i >> 3] |= 1 << (i & 7)
    return bytes(bits)


class Output:
    """Columns of output rows, added by name in output-schema order."""

    def __init__(self):
        self._columns = []
        self._rows = None

    def __len__(self):
        return self._rows or 0

    def _add(self, name, values, column):
        n = len(values)
        if self._rows is not None and n != self._rows:
            raise ValueError(f"output column `{name}` has {n} rows, the columns before it {self._rows}")
        self._rows = n
        self._columns.append(_t.OutputColumn(name, column))
        return self

    def int64(self, name, values):
        """An ``int64`` column from ints (``None`` for null)."""
        values = list(values)
        raw = values if None not in values else [0 if v is None else v for v in values]
        return self._add(name, values, _t.Column(_t.Values_Int64(raw), validity_bitmap(values)))

    def float64(self, name, values):
        """A ``float64`` column from floats (``None`` for null)."""
        values = list(values)
        raw = values if None not in values else [0.0 if v is None else v for v in values]
        raw = [float(v) for v in raw]
        return self._add(name, values, _t.Column(_t.Values_Float64(raw), validity_bitmap(values)))

    def bool(self, name, values):
        """A ``bool`` column (``None`` for null)."""
        values = list(values)
        bits = bytearray((len(values) + 7) // 8)
        for i, v in enumerate(values):
            if v:
                bits[i >> 3] |= 1 << (i & 7)
        return self._add(name, values, _t.Column(_t.Values_Boolean(bytes(bits)), validity_bitmap(values)))

    def utf8(self, name, values):
        """A ``utf8`` column from ``str`` or UTF-8 ``bytes`` (``None`` for null)."""
        values = list(values)
        try:  # all bytes already (ids from ``to_bytes_list``): no pass per value
            raw, data = values, b"".join(values)
        except TypeError:
            raw = [b"" if v is None else v.encode() if isinstance(v, str) else v for v in values]
            data = b"".join(raw)
        offsets = [0, *accumulate(map(len, raw))]
        utf8 = _t.Values_Utf8(_t.Utf8Values(offsets, data))
        return self._add(name, values, _t.Column(utf8, validity_bitmap(values)))

    def to_wit(self):
        """The WIT ``output`` record (what ``process`` hands the host)."""
        return _t.Output(self._rows or 0, self._columns)


def emit(name, output):
    """Sends ``output``'s rows to output ``name`` (routed to the sinks with
    ``output = "name"``); they go with the epoch like returned rows."""
    if len(output):
        _outputs.emit(name, output.to_wit())
