// Columns of every type for Weir operators in JavaScript: decimals as
// BigInt-backed `Decimal`s (exact), timestamps as `Timestamp`s (a BigInt
// count of a unit; `.toDate()`), dates as `Date`s at UTC midnight, binary
// as `Uint8Array`s, lists as arrays and structs as objects — read from the
// host's Arrow arrays and written back exactly.
//
//   import { Decimal, T, columnValues, typedOutput } from "./weir_types.js";
//   const amount = columnValues(input, "amount");      // Decimal or null
//   return typedOutput(n, [["amount", T.decimal(18, 2), amounts], ...]);
//
// `typedOutput` sends the rows to the default output (`emit-typed`) and
// returns the empty output `process` then hands back; `emitTyped(name, …)`
// sends them to a named output.

import { emitTyped as hostEmitTyped } from "weir:operator/outputs@0.1.0";

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const PER_SECOND = { second: 1n, millisecond: 1000n, microsecond: 1000000n, nanosecond: 1000000000n };
const UNIT_NAMES = { second: "s", millisecond: "ms", microsecond: "us", nanosecond: "ns" };
const UNIT_OF = { s: "second", ms: "millisecond", us: "microsecond", ns: "nanosecond" };
const DAY_MS = 86400000;

const pow10 = (n) => 10n ** BigInt(n);
const abs = (x) => (x < 0n ? -x : x);

/** An exact decimal: `unscaled × 10^-scale`. Arithmetic never rounds. */
export class Decimal {
  constructor(unscaled, scale) {
    this.unscaled = BigInt(unscaled);
    this.scale = scale;
  }

  /** "12.34", "-0.5", "7": the scale is the digits written after the point. */
  static parse(text) {
    const m = /^([+-]?)(\d*)(?:\.(\d*))?$/.exec(String(text));
    if (!m || (m[2] === "" && (m[3] ?? "") === "")) throw new Error(`\`${text}\` is not a decimal number`);
    const fraction = m[3] ?? "";
    const unscaled = BigInt((m[2] || "0") + fraction);
    return new Decimal(m[1] === "-" ? -unscaled : unscaled, fraction.length);
  }

  /** The same value at `scale`; throws if that drops a non-zero digit. */
  rescale(scale) {
    if (scale >= this.scale) return new Decimal(this.unscaled * pow10(scale - this.scale), scale);
    const factor = pow10(this.scale - scale);
    if (this.unscaled % factor !== 0n) throw new Error(`${this} has more than ${scale} fraction digits`);
    return new Decimal(this.unscaled / factor, scale);
  }

  #aligned(other) {
    const scale = Math.max(this.scale, other.scale);
    return [this.rescale(scale).unscaled, other.rescale(scale).unscaled, scale];
  }

  add(other) {
    const [a, b, s] = this.#aligned(other);
    return new Decimal(a + b, s);
  }

  sub(other) {
    const [a, b, s] = this.#aligned(other);
    return new Decimal(a - b, s);
  }

  mul(other) {
    return new Decimal(this.unscaled * other.unscaled, this.scale + other.scale);
  }

  /** -1, 0 or 1, by value (1.5 equals 1.50). */
  cmp(other) {
    const [a, b] = this.#aligned(other);
    return a < b ? -1 : a > b ? 1 : 0;
  }

  toString() {
    const digits = abs(this.unscaled).toString().padStart(this.scale + 1, "0");
    const sign = this.unscaled < 0n ? "-" : "";
    if (this.scale === 0) return sign + digits;
    return `${sign}${digits.slice(0, -this.scale)}.${digits.slice(-this.scale)}`;
  }
}

/** An instant: a BigInt `count` of `unit`s since 1970-01-01T00:00:00Z. */
export class Timestamp {
  constructor(count, unit) {
    this.count = BigInt(count);
    this.unit = unit;
  }

