"""The input batch and its typed columns (the Rust SDK's ``Batch`` and
``*Column`` types).

A column is fetched from the host when asked for, once per call, in Arrow
layout: values, a validity bitmap, and for ``utf8`` offsets into one
``bytes`` buffer. Reading a value is an index into those buffers; nothing
is converted until you ask (``to_list``).
"""

from wit_world.imports import types as _t

from . import values as _values

__all__ = [
    "Batch",
    "BoolColumn",
    "ColumnError",
    "Field",
    "Float64Column",
    "Int64Column",
    "Utf8Column",
]

class ColumnError(Exception):
    """A column that is missing or has another type than asked for."""


class Field:
    """One column of the input schema: ``name``, ``data_type`` (spelled
    ``"int64"``, ``"float64"``, ``"bool"``, ``"utf8"``, ``"binary"``,
    ``"date"``, ``"decimal(18,2)"``, ``"timestamp(ms, UTC)"``,
    ``"list<utf8>"`` or ``"struct"``), ``type`` (the ``weir.DataType``,
    with a struct's fields and a list's element) and ``nullable``."""

    __slots__ = ("name", "data_type", "nullable", "type")

    def __init__(self, name, data_type, nullable, type_=None):
        self.name, self.data_type, self.nullable = name, data_type, nullable
        self.type = type_

    def __repr__(self):
        return f"Field({self.name!r}, {self.data_type!r}, nullable={self.nullable})"


# Each byte of a validity bitmap as its eight bits, least significant first.
_BITS = [tuple(bool((byte >> i) & 1) for i in range(8)) for byte in range(256)]


class _Column:
    """Values plus an optional Arrow validity bitmap (None: no nulls)."""

    __slots__ = ("_validity", "_len")

    def valid(self):
        """Each row's validity as a list of bools (all True without nulls)."""
        if self._validity is None:
            return [True] * self._len
        return [bit for byte in self._validity for bit in _BITS[byte]][: self._len]

    def __len__(self):
        return self._len

    def is_null(self, row):
        """Whether ``row`` is null."""
        v = self._validity
        return v is not None and not (v[row >> 3] >> (row & 7)) & 1

    def null_count(self):
        """How many rows are null (a popcount of the bitmap, not a loop)."""
        v = self._validity
        if v is None:
            return 0
        whole, rest = divmod(self._len, 8)
        valid = int.from_bytes(v[:whole], "little").bit_count()
        if rest:
            valid += (v[whole] & ((1 << rest) - 1)).bit_count()
        return self._len - valid

    def __iter__(self):
        return iter(self.to_list())

    def __getitem__(self, row):
        if not 0 <= row < self._len:
            raise IndexError(f"row {row} of a column of {self._len} rows")
        return None if self.is_null(row) else self._value(row)

    def to_list(self):
        """Every row's value, ``None`` for nulls."""
        if self._validity is None:
            return [self._value(row) for row in range(self._len)]
        return [self._value(row) if ok else None for row, ok in enumerate(self.valid())]


class _NumberColumn(_Column):
    __slots__ = ("values",)

    def __init__(self, values, validity):
        #: The raw values (a list); the slot of a null row is unspecified.
        self.values = values
        self._validity = validity
        self._len = len(values)

    def _value(self, row):
        return self.values[row]

    def to_list(self):
        if self._validity is None:
            return list(self.values)
        return [v if ok else None for v, ok in zip(self.values, self.valid())]


class Int64Column(_NumberColumn):
    """An ``int64`` column (timestamps are epoch milliseconds)."""

    __slots__ = ()


class Float64Column(_NumberColumn):
    """A ``float64`` column."""

    __slots__ = ()


class BoolColumn(_Column):
    """A ``bool`` column (bit-packed like Arrow)."""

    __slots__ = ("_bits",)

    def __init__(self, bits, rows, validity):
        self._bits, self._len, self._validity = bits, rows, validity

    def _value(self, row):
        return bool((self._bits[row >> 3] >> (row & 7)) & 1)


