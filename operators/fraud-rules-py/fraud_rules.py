"""The fraud rules of `operators/fraud-rules`, in Python.

Built into a Weir operator component with componentize-py (see
scripts/build-polyglot.sh) on the Python SDK, ``sdk/python/weir``:
the same JSON config, the same rules and the same output columns as the
Rust operator, so the two are interchangeable in a pipeline.
"""

import json
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
            arg = float(rule["threshold"])
        elif kind == "merchant_in":
            arg = frozenset(m.encode() for m in rule["merchants"])
        elif kind == "currency_not_in":
            arg = frozenset(c.encode() for c in rule["currencies"])
        else:
            arg = None
        compiled.append((kind, arg, weight))
    return raw, float(threshold), compiled


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
    amount_column = batch.float64("amount")
    amount = amount_column.to_list()
    nulls = {"amount": amount_column.null_count() > 0}
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
        return (
            out.utf8("txn_id", batch.utf8("txn_id", rows).to_bytes_list())
            .utf8("card_id", batch.utf8("card_id", rows).to_bytes_list())
            .float64("amount", [amount[r] for r in rows])
            .float64("score", [scores[r] for r in rows])
            .utf8("reasons", [reasons(self.rules, fired[r]) for r in rows])
            .int64("ts", batch.int64("ts", rows).to_list())
        )


WitWorld = weir.export(FraudRules)
