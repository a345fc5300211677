"""`window-kinds` in Python, a test guest: the Python SDK's windows
(sdk/python/weir_window.py) of the configured kind and output mode over
`card_id`, `ts` and `amount`, emitting one row per window reported —
"update" rows from `add` in update mode, "close" rows when the watermark
closes a window — exactly as the Rust `window-kinds` does, so the tests
hold all three languages to the same windows computed offline.

Config: {"kind": "tumbling" | "sliding" | "session", "size_ms", "slide_ms",
"gap_ms", "emit": "close" | "update"}.
"""

import atexit  # noqa: F401  (imported up front: see fraud_rules.py)
import json
import traceback  # noqa: F401

import wit_world
from componentize_py_types import Err
from weir_columns import number_column, numbers, strings, utf8_column
from weir_window import Row, WindowError, Windows
from wit_world.imports import types as t

# What `init` built (componentize-py makes a new WitWorld per call).
_WINDOWS = []


def _failed(e):
    return Err(t.OperatorError_Failed(f"{type(e).__name__}: {e}"))


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
        raise WindowError(f"unknown kind {kind!r}")
    return w.emit("update" if c["emit"] == "update" else "close").collect_rows(True)


def _output(rows):
    """rows: (what, Window) pairs, as the Rust guest's columns."""
    def col(f):
        return [f(what, w) for what, w in rows]

    return t.Output(
        len(rows),
        [
            t.OutputColumn("what", utf8_column(col(lambda what, w: what.encode()))),
            t.OutputColumn("card_id", utf8_column(col(lambda _, w: w.key))),
            t.OutputColumn("start", number_column(t.Values_Int64, col(lambda _, w: w.start_ms), 0)),
            t.OutputColumn("end", number_column(t.Values_Int64, col(lambda _, w: w.end_ms), 0)),
            t.OutputColumn("count", number_column(t.Values_Int64, col(lambda _, w: w.agg.count), 0)),
            t.OutputColumn("sum", number_column(t.Values_Float64, col(lambda _, w: w.agg.sum), 0.0)),
            t.OutputColumn("min", number_column(t.Values_Float64, col(lambda _, w: w.agg.min), 0.0)),
            t.OutputColumn("max", number_column(t.Values_Float64, col(lambda _, w: w.agg.max), 0.0)),
            t.OutputColumn("txns", utf8_column(col(lambda _, w: b",".join(w.rows)))),
        ],
    )


class WitWorld(wit_world.WitWorld):
    def init(self, config):
        try:
            _WINDOWS[:] = [_windows(config)]
        except Exception as e:
            raise Err(t.OperatorError_InvalidConfig(f"config: {type(e).__name__}: {e}"))

    def migrate(self, from_version):
        pass

    def process(self, ctx, input):
        try:
            n = input.num_rows()
            index = {f.name: i for i, f in enumerate(input.schema())}
            card = strings(input.column(index["card_id"]), n)
            ts = numbers(input.column(index["ts"]), n)
            amount = numbers(input.column(index["amount"]), n)
            txn = strings(input.column(index["txn_id"]), n)
            rows = [
                Row(bytes(card[r]), ts[r], amount[r], bytes(txn[r]))
                for r in range(n)
                if None not in (card[r], ts[r], amount[r], txn[r])
            ]
            added = _WINDOWS[0].add(rows)
            return _output([("update", w) for w in added.updated])
        except Exception as e:
            raise _failed(e)

    def on_timers(self, ctx, fired):
        try:
            return _output([("close", w) for w in _WINDOWS[0].close(fired)])
        except Exception as e:
            raise _failed(e)
