// {{name}}: emits the payments whose amount is above the configured threshold.

let threshold = null;

export function init(config) {
  try {
    threshold = Number(JSON.parse(config).threshold);
  } catch (e) {
    threshold = NaN;
  }
  if (!Number.isFinite(threshold)) {
    throw { tag: "invalid-config", val: 'expected {"threshold": <number>}' };
  }
}

export function process(ctx, input) {
  const index = new Map(input.schema().map((f, i) => [f.name, i]));
  const amounts = input.column(index.get("amount"));
  const valid = (r) => amounts.validity === undefined || (amounts.validity[r >> 3] & (1 << (r & 7))) !== 0;
  const values = amounts.values.val;
  const rows = [];
  for (let r = 0; r < values.length; r++) if (valid(r) && values[r] > threshold) rows.push(r);
  const ids = input.take(index.get("txn_id"), Uint32Array.from(rows));
  return {
    numRows: rows.length,
    columns: [
      { name: "txn_id", column: { values: ids.values, validity: undefined } },
      { name: "amount", column: { values: { tag: "float64", val: Float64Array.from(rows, (r) => values[r]) }, validity: undefined } },
    ],
  };
}
