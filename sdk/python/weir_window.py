"""Event-time windows for Weir operators in Python, on the host's keyed
state and timers: tumbling, sliding (hop) and session windows per key, with
count, sum, min and max of a value and, if asked, the rows themselves.
A window is emitted when the watermark closes it (Spark's append mode) or
on every update (update mode).

The same semantics and the same stored form as the Rust SDK's
`weir_sdk::window` (and the JavaScript `weir_window.js`), so an operator
can be rewritten in another language and keep its open windows:

- windows are ``[start, end)`` of event time; tumbling and sliding starts
  are multiples of the slide; a session is ``[first, last + gap)`` and
  merges with any session it overlaps;
- a window closes in the epoch whose watermark reaches its end: its timer
  fires after the epoch's rows, so they are in it;
- a row is late for a window the epoch before had already closed
  (``end <= previous watermark``); it is left out and its index reported in
  ``Added.late``.

Build against the ``timer-operator`` world (``componentize-py -w
timer-operator``) and put this file on the module path (``-p``)::

    from weir_window import Windows, Row

    WINDOWS = Windows.tumbling(60_000).collect_rows(True)

    def process(self, ctx, batch):      # buffer each payment in its window
        added = WINDOWS.add([Row(card, ts, amount, txn) for ...])

    def on_timers(self, ctx, fired):    # the closed windows, final counts
        for w in WINDOWS.close(fired): ...
"""

import struct

from weir.state import pack_byte_strings
from wit_world.imports import event_time, state, timers

_AGG = struct.Struct("<Qddd")
_U32 = struct.Struct("<I")
_I64 = struct.Struct("<q")
_INF = float("inf")


class WindowError(Exception):
    """Bad window settings or corrupt window state."""


def _sortable(t):
    """Big-endian bytes whose byte order is the numeric order of t."""
    return ((t & 0xFFFFFFFFFFFFFFFF) ^ (1 << 63)).to_bytes(8, "big")


def _unsortable(b):
    v = int.from_bytes(b, "big") ^ (1 << 63)
    return v - (1 << 64) if v >= 1 << 63 else v


# The header of a key that names its key group (two big-endian bytes after
# it): with parallel tasks, a key that gathers many routing keys (every
# card's window ending at one time) is kept once per group, so that each
# task touches its own (the Rust SDK's `state::grouped_key`).
_GROUPED = b"\xffkg"


def _in_group(group, rest):
    return _GROUPED + group.to_bytes(2, "big") + rest


def _ungrouped(key):
    key = bytes(key)
    if key.startswith(_GROUPED) and len(key) >= len(_GROUPED) + 2:
        return key[len(_GROUPED) + 2:]
    return key


_pack = pack_byte_strings  # byte strings in the host's Arrow binary layout


def _unpack(strings):
    o, d = strings.offsets, strings.data
    return [bytes(d[o[i]:o[i + 1]]) for i in range(len(o) - 1)]


class Aggregate:
    """Count, sum, min and max of the values added to a window."""

    __slots__ = ("count", "sum", "min", "max")

    def __init__(self, count=0, sum=0.0, min=_INF, max=-_INF):
        self.count, self.sum, self.min, self.max = count, sum, min, max

    def add(self, value):
        self.count += 1
        self.sum += value
        self.min = value if value < self.min else self.min
        self.max = value if value > self.max else self.max

    def merge(self, other):
        self.count += other.count
        self.sum += other.sum
        self.min = other.min if other.min < self.min else self.min
        self.max = other.max if other.max > self.max else self.max

    def mean(self):
        return self.sum / self.count if self.count else float("nan")

    def encode(self):
        return _AGG.pack(self.count, self.sum, self.min, self.max)

    @staticmethod
    def decode(b, at=0):
        if len(b) < at + _AGG.size:
            raise WindowError("window state is corrupt")
        return Aggregate(*_AGG.unpack_from(b, at))


class Row:
    """One input row: its key (bytes), event time (ms), the value
    aggregated and, with collect_rows, the bytes kept for it."""

    __slots__ = ("key", "ts_ms", "value", "payload")

    def __init__(self, key, ts_ms, value, payload=b""):
        self.key, self.ts_ms, self.value, self.payload = key, ts_ms, value, payload