class Utf8Column(_Column):
    """A ``utf8`` column: ``column[row]`` is a ``str``; ``bytes_at(row)``
    the UTF-8 bytes without decoding (cheaper for ids and codes)."""

    __slots__ = ("offsets", "data")

    def __init__(self, offsets, data, validity):
        #: ``len + 1`` offsets into ``data``: row i is ``data[offsets[i]:offsets[i+1]]``.
        self.offsets = offsets
        #: Every row's bytes, back to back.
        self.data = data
        self._validity = validity
        self._len = len(offsets) - 1

    def _value(self, row):
        return self.data[self.offsets[row]:self.offsets[row + 1]].decode()

    def bytes_at(self, row):
        """The bytes of ``row``, or ``None`` if it is null."""
        if self.is_null(row):
            return None
        return self.data[self.offsets[row]:self.offsets[row + 1]]

    def to_bytes_list(self):
        """Every row's bytes, ``None`` for nulls."""
        o, d = self.offsets, self.data
        if self._validity is None:
            return [d[a:b] for a, b in zip(o, o[1:])]
        return [d[a:b] if ok else None for a, b, ok in zip(o, o[1:], self.valid())]

    def to_list(self):
        return [None if b is None else b.decode() for b in self.to_bytes_list()]


def _wrap(name, want, column):
    values = column.values
    if want == "int64" and isinstance(values, _t.Values_Int64):
        return Int64Column(values.value, column.validity)
    if want == "float64" and isinstance(values, _t.Values_Float64):
        return Float64Column(values.value, column.validity)
    if want == "utf8" and isinstance(values, _t.Values_Utf8):
        return Utf8Column(values.value.offsets, values.value.data, column.validity)
    raise ColumnError(f"column `{name}` is not {want}")


class Batch:
    """One micro-batch, read-only: the Rust SDK's ``Batch``. Fetch each
    column once per call and keep it: every fetch copies it again."""

    def __init__(self, raw):
        self._raw = raw
        self.num_rows = raw.num_rows()
        #: The input schema, in column order (a list of ``Field``).
        self.schema = []
        for column_type in raw.typed_schema():
            name, t, nullable = _values.type_from_nodes(column_type.nodes)
            spelled = "bool" if t.kind == "bool" else str(t)
            self.schema.append(Field(name, spelled, nullable, t))
        self._index = {f.name: i for i, f in enumerate(self.schema)}

    def __len__(self):
        return self.num_rows

    def index_of(self, name):
        """Position of column ``name``; a ``ColumnError`` naming it if absent."""
        try:
            return self._index[name]
        except KeyError:
            names = ", ".join(f.name for f in self.schema)
            raise ColumnError(f"the input has no column `{name}` (it has: {names})") from None

    def _typed(self, name, want):
        i = self.index_of(name)
        have = self.schema[i].data_type
        if have != want:
            raise ColumnError(f"column `{name}` is {have}, not {want}")
        return i

    def _fetch(self, name, want, rows):
        i = self._typed(name, want)
        raw = self._raw.column(i) if rows is None else self._raw.take(i, list(rows))
        if want == "bool":
            n = self.num_rows if rows is None else len(rows)
            return BoolColumn(raw.values.value, n, raw.validity)
        return _wrap(name, want, raw)

    def int64(self, name, rows=None):
        """Column ``name`` as an ``Int64Column`` (only ``rows``, in that order, if given)."""
        return self._fetch(name, "int64", rows)

    def float64(self, name, rows=None):
        """Column ``name`` as a ``Float64Column`` (only ``rows`` if given)."""
        return self._fetch(name, "float64", rows)

    def utf8(self, name, rows=None):
        """Column ``name`` as a ``Utf8Column`` (only ``rows`` if given)."""
        return self._fetch(name, "utf8", rows)

    def bool(self, name, rows=None):
        """Column ``name`` as a ``BoolColumn`` (only ``rows`` if given)."""
        return self._fetch(name, "bool", rows)

    def column(self, name, rows=None):
        """Column ``name`` of any type as a ``weir.Column`` of Python values
        (``Decimal``, ``datetime``, ``date``, ``bytes``, ``list``,
        ``dict``); only ``rows``, in that order, if given."""
        i = self.index_of(name)
        raw = self._raw.typed_column(i) if rows is None else self._raw.typed_take(i, list(rows))
        return _values.Column(name, self.schema[i].type, iter(raw.nodes))

    def _kind(self, name, kind, rows):
        column = self.column(name, rows)
        if column.type.kind != kind:
            raise ColumnError(f"column `{name}` is {column.type}, not {kind}")
        return column

    def decimal(self, name, rows=None):
        """A ``decimal(P,S)`` column: ``decimal.Decimal`` values, exact."""
        return self._kind(name, "decimal", rows)

    def timestamp(self, name, rows=None):
        """A ``timestamp`` column: ``datetime`` values (aware when the
        column has a zone)."""
        return self._kind(name, "timestamp", rows)

    def date(self, name, rows=None):
        """A ``date`` column: ``datetime.date`` values."""
        return self._kind(name, "date", rows)

    def binary(self, name, rows=None):
        """A ``binary`` column: ``bytes`` values."""
        return self._kind(name, "binary", rows)
