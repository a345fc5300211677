// Arrow-layout columns for Weir operators in JavaScript: reading the
// host's batch columns into arrays and building output columns from them.
// Works with any Weir world (it uses only the shared types):
//
//   import { strings, numbers, utf8Column, float64Column } from "./weir_columns.js";
//   const card = strings(batch.column(i), batch.numRows());   // strings or null

const encoder = new TextEncoder();

/** Whether row `i` is valid under an Arrow bitmap (undefined: all are). */
export function isValid(validity, i) {
  return validity === undefined || (validity[i >> 3] & (1 << (i & 7))) !== 0;
}

/** A utf8 column as strings (null for nulls). */
export function strings(column, n) {
  const { offsets, data } = column.values.val;
  const decoder = new TextDecoder();
  const out = new Array(n);
  for (let i = 0; i < n; i++) {
    out[i] = isValid(column.validity, i) ? decoder.decode(data.subarray(offsets[i], offsets[i + 1])) : null;
  }
  return out;
}

/** A utf8 column as the bytes of each value (null for nulls). */
export function byteStrings(column, n) {
  const { offsets, data } = column.values.val;
  const out = new Array(n);
  for (let i = 0; i < n; i++) out[i] = isValid(column.validity, i) ? data.slice(offsets[i], offsets[i + 1]) : null;
  return out;
}

/** An int64 (BigInt) or float64 column as an array (null for nulls). */
export function numbers(column, n) {
  const values = column.values.val;
  const out = new Array(n);
  for (let i = 0; i < n; i++) out[i] = isValid(column.validity, i) ? values[i] : null;
  return out;
}

/** An Arrow validity bitmap for values with nulls in them (undefined: none). */
export function validity(values) {
  if (values.every((v) => v !== null)) return undefined;
  const bits = new Uint8Array((values.length + 7) >> 3);
  values.forEach((v, i) => {
    if (v !== null) bits[i >> 3] |= 1 << (i & 7);
  });
  return bits;
}

/** An output utf8 column from strings or Uint8Arrays (null for nulls). */
export function utf8Column(values) {
  const parts = values.map((s) => (ArrayBuffer.isView(s) ? s : encoder.encode(s ?? "")));
  const offsets = new Int32Array(parts.length + 1);
  let total = 0;
  parts.forEach((p, i) => {
    total += p.length;
    offsets[i + 1] = total;
  });
  const data = new Uint8Array(total);
  parts.forEach((p, i) => data.set(p, offsets[i]));
  return { values: { tag: "utf8", val: { offsets, data } }, validity: validity(values) };
}

/** An output float64 column (null for nulls). */
export function float64Column(values) {
  return { values: { tag: "float64", val: Float64Array.from(values, (v) => v ?? 0) }, validity: validity(values) };
}

/** An output int64 column from numbers or BigInts (null for nulls). */
export function int64Column(values) {
  return { values: { tag: "int64", val: BigInt64Array.from(values, (v) => BigInt(v ?? 0)) }, validity: validity(values) };
}
