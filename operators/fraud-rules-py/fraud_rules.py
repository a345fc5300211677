"""The fraud rules of `operators/fraud-rules`, in Python.

Built into a Weir operator component with componentize-py (see
scripts/build-polyglot.sh; the column helpers are sdk/python/weir_columns.py):
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
from weir_columns import number_column, numbers, strings, utf8_column
from weir_outputs import emit
from wit_world.imports import types as t

RULES = ("amount_above", "country_mismatch", "merchant_in", "currency_not_in")


def _config_error(message):
    return Err(t.OperatorError_InvalidConfig(f"fraud-rules config: {message}"))


def _parse(config):
    """Validates the config like the Rust operator does; returns (threshold,
    rules, scores): with ``"scores": true`` every payment's txn_id and
    score also go to output ``scores``."""
    try:
        raw = json.loads(config)
    except ValueError as e:
        raise _config_error(str(e))
    if not isinstance(raw, dict) or set(raw) - {"scores"} != {"alert_threshold", "rules"}:
        raise _config_error("expected exactly `alert_threshold` and `rules` (and optionally `scores`)")
    if not isinstance(raw.get("scores", False), bool):
        raise _config_error("`scores` must be true or false")
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
    return float(threshold), compiled, raw.get("scores", False)


# componentize-py makes a new `WitWorld` object for every call, so what
# `init` parsed lives at module level (one component instance per epoch).
_CONFIG = {}


class WitWorld(wit_world.WitWorld):
    def init(self, config):
        try:
            _CONFIG["threshold"], _CONFIG["rules"], _CONFIG["scores"] = _parse(config)
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

        amount = numbers(col("amount"), n)
        currency = strings(col("currency"), n)
        country = strings(col("country"), n)
        card_country = strings(col("card_country"), n)
        merchant = strings(col("merchant_id"), n)

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

        if _CONFIG["scores"]:
            emit(
                "scores",
                n,
                [
                    t.OutputColumn("txn_id", utf8_column(strings(col("txn_id"), n))),
                    t.OutputColumn("score", number_column(t.Values_Float64, scores, 0.0)),
                ],
            )
        rows = [r for r in range(n) if fired[r] and scores[r] >= threshold]
        if not rows:
            return t.Output(0, [])
        txn = strings(input.take(index["txn_id"], rows), len(rows))
        card = strings(input.take(index["card_id"], rows), len(rows))
        ts = numbers(input.take(index["ts"], rows), len(rows))
        reasons = [
            ",".join(name for bit, (name, _, _) in enumerate(rules) if fired[r] & (1 << bit)).encode()
            for r in rows
        ]
        amounts = [amount[r] for r in rows]
        return t.Output(
            len(rows),
            [
                t.OutputColumn("txn_id", utf8_column(txn)),
                t.OutputColumn("card_id", utf8_column(card)),
                t.OutputColumn("amount", number_column(t.Values_Float64, amounts, 0.0)),
                t.OutputColumn("score", number_column(t.Values_Float64, [scores[r] for r in rows], 0.0)),
                t.OutputColumn("reasons", utf8_column(reasons)),
                t.OutputColumn("ts", number_column(t.Values_Int64, ts, 0)),
            ],
        )
