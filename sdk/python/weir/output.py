"""Rows an operator emits: the Rust SDK's ``Output`` builder.

    out = weir.Output()
    out.utf8("txn_id", txn_ids)          # str or bytes, None for null
    out.float64("score", scores)
    out.int64("ts", times)
    out.decimal("amount", amounts, 18, 2)  # Decimal values, never rounded
    out.timestamp("ts", times, "ms", "UTC")
    out.add("device", dicts, weir.struct_of([("id", "utf8"), ("ip", "utf8")]))
    return out                           # from process: the default output
    weir.emit("scores", other)           # or to a named output

Every column must have the same number of rows; the host checks that (and
the Arrow invariants) again before anything reaches a sink.
"""

from itertools import accumulate

from wit_world.imports import outputs as _outputs
from wit_world.imports import types as _t

from . import values as _values
from .values import validity_bitmap

__all__ = ["Output", "emit", "validity_bitmap"]


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
        self._columns.append(_t.OutputColumn(name, column) if isinstance(column, _t.Column) else column)
        return self

    def add(self, name, values, type_):
        """A column of Python ``values`` of any type: a basic type's name
        (``"utf8"``) or a ``weir.DataType`` (``weir.decimal_type(18, 2)``,
        ``weir.list_of(...)``, ``weir.struct_of([...])``): ``Decimal``,
        ``datetime`` (or counts of the unit), ``date``, ``bytes``, lists
        and dicts, ``None`` for null."""
        values = list(values)
        return self._add(name, values, _values.typed_column(name, values, _values._of(type_)))

    def decimal(self, name, values, precision, scale):
        """A ``decimal(precision, scale)`` column from ``Decimal`` (or int
        or str) values; a value that does not fit exactly raises."""
        return self.add(name, values, _values.decimal_type(precision, scale))

    def timestamp(self, name, values, unit="ms", tz=None):
        """A ``timestamp(unit, tz)`` column from ``datetime`` values or
        counts of ``unit``."""
        return self.add(name, values, _values.timestamp_type(unit, tz))

    def date(self, name, values):
        """A ``date`` column from ``datetime.date`` values (or day counts)."""
        return self.add(name, values, "date")

    def binary(self, name, values):
        """A ``binary`` column from ``bytes`` values."""
        return self.add(name, values, "binary")

    def column(self, name, column):
        """An input ``weir.Column`` (``batch.column(...)``), unchanged."""
        return self._add(name, range(len(column)), _values.passed_column(name, column))

    def _typed(self):
        """The typed WIT rows, or ``None`` when every column is basic."""
        if all(isinstance(c, _t.OutputColumn) for c in self._columns):
            return None
        rows = self._rows or 0
        columns = [
            _values.basic_as_typed(c, rows) if isinstance(c, _t.OutputColumn) else c for c in self._columns
        ]
        return _t.TypedOutput(rows, columns)

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
        """The WIT ``output`` record ``process`` hands the host. Rows with
        columns of other than the basic types go to the default output
        through ``emit-typed`` here, and the record is empty."""
        typed = self._typed()
        if typed is None:
            return _t.Output(self._rows or 0, self._columns)
        _outputs.emit_typed("default", typed)
        return _t.Output(0, [])


def emit(name, output):
    """Sends ``output``'s rows to output ``name`` (routed to the sinks with
    ``output = "name"``); they go with the epoch like returned rows."""
    if not len(output):
        return
    typed = output._typed()
    if typed is None:
        _outputs.emit(name, output.to_wit())
    else:
        _outputs.emit_typed(name, typed)
