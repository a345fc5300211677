"""`window-kinds` in Python, a test guest: the Python SDK's windows
(sdk/python/weir_window.py) of the configured kind and output mode over
`card_id`, `ts` and `amount`, emitting one row per window reported —
"update" rows from `add` in update mode, "close" rows when the watermark
closes a window — exactly as the Rust `window-kinds` does, so the tests
hold all three languages to the same windows computed offline. Written on
the SDK (`weir.Operator`, `on_timers`), as docs/operators.md shows.

Config: {"kind": "tumbling" | "sliding" | "session", "size_ms", "slide_ms",
"gap_ms", "emit": "close" | "update"}.
"""

import json

import weir
from weir_window import Row, Windows


def _windows(config):
    c = json.loads(config)
    kind = c["kind"]
    if kind == "tumbling":
        w = Windows.tumbling(c["size_ms"])
    elif kind == "sliding":
        w = Windows.sliding(c["size_ms"], c["slide_ms"])
    elif kind == "session":
        w = Windows.session(c["gap_ms"])
    else:
        raise weir.ConfigError(f"unknown kind {kind!r}")
    return w.emit("update" if c["emit"] == "update" else "close").collect_rows(True)


def _output(rows):
    """rows: (what, Window) pairs, as the Rust guest's columns."""
    out = weir.Output()
    out.utf8("what", [what for what, _ in rows])
    out.utf8("card_id", [w.key for _, w in rows])
    out.int64("start", [w.start_ms for _, w in rows])
    out.int64("end", [w.end_ms for _, w in rows])
    out.int64("count", [w.agg.count for _, w in rows])
    out.float64("sum", [w.agg.sum for _, w in rows])
    out.float64("min", [w.agg.min for _, w in rows])
    out.float64("max", [w.agg.max for _, w in rows])
    out.utf8("txns", [b",".join(w.rows) for _, w in rows])
    return out


class WindowKinds(weir.Operator):
    def __init__(self, config):
        self.windows = _windows(config)

    def process(self, ctx, batch):
        card = batch.utf8("card_id").to_bytes_list()
        ts = batch.int64("ts").to_list()
        amount = batch.float64("amount").to_list()
        txn = batch.utf8("txn_id").to_bytes_list()
        rows = [
            Row(c, t, a, x)
            for c, t, a, x in zip(card, ts, amount, txn)
            if None not in (c, t, a, x)
        ]
        added = self.windows.add(rows)
        return _output([("update", w) for w in added.updated])

    def on_timers(self, ctx, fired):
        return _output([("close", w) for w in self.windows.close(fired)])


WitWorld = weir.export(WindowKinds)
