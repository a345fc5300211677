"""Named outputs for Weir operators in Python: rows for an output other
than the one ``process`` returns (the ``default`` output). The pipeline
routes each output to its own sinks (``[[sink]] output = "scores"``).
Emitted rows go with the epoch like returned ones: none if the epoch fails,
the same on replay.

Put this file on componentize-py's module path (``-p``) next to your
operator; it needs a world that imports ``weir:operator/outputs`` (every
Weir world does)::

    from weir_outputs import emit

    emit("scores", n, [t.OutputColumn("txn_id", utf8_column(txn)), ...])
"""

from wit_world.imports import outputs as _outputs
from wit_world.imports import types as t


def emit(name, num_rows, columns):
    """Sends ``num_rows`` rows (``columns``: a list of ``t.OutputColumn``)
    to output ``name`` (1 to 64 lowercase letters, digits, ``_`` or ``-``,
    starting with a letter). The host checks them like returned rows: a bad
    name or bad rows fail the epoch."""
    if num_rows:
        _outputs.emit(name, t.Output(num_rows, columns))
