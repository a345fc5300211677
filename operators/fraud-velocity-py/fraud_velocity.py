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
from fraud_rules import load_config, reasons, score_rows


def _times(value):
    return list(struct.unpack(f"<{len(value) // 8}q", value[: len(value) // 8 * 8]))


def _record(times, t, window_ms):
    """Adds ``t`` to the card's sorted ``times``; returns how many fall in
    ``(t - window_ms, t]`` and forgets those before the newest's window."""
    at = bisect.bisect_right(times, t)
    times.insert(at, t)
    since = t - window_ms
    count = sum(1 for x in times[: at + 1] if x > since)
    keep_from = times[-1] - window_ms
    times[:] = [x for x in times if x > keep_from]
    return count


def velocity_counts(cards, times, window_ms, ttl_ms):
    """Each row's count of its card's payments in the window (None without
    card or time), with one batched state read and one write."""
    distinct = sorted({c for c in cards if c is not None})
    windows = {
        card: _times(value) if value is not None else []
        for card, value in zip(distinct, weir.state.get_many(distinct))
    }
    counts = [None] * len(cards)
    for row, (card, t) in enumerate(zip(cards, times)):
        if card is not None and t is not None:
            counts[row] = _record(windows[card], t, window_ms)
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
        velocity_bit = 1 << len(self.rules)
        for row, count in enumerate(counts):
            if count is not None and count > self.max_payments:
                scores[row] += self.weight
                fired[row] |= velocity_bit
        hits = [r for r in range(len(batch)) if fired[r] and scores[r] >= self.threshold]
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
