"""Columns of every type as Python values: ``decimal.Decimal`` for
``decimal(P,S)``, ``datetime`` for timestamps, ``date`` for dates,
``bytes`` for binary, ``list`` for lists and ``dict`` for structs — read
from the host's Arrow arrays and written back to them, exactly.

    amount = batch.decimal("amount")            # Decimal values, exact
    ts = batch.timestamp("ts")                  # aware datetimes (UTC)
    device = batch.column("device")             # any type: dicts here
    out.decimal("amount", values, 18, 2)        # never rounded: a value
    out.timestamp("ts", times, "ms", "UTC")     # that does not fit raises
    out.add("device", dicts, weir.struct_of([("id", "utf8"), ("ip", "utf8")]))

Decimal arithmetic rounds to the context's precision (28 digits unless
set): for sums of many amounts use ``decimal.localcontext(prec=38)``.
"""

import decimal
from datetime import date, datetime, timedelta, timezone
from itertools import accumulate

from wit_world.imports import types as _t

__all__ = [
    "Column",
    "DataType",
    "decimal_type",
    "list_of",
    "struct_of",
    "timestamp_type",
]

_UNITS = {
    _t.TimeUnit.SECOND: ("s", 1),
    _t.TimeUnit.MILLISECOND: ("ms", 1_000),
    _t.TimeUnit.MICROSECOND: ("us", 1_000_000),
    _t.TimeUnit.NANOSECOND: ("ns", 1_000_000_000),
}
_UNIT_OF = {name: unit for unit, (name, _) in _UNITS.items()}
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_EPOCH_NAIVE = datetime(1970, 1, 1)
_EPOCH_DAY = date(1970, 1, 1).toordinal()
_EXACT = decimal.Context(prec=80, traps=[decimal.Inexact, decimal.InvalidOperation])


class DataType:
    """A column's type: ``kind`` (``"int64"``, ``"float64"``, ``"bool"``,
    ``"utf8"``, ``"binary"``, ``"date"``, ``"decimal"``, ``"timestamp"``,
    ``"list"``, ``"struct"``) and its parameters: ``precision``/``scale``,
    ``unit``/``timezone``, ``item`` (a list's element type) or ``fields``
    (a struct's ``(name, DataType)`` pairs). ``str()`` spells it as the
    pipeline file does: ``decimal(18,2)``, ``timestamp(ms, UTC)``."""

    __slots__ = ("kind", "precision", "scale", "unit", "timezone", "item", "fields")

    def __init__(self, kind, precision=None, scale=None, unit=None, timezone=None, item=None, fields=None):
        self.kind, self.precision, self.scale = kind, precision, scale
        self.unit, self.timezone, self.item, self.fields = unit, timezone, item, fields

    def __eq__(self, other):
        return isinstance(other, DataType) and str(self) == str(other) and self.fields == other.fields

    def __repr__(self):
        return f"DataType({self})"

    def __str__(self):
        if self.kind == "decimal":
            return f"decimal({self.precision},{self.scale})"
        if self.kind == "timestamp":
            return f"timestamp({self.unit}, {self.timezone})" if self.timezone else f"timestamp({self.unit})"
        if self.kind == "list":
            return f"list<{self.item}>"
        return "boolean" if self.kind == "bool" else self.kind


def _of(type_):
    """A ``DataType`` from one or a basic type's name (``"utf8"``)."""
    if isinstance(type_, DataType):
        return type_
    if type_ in ("int64", "float64", "utf8", "binary", "date"):
        return DataType(type_)
    if type_ in ("bool", "boolean"):
        return DataType("bool")
    raise ValueError(f"`{type_}` is not a type: use a basic type's name or weir.decimal_type(...) and friends")


def decimal_type(precision, scale):
    """``decimal(precision, scale)``."""
    if not (1 <= precision <= 38 and 0 <= scale <= precision):
        raise ValueError(f"decimal({precision},{scale}) is not a decimal type (precision 1 to 38, scale 0 to precision)")
    return DataType("decimal", precision=precision, scale=scale)


