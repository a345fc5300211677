"""weir: the Python SDK for Weir operators, the same shape as the Rust
``weir-sdk``. Build with componentize-py with ``sdk/python`` on the module
path (``weir operator new --lang python`` sets that up)::

    import weir

    class BigSpender(weir.Operator):
        def __init__(self, config):
            self.limit = json.loads(config)["limit"]

        def process(self, ctx, batch):
            amount = batch.float64("amount")
            txn = batch.utf8("txn_id")
            rows = [i for i in range(len(batch)) if (amount[i] or 0) > self.limit]
            out = weir.Output()
            out.utf8("txn_id", [txn.bytes_at(i) for i in rows])
            out.float64("amount", [amount[i] for i in rows])
            return out

    WitWorld = weir.export(BigSpender)

- ``Batch`` / ``Utf8Column`` / ``Int64Column`` / ``Float64Column`` /
  ``BoolColumn``: the input, column by column (``weir.columns``);
  ``batch.decimal``, ``timestamp``, ``date``, ``binary`` and ``column``
  (any type, nested ones too): ``weir.Column`` of ``Decimal``,
  ``datetime``, ``date``, ``bytes``, lists and dicts (``weir.values``);
- ``Output`` and ``emit``: rows out, to the default or a named output;
- ``weir.state``: keyed state; ``weir.watermark()``: event time;
- ``weir.log``: the host's log (``print`` goes there too);
- exceptions are reported with type, message, file and line.

Determinism: the operator sees no clock, no randomness (``random`` is
seeded once, when the component is built: every run draws the same
numbers), no filesystem and no network; time is ``ctx.epoch_time_ms`` and
the watermark, both recorded in the offset WAL.
"""

# Imported up front: componentize-py snapshots the interpreter after the
# operator module is imported, and the sandbox has no filesystem to import
# from later (its runtime imports `atexit` for resource handles and
# `traceback` when reporting errors).
import atexit  # noqa: F401
import traceback  # noqa: F401

from wit_world.imports import event_time as _event_time

from . import log, state
from .columns import Batch, BoolColumn, ColumnError, Field, Float64Column, Int64Column, Utf8Column
from .operator import ConfigError, EpochContext, Operator, describe, export
from .output import Output, emit
from .values import Column, DataType, decimal_type, list_of, struct_of, timestamp_type

__all__ = [
    "Batch",
    "BoolColumn",
    "Column",
    "DataType",
    "ColumnError",
    "ConfigError",
    "EpochContext",
    "Field",
    "Float64Column",
    "Int64Column",
    "Operator",
    "Output",
    "Utf8Column",
    "decimal_type",
    "describe",
    "emit",
    "export",
    "list_of",
    "log",
    "previous_watermark",
    "state",
    "struct_of",
    "timestamp_type",
    "watermark",
]


def watermark():
    """This epoch's event-time watermark (ms), or ``None`` before any row."""
    return _event_time.watermark()


def previous_watermark():
    """The watermark of the epoch before (what was already closed)."""
    return _event_time.previous_watermark()