class Window:
    """A window of one key as emitted: extent, aggregate and (collecting)
    the payloads of its rows in the order added."""

    __slots__ = ("key", "start_ms", "end_ms", "agg", "rows")

    def __init__(self, key, start_ms, end_ms, agg, rows=()):
        self.key, self.start_ms, self.end_ms = key, start_ms, end_ms
        self.agg, self.rows = agg, list(rows)


class Added:
    """What Windows.add did: indices of late rows; in update mode, every
    window the batch changed with its aggregate so far, by end then key."""

    __slots__ = ("late", "updated")

    def __init__(self, late, updated):
        self.late, self.updated = late, updated


def _push_part(chunk, key, agg, payloads):
    chunk += _U32.pack(len(key)) + key + agg.encode() + _U32.pack(len(payloads))
    for p in payloads:
        chunk += _U32.pack(len(p)) + p


def _read_parts(chunk):
    """(key, aggregate, payloads) of each part of a chunk."""
    at, n = 0, len(chunk)
    try:
        while at < n:
            (klen,) = _U32.unpack_from(chunk, at)
            key = bytes(chunk[at + 4:at + 4 + klen])
            at += 4 + klen
            agg = Aggregate.decode(chunk, at)
            at += _AGG.size
            (count,) = _U32.unpack_from(chunk, at)
            at += 4
            rows = []
            for _ in range(count):
                (rlen,) = _U32.unpack_from(chunk, at)
                rows.append(bytes(chunk[at + 4:at + 4 + rlen]))
                at += 4 + rlen
            if at > n:
                raise WindowError("window state is corrupt")
            yield key, agg, rows
    except struct.error:
        raise WindowError("window state is corrupt")