  /** Milliseconds since the epoch (floored), as a Number. */
  epochMs() {
    const per = PER_SECOND[this.unit];
    const ms = (this.count * 1000n) / per;
    const floored = (this.count * 1000n) % per < 0n ? ms - 1n : ms;
    return Number(floored);
  }

  toDate() {
    return new Date(this.epochMs());
  }

  /** RFC 3339 in UTC with the unit's digits: `2026-12-07T09:30:00.250Z`. */
  toISOString() {
    const per = PER_SECOND[this.unit];
    let seconds = this.count / per;
    let fraction = this.count % per;
    if (fraction < 0n) {
      fraction += per;
      seconds -= 1n;
    }
    const whole = new Date(Number(seconds) * 1000).toISOString().slice(0, 19);
    const digits = per.toString().length - 1;
    return digits ? `${whole}.${fraction.toString().padStart(digits, "0")}Z` : `${whole}Z`;
  }
}

/** Column types, spelled as the pipeline file spells them. */
export const T = {
  int64: { kind: "int64" },
  float64: { kind: "float64" },
  boolean: { kind: "boolean" },
  utf8: { kind: "utf8" },
  binary: { kind: "binary" },
  date: { kind: "date" },
  decimal: (precision, scale) => {
    if (!(precision >= 1 && precision <= 38 && scale >= 0 && scale <= precision)) {
      throw new Error(`decimal(${precision},${scale}) is not a decimal type (precision 1 to 38, scale 0 to precision)`);
    }
    return { kind: "decimal", precision, scale };
  },
  timestamp: (unit = "ms", timezone = undefined) => {
    if (!UNIT_OF[unit]) throw new Error(`\`${unit}\` is not a timestamp unit (s, ms, us, ns)`);
    return { kind: "timestamp", unit: UNIT_OF[unit], timezone };
  },
  list: (item) => ({ kind: "list", item }),
  struct: (fields) => ({ kind: "struct", fields }),
};

/** `T`'s spelling of WIT type node `i`: `{ name, type, nullable }`. */
function fromNodes(nodes, i = 0) {
  const { name, kind, nullable } = nodes[i];
  const v = kind.val;
  const type = {
    int64: () => T.int64,
    float64: () => T.float64,
    boolean: () => T.boolean,
    utf8: () => T.utf8,
    binary: () => T.binary,
    date32: () => T.date,
    decimal128: () => ({ kind: "decimal", precision: v.precision, scale: v.scale }),
    timestamp: () => ({ kind: "timestamp", unit: v.unit, timezone: v.timezone ?? undefined }),
    list: () => T.list(fromNodes(nodes, v).type),
    // `list<u32>` arrives as a Uint32Array, whose `map` would make numbers.
    struct: () => T.struct(Array.from(v, (c) => [nodes[c].name, fromNodes(nodes, c).type])),
  }[kind.tag]();
  return { name, type, nullable };
}

/** The input's columns with their whole types: `[{ name, type, nullable }]`. */
export function schema(batch) {
  return batch.typedSchema().map((t) => fromNodes(t.nodes));
}

const isValid = (validity, i) => validity === undefined || validity === null || (validity[i >> 3] & (1 << (i & 7))) !== 0;

function view(node, Kind) {
  const bytes = node.values;
  return new Kind(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength));
}

