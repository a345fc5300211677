"""Operators: subclass ``weir.Operator`` and export it (the Rust SDK's
``Operator`` trait and ``export_operator!``)::

    class Rules(weir.Operator):
        def __init__(self, config):          # init: parse the JSON config
            self.threshold = json.loads(config)["alert_threshold"]

        def process(self, ctx, batch):       # one micro-batch
            out = weir.Output()
            ...
            return out

    WitWorld = weir.export(Rules)            # componentize-py looks for WitWorld

An exception escaping ``__init__``, ``process``, ``on_timers`` or
``migrate`` fails the call with its type, message and where it was raised
(``ZeroDivisionError: division by zero (at rules.py:42 in process)``),
which ``weir run``, ``weir operator test`` and a refused deploy show.
Raise ``weir.ConfigError`` from ``__init__`` for a bad config.
"""

import json  # noqa: F401  (in the snapshot for operators' configs)
import os

import wit_world
from componentize_py_types import Err
from wit_world.imports import types as _t

from .columns import Batch
from .log import capture_stdio, flush_stdio
from .output import Output

__all__ = ["ConfigError", "EpochContext", "Operator", "describe", "export"]


class ConfigError(Exception):
    """The operator's config is wrong; the pipeline will not start."""


class EpochContext:
    """The epoch being processed: ``pipeline``, ``epoch`` and
    ``epoch_time_ms`` (the trigger time recorded in the offset WAL, so a
    replay sees the same value: use it instead of a clock)."""

    __slots__ = ("pipeline", "epoch", "epoch_time_ms")

    def __init__(self, raw):
        self.pipeline, self.epoch, self.epoch_time_ms = raw.pipeline, raw.epoch, raw.epoch_time_ms


class Operator:
    """Base class of Python operators; override ``process`` (and optionally
    ``on_timers(ctx, fired)`` and ``migrate(from_version)``)."""

    def __init__(self, config):
        self.config = config

    def process(self, ctx, batch):
        raise NotImplementedError("process")


def _frames(tb):
    while tb is not None:
        yield tb
        tb = tb.tb_next


def _at(tb):
    code = tb.tb_frame.f_code
    return f"{os.path.basename(code.co_filename)}:{tb.tb_lineno} in {code.co_name}"


def describe(exc):
    """``Type: message (at file.py:line in function)``: where it was raised
    and, when that is in a library, the operator's line that called it
    (``..., from rules.py:12 in __init__``). The SDK's frames are skipped."""
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    here = os.path.dirname(__file__)
    frames = list(_frames(exc.__traceback__))
    frames = [f for f in frames if os.path.dirname(f.tb_frame.f_code.co_filename) != here] or frames
    if not frames:
        return text
    raising = frames[-1]
    operator_file = frames[0].tb_frame.f_code.co_filename
    mine = [f for f in frames if f.tb_frame.f_code.co_filename == operator_file][-1]
    where = _at(raising) if mine is raising else f"{_at(raising)}, from {_at(mine)}"
    return f"{text} (at {where})"


def _failed(exc):
    if isinstance(exc, Err):
        return exc
    return Err(_t.OperatorError_Failed(describe(exc)))


def _output(result):
    if result is None:
        return _t.Output(0, [])
    if isinstance(result, Output):
        return result.to_wit()
    return result  # already a WIT output


def export(operator_class):
    """The ``WitWorld`` class componentize-py exports, running
    ``operator_class``: assign it to ``WitWorld`` at module level."""
    instance = []  # componentize-py makes a WitWorld per call; the operator lives here

    def current():
        if not instance:
            raise RuntimeError("process called before init")
        return instance[0]

    class WitWorld(wit_world.WitWorld):
        def init(self, config):
            capture_stdio()
            try:
                instance[:] = [operator_class(config)]
            except Err:
                raise
            except BaseException as e:  # noqa: BLE001 - every failure is reported
                message = str(e) if isinstance(e, ConfigError) else describe(e)
                raise Err(_t.OperatorError_InvalidConfig(message)) from None
            finally:
                flush_stdio()

        def process(self, ctx, input):
            capture_stdio()
            try:
                return _output(current().process(EpochContext(ctx), Batch(input)))
            except BaseException as e:  # noqa: BLE001
                raise _failed(e) from None
            finally:
                flush_stdio()

        def on_timers(self, ctx, fired):
            capture_stdio()
            try:
                op = current()
                if not hasattr(op, "on_timers"):
                    return _t.Output(0, [])
                return _output(op.on_timers(EpochContext(ctx), fired))
            except BaseException as e:  # noqa: BLE001
                raise _failed(e) from None
            finally:
                flush_stdio()

        def migrate(self, from_version):
            capture_stdio()
            try:
                op = current()
                if hasattr(op, "migrate"):
                    op.migrate(from_version)
            except BaseException as e:  # noqa: BLE001
                raise _failed(e) from None
            finally:
                flush_stdio()

    WitWorld.__name__ = WitWorld.__qualname__ = "WitWorld"
    return WitWorld