def _ends(ts, size, slide):
    """Ends of the [end - size, end) windows holding ts, latest first."""
    end = (ts // slide + 1) * slide + size - slide
    while end > ts:
        yield end
        end -= slide


class Windows:
    """A windowed aggregation over the operator's state."""

    def __init__(self, kind, size_ms=0, slide_ms=0, gap_ms=0):
        ok = {
            "tumbling": size_ms > 0,
            "sliding": slide_ms > 0 and size_ms >= slide_ms,
            "session": gap_ms > 0,
        }.get(kind)
        if not ok:
            raise WindowError(
                f"window {kind} (size {size_ms}, slide {slide_ms}, gap {gap_ms}): sizes must "
                "be positive and a slide no longer than the size"
            )
        self.kind, self.size, self.slide, self.gap = kind, size_ms, slide_ms or size_ms, gap_ms
        self.on_update = False
        self.collect = False
        self.prefix = b"\xffwin\x00"
        self._groups = {}

    def _group(self, key):
        """The key group the host routes key's rows by (asked once per key)."""
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = state.key_group(key)
        return group

    @staticmethod
    def tumbling(size_ms):
        return Windows("tumbling", size_ms=size_ms)

    @staticmethod
    def sliding(size_ms, slide_ms):
        return Windows("sliding", size_ms=size_ms, slide_ms=slide_ms)

    @staticmethod
    def session(gap_ms):
        return Windows("session", gap_ms=gap_ms)

    def emit(self, mode):
        """"close" (default: once, final) or "update" (every change)."""
        if mode not in ("close", "update"):
            raise WindowError(f"emit {mode!r}: expected \"close\" or \"update\"")
        self.on_update = mode == "update"
        return self

    def collect_rows(self, collect=True):
        """Keep each row's payload, handed back in Window.rows on close."""
        self.collect = collect
        return self

    def named(self, name):
        """Names the aggregation so one operator can keep several apart."""
        name = name.encode()[:255]
        self.prefix = b"\xffwin" + bytes([len(name)]) + name
        return self

    def owns(self, timer):
        """Whether a fired timer is this aggregation's."""
        return _ungrouped(timer.key).startswith(self.prefix)

    def _key_prefix(self, key):
        # In the key group of the routing key: the task that gets the key's
        # rows owns its sessions and running aggregates.
        return _in_group(self._group(key), self.prefix + b"k" + len(key).to_bytes(4, "big") + key)

    def _window_key(self, key, start):
        return self._key_prefix(key) + _sortable(start)

    def _parse(self, wkey):
        wkey = _ungrouped(wkey)
        rest = wkey[len(self.prefix) + 1:]
        n = int.from_bytes(rest[:4], "big")
        if not wkey.startswith(self.prefix + b"k") or len(rest) != 4 + n + 8:
            raise WindowError("window state key is corrupt")
        return bytes(rest[4:4 + n]), _unsortable(rest[4 + n:])

    def _end_key(self, group, end):
        """The list (and timer) of key group group's windows ending at end."""
        return _in_group(group, self._end_name(end))

    def _end_name(self, end):
        return self.prefix + b"e" + _sortable(end)

    def add(self, rows):
        """Adds a batch's rows (a list of Row) to their windows."""
        closed_through = event_time.previous_watermark()
        if self.kind == "session":
            return self._add_sessions(rows, closed_through)
        return self._add_aligned(rows, closed_through)

    def close(self, fired):
        """The windows the fired timers close, by end then key, with final
        aggregates and (collecting) rows; their state is removed. Timers of
        other owners are skipped."""
        closed = []
        for timer in fired:
            if not self.owns(timer):
                continue
            if self.kind == "session":
                w = self._close_session(timer)
                if w is not None:
                    closed.append(w)
            else:
                closed.extend(self._close_end(timer))
        # By end then key, as documented and as the Rust SDK emits them:
        # timers fire by end then key group, which is not key order.
        closed.sort(key=lambda w: (w.end_ms, w.key))
        return closed

    # Tumbling and sliding: state per window end and key group (see the
    # Rust SDK's aligned.rs): one chunk per (end, group) per batch, one
    # timer per (end, group).

    def _add_aligned(self, rows, closed_through):
        late, by_end = [], {}
        for i, row in enumerate(rows):
            kept = False
            group = self._group(row.key)
            for end in _ends(row.ts_ms, self.size, self.slide):
                if closed_through is not None and end <= closed_through:
                    continue
                kept = True
                part = by_end.setdefault((end, group), {}).get(row.key)
                if part is None:
                    part = by_end[(end, group)][row.key] = (Aggregate(), [])
                part[0].add(row.value)
                if self.collect:
                    part[1].append(row.payload)
            if not kept:
                late.append(i)
        keys, chunks = [], []
        for end, group in sorted(by_end):
            chunk = bytearray()
            parts = by_end[(end, group)]
            for key in sorted(parts):
                agg, payloads = parts[key]
                _push_part(chunk, key, agg, payloads)
            keys.append(self._end_key(group, end))
            chunks.append(bytes(chunk))
            timers.set(keys[-1], end)
        if keys:
            state.append_many(_pack(keys), _pack(chunks))
        updated = self._update_aggregates(by_end) if self.on_update else []
        return Added(late, updated)

    def _update_aggregates(self, by_end):
        touched = [
            (end, key, by_end[(end, group)][key][0])
            for end, group in sorted(by_end)
            for key in sorted(by_end[(end, group)])
        ]
        if not touched:
            return []
        wkeys = [self._window_key(key, end - self.size) for end, key, _ in touched]
        values, present = state.get_many(_pack(wkeys))
        stored = _unpack(values)
        updated, writes = [], []
        for i, (end, key, agg) in enumerate(touched):
            total = Aggregate()
            total.merge(agg)
            if present[i >> 3] & (1 << (i & 7)):
                total.merge(Aggregate.decode(stored[i]))
            writes.append(total.encode())
            updated.append(Window(key, end - self.size, end, total))
        state.put_many(_pack(wkeys), _pack(writes), None)
        return updated

    def _close_end(self, timer):
        end = timer.at_ms
        # The timer names the list: one group's (or, written before key
        # groups, every key's) windows ending at end.
        if _ungrouped(timer.key) != self._end_name(end):
            return []
        lkey = bytes(timer.key)
        merged = {}
        for chunk in _unpack(state.read_list(lkey)):
            for key, agg, rows in _read_parts(chunk):
                total = merged.get(key)
                if total is None:
                    total = merged[key] = (Aggregate(), [])
                total[0].merge(agg)
                total[1].extend(rows)
        state.clear_list(lkey)
        keys = sorted(merged)
        if self.on_update and keys:
            state.delete_many(_pack([self._window_key(k, end - self.size) for k in keys]))
        return [Window(k, end - self.size, end, merged[k][0], merged[k][1]) for k in keys]

    # Sessions: each under its own key (key, start) with a timer at its end.

    def _add_sessions(self, rows, closed_through):
        late, by_key = [], {}
        for i, row in enumerate(rows):
            if closed_through is not None and row.ts_ms + self.gap <= closed_through:
                late.append(i)
            else:
                by_key.setdefault(row.key, []).append(i)
        updated = []
        for key in sorted(by_key):
            updated.extend(self._merge_sessions(key, rows, by_key[key]))
        return Added(late, updated)

    def _stored_sessions(self, key):
        prefix = self._key_prefix(key)
        end = _prefix_end(prefix)
        start, found = prefix, []
        while True:
            keys, values = state.scan(start, end, 1024)
            page = list(zip(_unpack(keys), _unpack(values)))
            found.extend(page)
            if len(page) < 1024:
                return found
            start = page[-1][0] + b"\x00"

    def _merge_sessions(self, key, rows, indices):
        # A piece: [start, end, agg, stored (start, end) list, new rows, payloads].
        pieces = []
        for wkey, value in self._stored_sessions(key):
            _, start = self._parse(wkey)
            agg = Aggregate.decode(value)
            if len(value) < _AGG.size + 8:
                raise WindowError("window state is corrupt")
            (end,) = _I64.unpack_from(value, _AGG.size)
            pieces.append([start, end, agg, [(start, end)], 0, []])
        for i in indices:
            row = rows[i]
            agg = Aggregate()
            agg.add(row.value)
            payloads = [row.payload] if self.collect else []
            pieces.append([row.ts_ms, row.ts_ms + self.gap, agg, [], 1, payloads])
        pieces.sort(key=lambda p: p[0])  # stable: stored first, rows in order
        merged = []
        for p in pieces:
            if merged and p[0] < merged[-1][1]:
                cur = merged[-1]
                cur[1] = max(cur[1], p[1])
                cur[2].merge(p[2])
                cur[3].extend(p[3])
                cur[4] += p[4]
                cur[5].extend(p[5])
            else:
                merged.append(p)
        updated = []
        for start, end, agg, stored, added, payloads in merged:
            if not added:
                continue
            self._write_session(key, start, end, agg, stored, payloads)
            if self.on_update:
                updated.append(Window(key, start, end, agg))
        return updated

    def _write_session(self, key, start, end, agg, stored, payloads):
        wkey = self._window_key(key, start)
        for old_start, old_end in stored:
            old_key = self._window_key(key, old_start)
            timers.delete(old_key, old_end)
            if old_start != start:
                state.delete(old_key)
                if self.collect:
                    moved = _unpack(state.read_list(old_key))
                    if moved:
                        state.append_many(_pack([wkey] * len(moved)), _pack(moved))
                    state.clear_list(old_key)
        state.put(wkey, agg.encode() + _I64.pack(end), None)
        timers.set(wkey, end)
        if payloads:
            state.append_many(_pack([wkey] * len(payloads)), _pack(payloads))

    def _close_session(self, timer):
        wkey = bytes(timer.key)
        value = state.get(wkey)
        if value is None:
            return None
        key, start = self._parse(wkey)
        agg = Aggregate.decode(value)
        (end,) = _I64.unpack_from(value, _AGG.size)
        if end != timer.at_ms:
            return None
        rows = []
        if self.collect:
            rows = _unpack(state.read_list(wkey))
            state.clear_list(wkey)
        state.delete(wkey)
        return Window(key, start, end, agg, rows)


def _prefix_end(prefix):
    """The smallest key above every key starting with prefix (None: none)."""
    end = bytearray(prefix)
    while end:
        last = end.pop()
        if last < 255:
            end.append(last + 1)
            return bytes(end)
    return None