/** Values `start..end` of the node tree at `nodes[at]` of type `type`; returns [values, next node]. */
function decode(type, nodes, at, start, end) {
  const node = nodes[at];
  let next = at + 1;
  let out;
  switch (type.kind) {
    case "int64":
      out = Array.from(view(node, BigInt64Array).subarray(start, end));
      break;
    case "float64":
      out = Array.from(view(node, Float64Array).subarray(start, end));
      break;
    case "boolean":
      out = [];
      for (let i = start; i < end; i++) out.push((node.values[i >> 3] & (1 << (i & 7))) !== 0);
      break;
    case "utf8":
    case "binary":
      out = [];
      for (let i = start; i < end; i++) {
        const b = node.values.slice(node.offsets[i], node.offsets[i + 1]);
        out.push(type.kind === "utf8" ? decoder.decode(b) : b);
      }
      break;
    case "date":
      out = Array.from(view(node, Int32Array).subarray(start, end), (d) => new Date(d * DAY_MS));
      break;
    case "decimal": {
      const words = view(node, BigInt64Array);
      out = [];
      for (let i = start; i < end; i++) {
        const lo = BigInt.asUintN(64, words[2 * i]);
        out.push(new Decimal((words[2 * i + 1] << 64n) | lo, type.scale));
      }
      break;
    }
    case "timestamp":
      out = Array.from(view(node, BigInt64Array).subarray(start, end), (c) => new Timestamp(c, type.unit));
      break;
    case "list": {
      const [items, after] = decodeAll(type.item, nodes, next);
      next = after;
      out = [];
      for (let i = start; i < end; i++) out.push(items.slice(node.offsets[i], node.offsets[i + 1]));
      break;
    }
    case "struct": {
      const fields = [];
      for (const [name, t] of type.fields) {
        const [vals, after] = decode(t, nodes, next, start, end);
        fields.push([name, vals]);
        next = after;
      }
      out = [];
      for (let i = 0; i < end - start; i++) out.push(Object.fromEntries(fields.map(([n, vals]) => [n, vals[i]])));
      break;
    }
  }
  return [out.map((v, i) => (isValid(node.validity, start + i) ? v : null)), next];
}

function decodeAll(type, nodes, at) {
  return decode(type, nodes, at, 0, nodes[at].len);
}

/** Column `name`'s values (any type), null for nulls. */
export function columnValues(batch, name) {
  const fields = schema(batch);
  const i = fields.findIndex((f) => f.name === name);
  if (i < 0) throw new Error(`the input has no column \`${name}\` (it has: ${fields.map((f) => f.name).join(", ")})`);
  return decodeAll(fields[i].type, batch.typedColumn(i).nodes, 0)[0];
}

/** Column `name` as it came, to pass to an output unchanged: `{ type, nodes }`. */
export function rawColumn(batch, name) {
  const fields = schema(batch);
  const i = fields.findIndex((f) => f.name === name);
  if (i < 0) throw new Error(`the input has no column \`${name}\``);
  return { type: fields[i].type, nodes: batch.typedColumn(i).nodes };
}

function typeNodes(name, type, nodes) {
  const at = nodes.length;
  nodes.push(null);
  let kind;
  switch (type.kind) {
    case "decimal":
      kind = { tag: "decimal128", val: { precision: type.precision, scale: type.scale } };
      break;
    case "timestamp":
      kind = { tag: "timestamp", val: { unit: type.unit, timezone: type.timezone } };
      break;
    case "list": {
      const child = nodes.length;
      typeNodes("item", type.item, nodes);
      kind = { tag: "list", val: child };
      break;
    }
    case "struct": {
      const children = [];
      for (const [n, t] of type.fields) {
        children.push(nodes.length);
        typeNodes(n, t, nodes);
      }
      kind = { tag: "struct", val: children };
      break;
    }
    default:
      kind = { tag: type.kind === "date" ? "date32" : type.kind };
  }
  nodes[at] = { name, kind, nullable: true };
}

function validity(values) {
  if (values.every((v) => v !== null && v !== undefined)) return undefined;
  const bits = new Uint8Array((values.length + 7) >> 3);
  values.forEach((v, i) => {
    if (v !== null && v !== undefined) bits[i >> 3] |= 1 << (i & 7);
  });
  return bits;
}

function offsetsOf(lengths) {
  const offsets = new Int32Array(lengths.length + 1);
  lengths.forEach((n, i) => (offsets[i + 1] = offsets[i] + n));
  return offsets;
}

const present = (v) => v !== null && v !== undefined;

