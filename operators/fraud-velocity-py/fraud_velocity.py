"""`operators/fraud-velocity` in Python, on the Python SDK (``weir``): the
fraud rules plus "more than ``max_payments`` payments on one card within
``window_ms`` of event time", counted in the host's keyed state so the
count spans epochs, restarts and upgrades.

The same config, the same state (each card's recent payment times, 8-byte
little-endian, under the card id) and the same outputs as the Rust
operator: the alerts with ``window_count``, and output ``scores`` with
every payment. The two can replace each other in a running pipeline.
Built with ``operators/fraud-rules-py`` on the module path (its rules).
"""

import bisect
import struct

import weir
from fraud_rules import alert_rows, load_config, reasons, score_rows


def _times(value):
    return list(struct.unpack(f"<{len(value) // 8}q", value[: len(value) // 8 * 8]))


def velocity_counts(cards, times, window_ms, ttl_ms):
    """Each row's count of its card's payments in the window (None without
    card or time), with one batched state read and one write.

    Each card's times stay sorted: a payment is inserted in place, counted
    as the times in ``(t - window_ms, t]`` up to it, and the times before
    the newest one's window are dropped -- bisections, not scans (the hot
    loop of this operator, so the bisection function is a local).
    """
    distinct = sorted({c for c in cards if c is not None})
    windows = {
        card: _times(value) if value is not None else []
        for card, value in zip(distinct, weir.state.get_many(distinct))
    }
    bisect_right = bisect.bisect_right
    counts = [None] * len(cards)
    for row, card, t in zip(range(len(cards)), cards, times):
        if card is None or t is None:
            continue
        w = windows[card]
        at = bisect_right(w, t)
        w.insert(at, t)
        counts[row] = at + 1 - bisect_right(w, t - window_ms, 0, at + 1)
        stale = bisect_right(w, w[-1] - window_ms)
        if stale:
            del w[:stale]
    updates = [(card, struct.pack(f"<{len(w)}q", *w)) for card, w in windows.items() if w]
    weir.state.put_many(sorted(updates), ttl_ms)
    return counts


class FraudVelocity(weir.Operator):
    def __init__(self, config):
        raw, self.threshold, self.rules = load_config(
            config, "fraud-velocity", extra=("velocity", "state_ttl_ms")
        )
        velocity = raw.get("velocity")
        if not isinstance(velocity, dict) or set(velocity) != {"window_ms", "max_payments", "weight"}:
            raise weir.ConfigError(
                "fraud-velocity config: `velocity` needs exactly `window_ms`, `max_payments` and `weight`"
            )
        self.window_ms, self.max_payments = int(velocity["window_ms"]), int(velocity["max_payments"])
        self.weight = float(velocity["weight"])
        if self.window_ms <= 0 or self.max_payments <= 0:
            raise weir.ConfigError(
                "fraud-velocity config: `velocity.window_ms` and `velocity.max_payments` must be positive"
            )
        self.ttl_ms = int(raw.get("state_ttl_ms", 3_600_000))

    def process(self, ctx, batch):
        scores, fired, amount = score_rows(self.rules, batch)
        cards = batch.utf8("card_id").to_bytes_list()
        times = batch.int64("ts").to_list()
        counts = velocity_counts(cards, times, self.window_ms, self.ttl_ms)
        velocity_bit, limit = 1 << len(self.rules), self.max_payments
        for row in [r for r, c in enumerate(counts) if c is not None and c > limit]:
            scores[row] += self.weight
            fired[row] |= velocity_bit
        hits = alert_rows(scores, fired, self.threshold)
        alert = [False] * len(batch)
        for r in hits:
            alert[r] = True
        weir.emit(
            "scores",
            weir.Output()
            .utf8("txn_id", batch.utf8("txn_id").to_bytes_list())
            .utf8("card_id", cards)
            .int64("ts", times)
            .float64("amount", amount)
            .float64("score", scores)
            .bool("alert", alert),
        )
        out = weir.Output()
        if not hits:
            return out

        def why(row):
            named = reasons(self.rules, fired[row] & ~velocity_bit)
            if fired[row] & velocity_bit:
                named = f"{named},velocity" if named else "velocity"
            return named

        return (
            out.utf8("txn_id", batch.utf8("txn_id", hits).to_bytes_list())
            .utf8("card_id", [cards[r] for r in hits])
            .float64("amount", [amount[r] for r in hits])
            .float64("score", [scores[r] for r in hits])
            .utf8("reasons", [why(r) for r in hits])
            .int64("ts", [times[r] for r in hits])
            .int64("window_count", [counts[r] for r in hits])
        )


WitWorld = weir.export(FraudVelocity)
