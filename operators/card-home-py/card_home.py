"""`operators/card-home` in Python: each payment with its card's home
country from the pipeline's `cards` table (sdk/python/weir_lookup.py),
whether it was made away from home, the table version it read, and the
size and digest of its artifact `notes` (sdk/python/weir_artifacts.py). The
same output as the Rust operator, row for row.
"""

# Imported up front: componentize-py snapshots the interpreter after
# import, and the sandbox has no filesystem to import from later.
import atexit  # noqa: F401
import traceback  # noqa: F401

import wit_world
from componentize_py_types import Err
from weir_columns import strings, utf8_column, bitmap
from weir_lookup import get, version
from weir_artifacts import digest
from weir_artifacts import get as artifact
from wit_world.imports import types as t


def _bool_column(values):
    bits = bytearray((len(values) + 7) // 8)
    for i, v in enumerate(values):
        if v:
            bits[i >> 3] |= 1 << (i & 7)
    return t.Column(t.Values_Boolean(bytes(bits)), bitmap(values))


class WitWorld(wit_world.WitWorld):
    def init(self, config):
        pass

    def process(self, ctx, input):
        try:
            return self._run(input)
        except Err:
            raise
        except Exception as e:  # a bug here fails the epoch with its reason
            raise Err(t.OperatorError_Failed(f"{type(e).__name__}: {e}"))

    def _run(self, input):
        n = input.num_rows()
        index = {f.name: i for i, f in enumerate(input.schema())}
        card = strings(input.column(index["card_id"]), n)
        txn = strings(input.column(index["txn_id"]), n)
        country = strings(input.column(index["country"]), n)
        home = get("cards", card, ["home_country"])["home_country"]
        away = [h is not None and h != c for h, c in zip(home, country)]
        v = (version("cards") or "").encode()
        notes = artifact("notes")
        notes_bytes = 0 if notes is None else len(notes)
        notes_digest = (digest("notes") or "").encode()
        return t.Output(
            n,
            [
                t.OutputColumn("txn_id", utf8_column(txn)),
                t.OutputColumn("card_id", utf8_column(card)),
                t.OutputColumn("home_country", utf8_column(home)),
                t.OutputColumn("away", _bool_column(away)),
                t.OutputColumn("cards_version", utf8_column([v] * n)),
                t.OutputColumn("notes_bytes", t.Column(t.Values_Int64([notes_bytes] * n), None)),
                t.OutputColumn("notes_digest", utf8_column([notes_digest] * n)),
            ],
        )
