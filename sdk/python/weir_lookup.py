"""Reference tables for Weir operators in Python: the tables the pipeline
declares (``[[lookup]] name = "cards"``), read a whole column of keys per
call, at the versions the epoch's ``offsets/N`` records (a replay reads what
the first run read).

Put this file on componentize-py's module path (``-p``) next to your
operator; every Weir world imports ``weir:operator/lookup``::

    from weir_lookup import get, version

    home = get("cards", card_ids, ["home_country"])["home_country"]
"""

from componentize_py_types import Err
from weir_columns import numbers, strings, utf8_column
from wit_world.imports import lookup as _lookup
from wit_world.imports import types as t


def _keys_column(keys):
    """A key column from bytes/str (utf8 keys) or ints (int64 keys)."""
    if any(isinstance(k, int) for k in keys if k is not None):
        return t.Column(t.Values_Int64([k or 0 for k in keys]), None)
    return utf8_column([k.encode() if isinstance(k, str) else k for k in keys])


def get(table, keys, columns):
    """Columns ``columns`` of table ``table``'s rows for ``keys`` (a list of
    bytes or str, or of ints for an int64 key), in the keys' order, as a dict
    of lists: bytes for utf8 columns, numbers otherwise, None where a key is
    not in the table. Raises the operator error the host names (an unknown
    table or column)."""
    try:
        found = _lookup.get(table, _keys_column(keys), list(columns))
    except Err as e:
        raise Err(t.OperatorError_Failed(f"lookup: {e.value}"))
    n = len(keys)
    out = {}
    for name, column in zip(columns, found):
        if isinstance(column.values, t.Values_Utf8):
            out[name] = strings(column, n)
        else:
            out[name] = numbers(column, n)
    return out


def version(table):
    """The version of ``table`` this epoch reads (``sha256:…``), or None."""
    return _lookup.version(table)
