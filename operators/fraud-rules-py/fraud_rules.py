"""The fraud rules of `operators/fraud-rules`, in Python.

Built into a Weir operator component with componentize-py (see build.sh):
the same JSON config, the same rules and the same output columns as the
Rust operator, so the two are interchangeable in a pipeline.
"""

# Imported up front: componentize-py snapshots the interpreter after
# import, and the sandbox has no filesystem to import from later (the
# runtime imports `atexit` for resource handles and `traceback` on errors).
import atexit  # noqa: F401
import json
import traceback  # noqa: F401

import wit_world
from componentize_py_types import Err
from wit_world.imports import types as t

RULES = ("amount_above", "country_mismatch", "merchant_in", "currency_not_in")


def _config_error(message):
    return Err(t.OperatorError_InvalidConfig(f"fraud-rules config: {message}"))


def _parse(config):
    """Validates the config like the Rust operator does; returns (threshold, rules)."""
    try:
        raw = json.loads(config)
    except ValueError as e:
        raise _config_error(str(e))
    if not isinstance(raw, dict) or set(raw) != {"alert_threshold", "rules"}:
        raise _config_error("expected exactly `alert_threshold` and `rules`")
    threshold = raw["alert_threshold"]
    rules = raw["rules"]
    if not isinstance(threshold, (int, float)) or threshold != threshold:
        raise _config_error("`alert_threshold` must be a finite number")
    if not isinstance(rules, list) or not rules:
        raise _config_error("`rules` is empty")
    if len(rules) > 63:
        raise _config_error("at most 63 rules")
    compiled = []
    for rule in rules:
        name = rule.get("rule") if isinstance(rule, dict) else None
        if name not in RULES:
            raise _config_error(f"unknown rule {name!r}")
        weight = float(rule["weight"])
        if name == "amount_above":
            arg = float(rule["threshold"])
        elif name == "merchant_in":
            arg = frozenset(m.encode() for m in rule["merchants"])
        elif name == "currency_not_in":
            arg = frozenset(c.encode() for c in rule["currencies"])
        else:
            arg = None
        compiled.append((name, arg, weight))
    return float(threshold), compiled


def _valid(column, n):
    """Per-row validity from an Arrow bitmap (None: all valid)."""
    bitmap = column.validity
    if bitmap is None:
        return None
    return [bool(bitmap[i >> 3] & (1 << (i & 7))) for i in range(n)]


def _strings(column, n):
    """A utf8 column as a list of bytes (None for nulls)."""
    values = column.values.value
    offsets, data = values.offsets, values.data
    valid = _valid(column, n)
    return [
        data[offsets[i]:offsets[i + 1]] if valid is None or valid[i] else None
        for i in range(n)
    ]


def _numbers(column, n):
    values = column.values.value
    valid = _valid(column, n)
    if valid is None:
        return list(values)
    return [v if ok else None for v, ok in zip(values, valid)]


def _validity(values):
    """An Arrow validity bitmap for values with None in them (None: all valid)."""
    if all(v is not None for v in values):
        return None
    bits = bytearray((len(values) + 7) // 8)
    for i, v in enumerate(values):
        if v is not None:
            bits[i >> 3] |= 1 << (i & 7)
    return bytes(bits)


def _utf8_column(strings):
    offsets, data = [0], bytearray()
    for s in strings:
        data += s or b""
        offsets.append(len(data))
    return t.Column(t.Values_Utf8(t.Utf8Values(offsets, bytes(data))), _validity(strings))


def _number_column(kind, values, zero):
    return t.Column(kind([zero if v is None else v for v in values]), _validity(values))


# componentize-py makes a new `WitWorld` object for every call, so what
# `init` parsed lives at module level (one component instance per epoch).
_CONFIG = {}


class WitWorld(wit_world.WitWorld):
    def init(self, config):
        try:
            _CONFIG["threshold"], _CONFIG["rules"] = _parse(config)
        except Err:
            raise
        except Exception as e:
            raise _config_error(f"{type(e).__name__}: {e}")

    def process(self, ctx, input):
        try:
            return self._score(input)
        except Err:
            raise
        except Exception as e:  # a bug here fails the epoch with its reason
            raise Err(t.OperatorError_Failed(f"{type(e).__name__}: {e}"))

    def _score(self, input):
        if not _CONFIG:
            raise Err(t.OperatorError_Failed("process called before init"))
        threshold, rules = _CONFIG["threshold"], _CONFIG["rules"]
        n = input.num_rows()
        index = {f.name: i for i, f in enumerate(input.schema())}

        def col(name):
            if name not in index:
                raise Err(t.OperatorError_Failed(f"input has no column `{name}`"))
            return input.column(index[name])

        amount = _numbers(col("amount"), n)
        currency = _strings(col("currency"), n)
        country = _strings(col("country"), n)
        card_country = _strings(col("card_country"), n)
        merchant = _strings(col("merchant_id"), n)

        scores = [0.0] * n
        fired = [0] * n
        for bit, (name, arg, weight) in enumerate(rules):
            mask = 1 << bit
            for row in range(n):
                if name == "amount_above":
                    hit = amount[row] is not None and amount[row] > arg
                elif name == "country_mismatch":
                    a, b = country[row], card_country[row]
                    hit = a is not None and b is not None and a != b
                elif name == "merchant_in":
                    hit = merchant[row] is not None and merchant[row] in arg
                else:
                    hit = currency[row] is not None and currency[row] not in arg
                if hit:
                    scores[row] += weight
                    fired[row] |= mask

        rows = [r for r in range(n) if fired[r] and scores[r] >= threshold]
        if not rows:
            return t.Output(0, [])
        txn = _strings(input.take(index["txn_id"], rows), len(rows))
        card = _strings(input.take(index["card_id"], rows), len(rows))
        ts = _numbers(input.take(index["ts"], rows), len(rows))
        reasons = [
            ",".join(name for bit, (name, _, _) in enumerate(rules) if fired[r] & (1 << bit)).encode()
            for r in rows
        ]
        amounts = [amount[r] for r in rows]
        return t.Output(
            len(rows),
            [
                t.OutputColumn("txn_id", _utf8_column(txn)),
                t.OutputColumn("card_id", _utf8_column(card)),
                t.OutputColumn("amount", _number_column(t.Values_Float64, amounts, 0.0)),
                t.OutputColumn("score", _number_column(t.Values_Float64, [scores[r] for r in rows], 0.0)),
                t.OutputColumn("reasons", _utf8_column(reasons)),
                t.OutputColumn("ts", _number_column(t.Values_Int64, ts, 0)),
            ],
        )
