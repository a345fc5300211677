"""Keyed state kept by the host (RocksDB), committed with the epoch: the
Rust SDK's ``weir_sdk::state``. Keys and values are ``bytes``; what an
epoch writes it reads back at once, other epochs only once it committed.
A replayed epoch reads exactly what its first run read.

With ``parallelism`` above 1, a task may only touch keys of its own key
groups: start keys with the row's routing key (e.g. the card id), or use
``grouped_key`` for keys that gather many routing keys.

Batch your calls (``get_many``/``put_many``): one host call per batch
instead of one per row.
"""

from wit_world.imports import state as _s

__all__ = [
    "get",
    "put",
    "delete",
    "get_many",
    "put_many",
    "delete_many",
    "scan",
    "key_group",
    "grouped_key",
    "ungrouped",
    "pack_byte_strings",
]

_GROUPED = b"\xffkg"


def pack_byte_strings(items):
    """``bytes`` values in the host's ``byte-strings`` layout (offsets + data)."""
    offsets, data = [0], bytearray()
    for b in items:
        data += b
        offsets.append(len(data))
    return _s.ByteStrings(offsets, bytes(data))


def _unpack(strings):
    o, d = strings.offsets, strings.data
    return [d[o[i]:o[i + 1]] for i in range(len(o) - 1)]


def get(key):
    """The value of ``key``, or ``None``."""
    return _s.get(key)


def put(key, value, ttl_ms=None):
    """Sets ``key``; with ``ttl_ms`` it reads as absent from epoch time + ttl on."""
    _s.put(key, value, ttl_ms)


def delete(key):
    """Removes ``key``."""
    _s.delete(key)


def get_many(keys):
    """The values of ``keys`` in order, ``None`` where absent: one host call."""
    values, present = _s.get_many(pack_byte_strings(keys))
    found = _unpack(values)
    return [v if (present[i >> 3] >> (i & 7)) & 1 else None for i, v in enumerate(found)]


def put_many(items, ttl_ms=None):
    """Sets every ``(key, value)`` of ``items``: one host call."""
    items = list(items)
    _s.put_many(pack_byte_strings(k for k, _ in items), pack_byte_strings(v for _, v in items), ttl_ms)


def delete_many(keys):
    """Removes every key of ``keys``: one host call."""
    _s.delete_many(pack_byte_strings(keys))


def scan(start, end=None, limit=1000):
    """Up to ``limit`` ``(key, value)`` pairs with ``start <= key < end``, in key order."""
    keys, values = _s.scan(start, end, limit)
    return list(zip(_unpack(keys), _unpack(values)))


def key_group(routing_key):
    """The key group of ``routing_key`` (which task owns it)."""
    return _s.key_group(routing_key)


def grouped_key(routing_key, rest):
    """``rest`` in the key group of ``routing_key`` (the Rust SDK's
    ``grouped_key``): for keys that gather many routing keys."""
    return _GROUPED + key_group(routing_key).to_bytes(2, "big") + rest


def ungrouped(key):
    """``key`` without a ``grouped_key`` header, if it has one."""
    if key.startswith(_GROUPED) and len(key) >= len(_GROUPED) + 2:
        return key[len(_GROUPED) + 2:]
    return key
