// Every column type through the JavaScript SDK's values, row by row: the
// same computation as the Rust `types-check` (see its lib.rs), whose output
// this one's must equal byte for byte.

import { Decimal, T, columnValues, rawColumn, typedOutput } from "./weir_types.js";

const HUNDRED = Decimal.parse("100.00");
const DAY_MS = 86400000;
const LINE = T.struct([
  ["sku", T.utf8],
  ["price", T.decimal(18, 2)],
]);
const DEVICE = T.struct([
  ["id", T.utf8],
  ["ip", T.utf8],
  ["score", T.int64],
]);

export function init(_config) {}

export function process(_ctx, input) {
  const n = input.numRows();
  const col = (name) => columnValues(input, name);
  const ids = col("txn_id");
  const amounts = col("amount");
  const times = col("ts");
  const days = col("day");
  const raw = col("raw");
  const devices = col("device");
  const tags = col("tags");
  const lines = col("lines");
  const total = lines.map((ls) =>
    (ls ?? []).reduce((sum, item) => (item.price === null ? sum : sum.add(item.price)), new Decimal(0n, 0)),
  );
  return typedOutput(n, [
    ["txn_id", T.utf8, ids],
    ["amount", T.decimal(18, 2), amounts],
    ["double", T.decimal(19, 2), amounts.map((a) => (a === null ? null : a.add(a)))],
    ["total", T.decimal(18, 2), total],
    ["over", T.boolean, amounts.map((a) => (a === null ? null : a.cmp(HUNDRED) > 0))],
    ["ts", T.timestamp("ms", "UTC"), times],
    ["ts_text", T.utf8, times.map((t) => (t === null ? null : t.toISOString()))],
    ["day_text", T.utf8, days.map((d) => (d === null ? null : d.toISOString().slice(0, 10)))],
    ["next_day", T.date, days.map((d) => (d === null ? null : new Date(d.getTime() + DAY_MS)))],
    ["raw", T.binary, raw],
    ["raw_len", T.int64, raw.map((b) => (b === null ? null : b.length))],
    ["device", DEVICE, devices],
    ["device_ip", T.utf8, devices.map((d) => d.ip)],
    ["tags", T.list(T.utf8), tags],
    ["tag_count", T.int64, tags.map((t) => (t ?? []).length)],
    ["lines", T.list(LINE), lines],
    ["device_in", rawColumn(input, "device")],
  ]);
}
