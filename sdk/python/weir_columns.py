"""Arrow-layout columns for Weir operators in Python: reading the host's
batch columns into Python lists and building output columns from them.

Put this file on componentize-py's module path (``-p``) next to your
operator; it works with any Weir world (it uses only the shared types)::

    from weir_columns import strings, numbers, utf8_column, number_column

    card = strings(batch.column(i), batch.num_rows())   # bytes or None
    out = t.OutputColumn("score", number_column(t.Values_Float64, scores, 0.0))
"""

from weir.output import validity_bitmap
from wit_world.imports import types as t


def validity(column, n):
    """Per-row validity from an Arrow bitmap (None: every row valid)."""
    bitmap = column.validity
    if bitmap is None:
        return None
    return [bool(bitmap[i >> 3] & (1 << (i & 7))) for i in range(n)]


def strings(column, n):
    """A utf8 column as a list of bytes (None for nulls)."""
    values = column.values.value
    offsets, data = values.offsets, values.data
    valid = validity(column, n)
    return [
        data[offsets[i]:offsets[i + 1]] if valid is None or valid[i] else None
        for i in range(n)
    ]


def numbers(column, n):
    """An int64 or float64 column as a list (None for nulls)."""
    values = column.values.value
    valid = validity(column, n)
    if valid is None:
        return list(values)
    return [v if ok else None for v, ok in zip(values, valid)]


bitmap = validity_bitmap  # an Arrow validity bitmap (None: all valid)


def utf8_column(values):
    """An output utf8 column from bytes (None for nulls)."""
    offsets, data = [0], bytearray()
    for s in values:
        data += s or b""
        offsets.append(len(data))
    return t.Column(t.Values_Utf8(t.Utf8Values(offsets, bytes(data))), bitmap(values))


def number_column(kind, values, zero):
    """An output number column: kind is t.Values_Int64 or t.Values_Float64,
    zero fills the slots of nulls."""
    return t.Column(kind([zero if v is None else v for v in values]), bitmap(values))
