"""{{name}}: emits the payments whose amount is above the configured threshold.

Written on the Python SDK (the `weir` package next to this file): see its
docstrings, and docs/operators.md in the Weir repository for state,
windows, lookups, errors and logging.
"""

import json

import weir


class App(weir.Operator):
    def __init__(self, config):
        try:
            self.threshold = float(json.loads(config)["threshold"])
        except (ValueError, KeyError, TypeError) as e:
            raise weir.ConfigError(f'expected {{"threshold": <number>}}: {e}')

    def process(self, ctx, batch):
        amount = batch.float64("amount")
        rows = [r for r in range(len(batch)) if (amount[r] or 0.0) > self.threshold]
        return (
            weir.Output()
            .utf8("txn_id", batch.utf8("txn_id", rows).to_bytes_list())
            .float64("amount", [amount[r] for r in rows])
        )


# componentize-py exports the class named WitWorld.
WitWorld = weir.export(App)
