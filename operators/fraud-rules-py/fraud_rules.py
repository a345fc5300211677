"""The fraud rules of `operators/fraud-rules`, in Python.

Built into a Weir operator component with componentize-py (see
scripts/build-polyglot.sh) on the Python SDK, ``sdk/python/weir``:
the same JSON config, the same rules and the same output columns as the
Rust operator, so the two are interchangeable in a pipeline.
"""

import json

import weir

RULES = ("amount_above", "country_mismatch", "merchant_in", "currency_not_in")


def _parse(config):
    """Validates the config like the Rust operator does; returns (threshold,
    rules, scores): with ``"scores": true`` every payment's txn_id and
    score also go to output ``scores``."""
    try:
        raw = json.loads(config)
    except ValueError as e:
        raise weir.ConfigError(f"fraud-rules config: {e}")
    if not isinstance(raw, dict) or set(raw) - {"scores"} != {"alert_threshold", "rules"}:
        raise weir.ConfigError(
            "fraud-rules config: expected exactly `alert_threshold` and `rules` (and optionally `scores`)"
        )
    if not isinstance(raw.get("scores", False), bool):
        raise weir.ConfigError("fraud-rules config: `scores` must be true or false")
    threshold = raw["alert_threshold"]
    rules = raw["rules"]
    if not isinstance(threshold, (int, float)) or threshold != threshold:
        raise weir.ConfigError("fraud-rules config: `alert_threshold` must be a finite number")
    if not isinstance(rules, list) or not rules:
        raise weir.ConfigError("fraud-rules config: `rules` is empty")
    if len(rules) > 63:
        raise weir.ConfigError("fraud-rules config: at most 63 rules")
    compiled = []
    for rule in rules:
        name = rule.get("rule") if isinstance(rule, dict) else None
        if name not in RULES:
            raise weir.ConfigError(f"fraud-rules config: unknown rule {name!r}")
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


class FraudRules(weir.Operator):
    def __init__(self, config):
        self.threshold, self.rules, self.scores = _parse(config)

    def process(self, ctx, batch):
        n = len(batch)
        amount = batch.float64("amount").to_list()
        currency = batch.utf8("currency").to_bytes_list()
        country = batch.utf8("country").to_bytes_list()
        card_country = batch.utf8("card_country").to_bytes_list()
        merchant = batch.utf8("merchant_id").to_bytes_list()

        scores = [0.0] * n
        fired = [0] * n
        for bit, (name, arg, weight) in enumerate(self.rules):
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

        if self.scores:
            weir.emit(
                "scores",
                weir.Output().utf8("txn_id", batch.utf8("txn_id").to_bytes_list()).float64("score", scores),
            )
        rows = [r for r in range(n) if fired[r] and scores[r] >= self.threshold]
        out = weir.Output()
        if not rows:
            return out
        reasons = [
            ",".join(name for bit, (name, _, _) in enumerate(self.rules) if fired[r] & (1 << bit))
            for r in rows
        ]
        return (
            out.utf8("txn_id", batch.utf8("txn_id", rows).to_bytes_list())
            .utf8("card_id", batch.utf8("card_id", rows).to_bytes_list())
            .float64("amount", [amount[r] for r in rows])
            .float64("score", [scores[r] for r in rows])
            .utf8("reasons", reasons)
            .int64("ts", batch.int64("ts", rows).to_list())
        )


WitWorld = weir.export(FraudRules)
