"""The fraud rules of `operators/fraud-rules`, in Python.

Built into a Weir operator component with componentize-py (see
scripts/build-polyglot.sh) on the Python SDK, ``sdk/python/weir``:
the same JSON config, the same rules and the same output columns as the
Rust operator, so the two are interchangeable in a pipeline.
"""

import json

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


def score_rows(rules, batch):
    """Every row's score and fired-rule bits (bit i: rule i), and the
    amounts (the Rust ``RuleSet::score_rows``), rule by rule over columns."""
    n = len(batch)
    amount = batch.float64("amount").to_list()
    kinds = {kind for kind, _, _ in rules}
    column = {}
    if "currency_not_in" in kinds:
        column["currency"] = batch.utf8("currency").to_bytes_list()
    if "country_mismatch" in kinds:
        column["country"] = batch.utf8("country").to_bytes_list()
        column["card_country"] = batch.utf8("card_country").to_bytes_list()
    if "merchant_in" in kinds:
        column["merchant"] = batch.utf8("merchant_id").to_bytes_list()
    scores = [0.0] * n
    fired = [0] * n
    for bit, (kind, arg, weight) in enumerate(rules):
        if kind == "amount_above":
            hits = [a is not None and a > arg for a in amount]
        elif kind == "country_mismatch":
            hits = [
                a is not None and b is not None and a != b
                for a, b in zip(column["country"], column["card_country"])
            ]
        elif kind == "merchant_in":
            hits = [m is not None and m in arg for m in column["merchant"]]
        else:
            hits = [c is not None and c not in arg for c in column["currency"]]
        mask = 1 << bit
        for row, hit in enumerate(hits):
            if hit:
                scores[row] += weight
                fired[row] |= mask
    return scores, fired, amount


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
        rows = [r for r in range(len(batch)) if fired[r] and scores[r] >= self.threshold]
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
