"""The fraud rules of `operators/fraud-rules`, in Python.

Built into a Weir operator component with componentize-py (see
scripts/build-polyglot.sh) on the Python SDK, ``sdk/python/weir``:
the same JSON config, the same rules and the same output columns as the
Rust operator, so the two are interchangeable in a pipeline. ``amount``
may be a ``float64`` or a ``decimal(P,S)`` column (compared exactly, as
``Decimal``), ``ts`` Unix milliseconds or a timestamp; both are passed to
the alerts in the input's type.
"""

import json
from decimal import Decimal
from itertools import compress
from operator import ne, not_

import weir

RULES = ("amount_above", "country_mismatch", "merchant_in", "currency_not_in")


def load_config(config, name="fraud-rules", extra=()):
    """Parses the JSON ``config`` and validates ``alert_threshold`` and
    ``rules`` like the Rust operator does (keys other than those and
    ``extra`` are refused); returns (the config object, threshold, rules)."""

    def bad(message):
        return weir.ConfigError(f"{name} config: {message}")

    try:
        raw = json.loads(config)
    except ValueError as e:
        raise bad(e)
    allowed = {"alert_threshold", "rules", *extra}
    if not isinstance(raw, dict) or not {"alert_threshold", "rules"} <= set(raw) <= allowed:
        keys = ", ".join(f"`{k}`" for k in sorted(allowed))
        raise bad(f"expected the keys {keys} (`alert_threshold` and `rules` required)")
    threshold = raw["alert_threshold"]
    rules = raw["rules"]
    if not isinstance(threshold, (int, float)) or threshold != threshold:
        raise bad("`alert_threshold` must be a finite number")
    if not isinstance(rules, list) or not rules:
        raise bad("`rules` is empty")
    if len(rules) > 63:
        raise bad("at most 63 rules")
    compiled = []
    for rule in rules:
        kind = rule.get("rule") if isinstance(rule, dict) else None
        if kind not in RULES:
            raise bad(f"unknown rule {kind!r}")
        weight = float(rule["weight"])
        if kind == "amount_above":
            arg = threshold_of(rule["threshold"], bad)
        elif kind == "merchant_in":
            arg = frozenset(m.encode() for m in rule["merchants"])
        elif kind == "currency_not_in":
            arg = frozenset(c.encode() for c in rule["currencies"])
        else:
            arg = None
        compiled.append((kind, arg, weight))
    return raw, float(threshold), compiled


