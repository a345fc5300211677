"""{{name}}: emits the payments whose amount is above the configured threshold."""

# Imported up front: componentize-py snapshots the interpreter after the
# imports, and the sandbox has no filesystem to import anything from later.
import atexit  # noqa: F401
import json
import traceback  # noqa: F401

import wit_world
from componentize_py_types import Err
from wit_world.imports import types as t

# componentize-py makes a new WitWorld object per call: keep state here.
_CONFIG = {}


def _valid(column, row):
    return column.validity is None or bool(column.validity[row >> 3] & (1 << (row & 7)))


class WitWorld(wit_world.WitWorld):
    def init(self, config):
        try:
            _CONFIG["threshold"] = float(json.loads(config)["threshold"])
        except Exception as e:
            raise Err(t.OperatorError_InvalidConfig(f"expected {{\"threshold\": <number>}}: {e}"))

    def process(self, ctx, input):
        try:
            index = {f.name: i for i, f in enumerate(input.schema())}
            amounts = input.column(index["amount"])
            rows = [
                r
                for r, a in enumerate(amounts.values.value)
                if _valid(amounts, r) and a > _CONFIG["threshold"]
            ]
            ids = input.take(index["txn_id"], rows).values.value
            return t.Output(
                len(rows),
                [
                    t.OutputColumn("txn_id", t.Column(t.Values_Utf8(t.Utf8Values(ids.offsets, ids.data)), None)),
                    t.OutputColumn("amount", t.Column(t.Values_Float64([amounts.values.value[r] for r in rows]), None)),
                ],
            )
        except Err:
            raise
        except Exception as e:
            raise Err(t.OperatorError_Failed(f"{type(e).__name__}: {e}"))
