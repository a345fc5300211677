"""Every column type through the Python SDK's values, row by row: the same
computation as the Rust ``types-check`` (see its lib.rs), whose output this
one's must equal byte for byte."""

import decimal
from datetime import timedelta

import weir

HUNDRED = decimal.Decimal("100.00")
LINE = weir.struct_of([("sku", "utf8"), ("price", weir.decimal_type(18, 2))])
DEVICE = weir.struct_of([("id", "utf8"), ("ip", "utf8"), ("score", "int64")])


def instant_text(t):
    return t.strftime("%Y-%m-%dT%H:%M:%S") + f".{t.microsecond // 1000:03d}Z"


class TypesCheck(weir.Operator):
    def process(self, ctx, batch):
        ids = batch.utf8("txn_id").to_list()
        amounts = batch.decimal("amount").to_list()
        times = batch.timestamp("ts").to_list()
        days = batch.date("day").to_list()
        raw = batch.binary("raw").to_list()
        device_col = batch.column("device")
        devices = device_col.to_list()
        tags = batch.column("tags").to_list()
        lines = batch.column("lines").to_list()
        with decimal.localcontext(prec=38):
            double = [None if a is None else a + a for a in amounts]
            total = [sum((item["price"] for item in (ls or []) if item["price"] is not None), decimal.Decimal(0)) for ls in lines]
        out = weir.Output()
        out.utf8("txn_id", ids)
        out.decimal("amount", amounts, 18, 2)
        out.decimal("double", double, 19, 2)
        out.decimal("total", total, 18, 2)
        out.bool("over", [None if a is None else a > HUNDRED for a in amounts])
        out.timestamp("ts", times, "ms", "UTC")
        out.utf8("ts_text", [None if t is None else instant_text(t) for t in times])
        out.utf8("day_text", [None if d is None else d.isoformat() for d in days])
        out.date("next_day", [None if d is None else d + timedelta(days=1) for d in days])
        out.binary("raw", raw)
        out.int64("raw_len", [None if b is None else len(b) for b in raw])
        out.add("device", devices, DEVICE)
        out.utf8("device_ip", [d["ip"] for d in devices])
        out.add("tags", tags, weir.list_of("utf8"))
        out.int64("tag_count", [len(t or []) for t in tags])
        out.add("lines", lines, weir.list_of(LINE))
        out.column("device_in", device_col)
        return out


WitWorld = weir.export(TypesCheck)