def threshold_of(value, bad):
    """An ``amount_above`` threshold (a number, or a string of one), as the
    ``Decimal`` of the digits written: compared exactly with a decimal
    amount, as a float with a float one (``exact_for``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise bad("`threshold` must be a number (or a string of one)")
    try:
        threshold = Decimal(str(value))
    except ArithmeticError:
        raise bad(f"`threshold` {value!r} is not a number") from None
    if not threshold.is_finite():
        raise bad("`threshold` must be finite")
    return threshold


def exact_for(rules, decimal):
    """``rules`` with each threshold as the amount column compares it:
    ``Decimal`` for a decimal column, ``float`` for a float one."""
    convert = (lambda t: t) if decimal else float
    return [(kind, convert(arg) if kind == "amount_above" else arg, w) for kind, arg, w in rules]


def _rows_where(flags, n):
    """The rows whose flag is true (``compress``: the loop runs in C)."""
    return compress(range(n), flags)


def _rule_hits(kind, arg, amount, column, nulls, n):
    """The rows one rule fires on. Without nulls the flags come from C-level
    ``map``s over the columns; with nulls a null never fires a rule (as in
    the Rust ``RuleSet``)."""
    if kind == "amount_above":
        if not nulls["amount"]:
            return _rows_where(map(arg.__lt__, amount), n)
        return (i for i, a in enumerate(amount) if a is not None and a > arg)
    if kind == "country_mismatch":
        country, card_country = column["country"], column["card_country"]
        if not (nulls["country"] or nulls["card_country"]):
            return _rows_where(map(ne, country, card_country), n)
        return (
            i
            for i, (a, b) in enumerate(zip(country, card_country))
            if a is not None and b is not None and a != b
        )
    if kind == "merchant_in":  # None is in no merchant set
        return _rows_where(map(arg.__contains__, column["merchant"]), n)
    currency = column["currency"]
    if not nulls["currency"]:
        return _rows_where(map(not_, map(arg.__contains__, currency)), n)
    return (i for i, c in enumerate(currency) if c is not None and c not in arg)


def score_rows(rules, batch):
    """Every row's score and fired-rule bits (bit i: rule i), and the
    amounts (the Rust ``RuleSet::score_rows``), rule by rule over columns:
    each rule finds the rows it fires on, and only those rows are touched."""
    n = len(batch)
    decimal = is_decimal(batch, "amount")
    if decimal:
        amount = batch.decimal("amount").to_list()
        nulls = {"amount": None in amount}
    else:
        amount_column = batch.float64("amount")
        amount = amount_column.to_list()
        nulls = {"amount": amount_column.null_count() > 0}
    rules = exact_for(rules, decimal)
    kinds = {kind for kind, _, _ in rules}
    wanted = []
    if "currency_not_in" in kinds:
        wanted.append(("currency", "currency"))
    if "country_mismatch" in kinds:
        wanted += [("country", "country"), ("card_country", "card_country")]
    if "merchant_in" in kinds:
        wanted.append(("merchant", "merchant_id"))
    column = {}
    for key, name in wanted:
        utf8 = batch.utf8(name)
        column[key], nulls[key] = utf8.to_bytes_list(), utf8.null_count() > 0
    scores = [0.0] * n
    fired = [0] * n
    for bit, (kind, arg, weight) in enumerate(rules):
        mask = 1 << bit
        for row in _rule_hits(kind, arg, amount, column, nulls, n):
            scores[row] += weight
            fired[row] |= mask
    return scores, fired, amount


def is_decimal(batch, name):
    """Whether column ``name`` is a ``decimal(P,S)``."""
    return batch.schema[batch.index_of(name)].type.kind == "decimal"


def alert_rows(scores, fired, threshold):
    """The rows with a fired rule and a score at or above ``threshold``."""
    return [r for r, f, s in zip(range(len(scores)), fired, scores) if f and s >= threshold]


def reasons(rules, fired):
    """The names of the rules in ``fired``, comma-separated, in config order."""
    return ",".join(kind for bit, (kind, _, _) in enumerate(rules) if fired & (1 << bit))


class FraudRules(weir.Operator):
    def __init__(self, config):
        raw, self.threshold, self.rules = load_config(config, extra=("scores",))
        self.scores = raw.get("scores", False)
        if not isinstance(self.scores, bool):
            raise weir.ConfigError("fraud-rules config: `scores` must be true or false")

    def process(self, ctx, batch):
        scores, fired, amount = score_rows(self.rules, batch)
        if self.scores:
            weir.emit(
                "scores",
                weir.Output().utf8("txn_id", batch.utf8("txn_id").to_bytes_list()).float64("score", scores),
            )
        rows = alert_rows(scores, fired, self.threshold)
        out = weir.Output()
        if not rows:
            return out
        out = out.utf8("txn_id", batch.utf8("txn_id", rows).to_bytes_list()).utf8(
            "card_id", batch.utf8("card_id", rows).to_bytes_list()
        )
        if is_decimal(batch, "amount"):
            out = out.column("amount", batch.column("amount", rows))
        else:
            out = out.float64("amount", [amount[r] for r in rows])
        out = out.float64("score", [scores[r] for r in rows]).utf8(
            "reasons", [reasons(self.rules, fired[r]) for r in rows]
        )
        if batch.schema[batch.index_of("ts")].type.kind == "int64":
            return out.int64("ts", batch.int64("ts", rows).to_list())
        return out.column("ts", batch.column("ts", rows))


WitWorld = weir.export(FraudRules)