/** The WIT array nodes (pre-order) of `values` of `type`. */
function encode(type, values) {
  const n = values.length;
  let offsets = new Int32Array(0);
  let bytes = new Uint8Array(0);
  let children = [];
  switch (type.kind) {
    case "int64":
      bytes = new Uint8Array(BigInt64Array.from(values, (v) => (present(v) ? BigInt(v) : 0n)).buffer);
      break;
    case "float64":
      bytes = new Uint8Array(Float64Array.from(values, (v) => (present(v) ? v : 0)).buffer);
      break;
    case "boolean":
      bytes = new Uint8Array((n + 7) >> 3);
      values.forEach((v, i) => {
        if (v) bytes[i >> 3] |= 1 << (i & 7);
      });
      break;
    case "utf8":
    case "binary": {
      const parts = values.map((v) => (!present(v) ? new Uint8Array(0) : typeof v === "string" ? encoder.encode(v) : v));
      offsets = offsetsOf(parts.map((p) => p.length));
      bytes = new Uint8Array(offsets[n]);
      parts.forEach((p, i) => bytes.set(p, offsets[i]));
      break;
    }
    case "date":
      bytes = new Uint8Array(Int32Array.from(values, (v) => (!present(v) ? 0 : typeof v === "number" ? v : Math.floor(v.getTime() / DAY_MS))).buffer);
      break;
    case "decimal": {
      const words = new BigInt64Array(2 * n);
      const limit = pow10(type.precision);
      values.forEach((v, i) => {
        if (!present(v)) return;
        const d = (v instanceof Decimal ? v : Decimal.parse(v)).rescale(type.scale);
        if (abs(d.unscaled) >= limit) throw new Error(`${v} has more digits than decimal(${type.precision},${type.scale}) holds`);
        words[2 * i] = BigInt.asIntN(64, d.unscaled);
        words[2 * i + 1] = BigInt.asIntN(64, d.unscaled >> 64n);
      });
      bytes = new Uint8Array(words.buffer);
      break;
    }
    case "timestamp":
      bytes = new Uint8Array(
        BigInt64Array.from(values, (v) => {
          if (!present(v)) return 0n;
          if (typeof v === "bigint") return v;
          if (v.unit !== type.unit) throw new Error(`a ${v.unit} timestamp in a ${type.unit} column`);
          return v.count;
        }).buffer,
      );
      break;
    case "list": {
      offsets = offsetsOf(values.map((v) => (present(v) ? v.length : 0)));
      children = encode(type.item, values.flatMap((v) => (present(v) ? v : [])));
      break;
    }
    case "struct":
      for (const [name, t] of type.fields) children.push(...encode(t, values.map((v) => (present(v) ? v[name] ?? null : null))));
      break;
  }
  return [{ len: n, validity: validity(values), offsets, values: bytes }, ...children];
}

/** Typed rows from `[name, type, values]` (or `[name, rawColumn(...)]`) columns of `n` rows each. */
export function typedRows(n, columns) {
  return {
    numRows: n,
    columns: columns.map(([name, type, values]) => {
      const nodes = [];
      if (values === undefined) {
        const raw = type;
        typeNodes(name, raw.type, nodes);
        return { type: { nodes }, column: { nodes: raw.nodes } };
      }
      if (values.length !== n) throw new Error(`output column \`${name}\` has ${values.length} rows, not ${n}`);
      typeNodes(name, type, nodes);
      return { type: { nodes }, column: { nodes: encode(type, values) } };
    }),
  };
}

/** Sends typed rows to output `name` (`default` is what `process` returns). */
export function emitTyped(name, n, columns) {
  if (n > 0) hostEmitTyped(name, typedRows(n, columns));
}

/** Typed rows as `process`'s result: sent to the default output, and an empty output returned. */
export function typedOutput(n, columns) {
  emitTyped("default", n, columns);
  return { numRows: 0, columns: [] };
}

export { UNIT_NAMES };