def timestamp_type(unit="ms", tz=None):
    """``timestamp(unit, tz)``: unit ``s``, ``ms``, ``us`` or ``ns``; tz
    ``"UTC"`` or ``"+HH:MM"`` (``None``: wall-clock times)."""
    if unit not in _UNIT_OF:
        raise ValueError(f"`{unit}` is not a timestamp unit (s, ms, us, ns)")
    return DataType("timestamp", unit=unit, timezone=tz)


def list_of(item):
    """``list<item>``."""
    return DataType("list", item=_of(item))


def struct_of(fields):
    """A struct of ``(name, type)`` pairs, in order."""
    return DataType("struct", fields=[(name, _of(t)) for name, t in fields])


def type_from_nodes(nodes, index=0):
    """The ``(name, DataType, nullable)`` of WIT type node ``index``."""
    node = nodes[index]
    k = node.kind
    if isinstance(k, _t.NodeKind_Int64):
        t = DataType("int64")
    elif isinstance(k, _t.NodeKind_Float64):
        t = DataType("float64")
    elif isinstance(k, _t.NodeKind_Boolean):
        t = DataType("bool")
    elif isinstance(k, _t.NodeKind_Utf8):
        t = DataType("utf8")
    elif isinstance(k, _t.NodeKind_Binary):
        t = DataType("binary")
    elif isinstance(k, _t.NodeKind_Date32):
        t = DataType("date")
    elif isinstance(k, _t.NodeKind_Decimal128):
        t = DataType("decimal", precision=k.value.precision, scale=k.value.scale)
    elif isinstance(k, _t.NodeKind_Timestamp):
        t = DataType("timestamp", unit=_UNITS[k.value.unit][0], timezone=k.value.timezone)
    elif isinstance(k, _t.NodeKind_List):
        t = DataType("list", item=type_from_nodes(nodes, k.value)[1])
    else:
        t = DataType("struct", fields=[type_from_nodes(nodes, c)[:2] for c in k.value])
    return node.name, t, node.nullable


def _type_nodes(name, t, nodes):
    """Appends ``t``'s WIT type nodes (pre-order) to ``nodes``."""
    at = len(nodes)
    nodes.append(None)
    k = t.kind
    if k == "decimal":
        kind = _t.NodeKind_Decimal128(_t.DecimalType(t.precision, t.scale))
    elif k == "timestamp":
        kind = _t.NodeKind_Timestamp(_t.TimestampType(_UNIT_OF[t.unit], t.timezone))
    elif k == "list":
        child = len(nodes)
        _type_nodes("item", t.item, nodes)
        kind = _t.NodeKind_List(child)
    elif k == "struct":
        children = []
        for fname, ft in t.fields:
            children.append(len(nodes))
            _type_nodes(fname, ft, nodes)
        kind = _t.NodeKind_Struct(children)
    else:
        kind = {
            "int64": _t.NodeKind_Int64,
            "float64": _t.NodeKind_Float64,
            "bool": _t.NodeKind_Boolean,
            "utf8": _t.NodeKind_Utf8,
            "binary": _t.NodeKind_Binary,
            "date": _t.NodeKind_Date32,
        }[k]()
    nodes[at] = _t.TypeNode(name, kind, True)


def _zone(tz):
    if tz is None:
        return None
    if tz in ("UTC", "Z", "+00:00"):
        return timezone.utc
    sign = -1 if tz[0] == "-" else 1
    hours, minutes = tz[1:].split(":")
    return timezone(sign * timedelta(hours=int(hours), minutes=int(minutes)))


