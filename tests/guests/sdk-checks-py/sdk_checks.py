"""A Python operator for the tests of the Python SDK (``sdk/python/weir``):
what a user sees when an operator raises, and where ``print`` goes.

Config ``{"fail": "init" | "process" | "library"}`` raises there;
``{"print": true}`` prints a line per batch and passes the rows through
as ``txn_id``. The tests find the raising lines by their ``# raises``
comments.
"""

import json

import weir


class SdkChecks(weir.Operator):
    def __init__(self, config):
        self.settings = json.loads(config)
        if self.settings.get("fail") == "init":
            self.settings["no such setting"]  # raises: init

    def process(self, ctx, batch):
        fail = self.settings.get("fail")
        if fail == "process":
            return len(batch) / 0  # raises: process
        if fail == "library":
            json.loads("{not json")  # raises: library
        txn = batch.utf8("txn_id")
        if self.settings.get("print"):
            print(f"hello from Python: epoch {ctx.epoch}, {len(batch)} rows, first {txn[0]}")
        return weir.Output().utf8("txn_id", txn.to_bytes_list())


WitWorld = weir.export(SdkChecks)