class Column:
    """A column of any type as the host sent it: ``len(column)``,
    ``column[row]`` and ``to_list()`` give Python values (``None`` for
    nulls); ``field(name)`` is a struct's field as a column. Pass it to
    ``Output.column`` to emit it unchanged."""

    __slots__ = ("name", "type", "_node", "_children")

    def __init__(self, name, type_, nodes):
        self.name, self.type = name, type_
        self._node = next(nodes)
        if type_.kind == "list":
            self._children = [Column("item", type_.item, nodes)]
        elif type_.kind == "struct":
            self._children = [Column(f, t, nodes) for f, t in type_.fields]
        else:
            self._children = []

    def __len__(self):
        return self._node.len

    def field(self, name):
        """A struct's field ``name`` as a ``Column``."""
        for (fname, _), child in zip(self.type.fields or [], self._children):
            if fname == name:
                return child
        raise KeyError(f"`{self.name}` ({self.type}) has no field `{name}`")

    def __getitem__(self, row):
        if not 0 <= row < len(self):
            raise IndexError(f"row {row} of a column of {len(self)} rows")
        return self._values(row, row + 1)[0]

    def to_list(self):
        """Every row's value, ``None`` for nulls."""
        return self._values(0, len(self))

    def _values(self, start, end):
        node, k = self._node, self.type.kind
        raw = node.values
        if k == "int64":
            vals = memoryview(raw).cast("q")[start:end].tolist()
        elif k == "float64":
            vals = memoryview(raw).cast("d")[start:end].tolist()
        elif k == "bool":
            vals = [bool((raw[i >> 3] >> (i & 7)) & 1) for i in range(start, end)]
        elif k in ("utf8", "binary"):
            o = node.offsets
            vals = [bytes(raw[o[i]:o[i + 1]]) for i in range(start, end)]
            if k == "utf8":
                vals = [v.decode() for v in vals]
        elif k == "date":
            vals = [date.fromordinal(_EPOCH_DAY + d) for d in memoryview(raw).cast("i")[start:end]]
        elif k == "decimal":
            scale = self.type.scale
            vals = [
                decimal.Decimal(f"{int.from_bytes(raw[16 * i:16 * i + 16], 'little', signed=True)}E-{scale}")
                for i in range(start, end)
            ]
        elif k == "timestamp":
            vals = [self._instant(c) for c in memoryview(raw).cast("q")[start:end]]
        elif k == "list":
            items, o = self._children[0], node.offsets
            vals = [items._values(o[i], o[i + 1]) for i in range(start, end)]
        else:
            cols = [(fname, c._values(start, end)) for (fname, _), c in zip(self.type.fields, self._children)]
            vals = [{fname: vs[i] for fname, vs in cols} for i in range(end - start)]
        if node.validity is None:
            return vals
        v = node.validity
        return [x if (v[(start + i) >> 3] >> ((start + i) & 7)) & 1 else None for i, x in enumerate(vals)]

    def _instant(self, count):
        per = _PER[self.type.unit]
        if per == 1_000_000_000 and count % 1000:
            raise ValueError(
                f"column `{self.name}`: {count} ns has digits below a microsecond, which datetime cannot hold"
            )
        micros = count * 1_000_000 // per
        zone = _zone(self.type.timezone)
        base = _EPOCH if zone else _EPOCH_NAIVE
        at = base + timedelta(microseconds=micros)
        return at.astimezone(zone) if zone else at

    def counts(self):
        """A timestamp column's values as integer counts of its unit
        (``None`` for nulls), exact where ``datetime`` is not (nanoseconds)."""
        if self.type.kind != "timestamp":
            raise TypeError(f"column `{self.name}` is {self.type}, not a timestamp")
        values = memoryview(self._node.values).cast("q").tolist()
        v = self._node.validity
        if v is None:
            return values
        return [x if (v[i >> 3] >> (i & 7)) & 1 else None for i, x in enumerate(values)]

    def arrays(self):
        """The WIT arrays (pre-order), for passing the column on unchanged."""
        out = [self._node]
        for c in self._children:
            out.extend(c.arrays())
        return out


_PER = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}


def validity_bitmap(values):
    """An Arrow validity bitmap, or None when no value is None."""
    if None not in values:
        return None
    bits = bytearray((len(values) + 7) // 8)
    for i, v in enumerate(values):
        if v is not None:
            bits[i >> 3] |= 1 << (i & 7)
    return bytes(bits)


def _unscaled(value, t):
    """The exact unscaled integer of ``value`` at ``t``'s scale; raises
    unless it fits ``decimal(P,S)`` without rounding."""
    try:
        d = value if isinstance(value, decimal.Decimal) else decimal.Decimal(value)
        scaled = _EXACT.scaleb(d, t.scale)
        unscaled = int(_EXACT.to_integral_exact(scaled))
    except (decimal.Inexact, decimal.InvalidOperation, TypeError, ValueError):
        raise ValueError(f"{value!r} does not fit {t} exactly") from None
    if abs(unscaled) >= 10**t.precision:
        raise ValueError(f"{value!r} has more digits than {t} holds")
    return unscaled


def _count(value, t):
    """A timestamp's count of ``t.unit``s: ints are counts already."""
    if isinstance(value, int):
        return value
    per = _PER[t.unit]
    delta = value - (_EPOCH if value.tzinfo else _EPOCH_NAIVE)
    micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    if (micros * per) % 1_000_000:
        raise ValueError(f"{value} has digits finer than {t.unit}")
    return micros * per // 1_000_000


def encode(values, t):
    """The WIT arrays (pre-order) of Python ``values`` of type ``t``."""
    values = list(values)
    n, k = len(values), t.kind
    offsets, raw, children = [], b"", []
    if k == "int64":
        raw = memoryview(bytearray(8 * n)).cast("q")
        for i, v in enumerate(values):
            raw[i] = 0 if v is None else v
        raw = raw.tobytes()
    elif k == "float64":
        raw = memoryview(bytearray(8 * n)).cast("d")
        for i, v in enumerate(values):
            raw[i] = 0.0 if v is None else float(v)
        raw = raw.tobytes()
    elif k == "bool":
        bits = bytearray((n + 7) // 8)
        for i, v in enumerate(values):
            if v:
                bits[i >> 3] |= 1 << (i & 7)
        raw = bytes(bits)
    elif k in ("utf8", "binary"):
        parts = [b"" if v is None else v.encode() if isinstance(v, str) else bytes(v) for v in values]
        offsets = [0, *accumulate(map(len, parts))]
        raw = b"".join(parts)
    elif k == "date":
        days = memoryview(bytearray(4 * n)).cast("i")
        for i, v in enumerate(values):
            days[i] = 0 if v is None else v if isinstance(v, int) else v.toordinal() - _EPOCH_DAY
        raw = days.tobytes()
    elif k == "decimal":
        raw = b"".join((0 if v is None else _unscaled(v, t)).to_bytes(16, "little", signed=True) for v in values)
    elif k == "timestamp":
        counts = memoryview(bytearray(8 * n)).cast("q")
        for i, v in enumerate(values):
            counts[i] = 0 if v is None else _count(v, t)
        raw = counts.tobytes()
    elif k == "list":
        items = [x for v in values if v is not None for x in v]
        offsets = [0, *accumulate(0 if v is None else len(v) for v in values)]
        children = encode(items, t.item)
    else:
        for fname, ft in t.fields:
            children.extend(encode([None if v is None else v.get(fname) for v in values], ft))
    node = _t.ArrayNode(n, validity_bitmap(values), offsets, raw)
    return [node, *children]


def typed_column(name, values, t):
    """A WIT typed output column of Python ``values``."""
    nodes = []
    _type_nodes(name, t, nodes)
    return _t.TypedOutputColumn(_t.ColumnType(nodes), _t.ArrayColumn(encode(values, t)))


def passed_column(name, column):
    """A WIT typed output column of an input ``Column``, unchanged."""
    nodes = []
    _type_nodes(name, column.type, nodes)
    return _t.TypedOutputColumn(_t.ColumnType(nodes), _t.ArrayColumn(column.arrays()))


def basic_as_typed(output_column, rows):
    """A basic WIT output column as a typed one (its values' bytes)."""
    c = output_column.column
    v = c.values
    if isinstance(v, _t.Values_Int64):
        t, node = DataType("int64"), _t.ArrayNode(rows, c.validity, [], encode(v.value, DataType("int64"))[0].values)
    elif isinstance(v, _t.Values_Float64):
        t, node = DataType("float64"), _t.ArrayNode(rows, c.validity, [], encode(v.value, DataType("float64"))[0].values)
    elif isinstance(v, _t.Values_Boolean):
        t, node = DataType("bool"), _t.ArrayNode(rows, c.validity, [], bytes(v.value))
    else:
        t, node = DataType("utf8"), _t.ArrayNode(rows, c.validity, list(v.value.offsets), bytes(v.value.data))
    nodes = []
    _type_nodes(output_column.name, t, nodes)
    return _t.TypedOutputColumn(_t.ColumnType(nodes), _t.ArrayColumn([node]))
