// The fraud rules of `operators/fraud-rules`, in JavaScript.
//
// Built into a Weir operator component with jco / componentize-js (see
// scripts/build-polyglot.sh; the column helpers are sdk/js/weir_columns.js): the same JSON config, the same rules and the same output
// columns as the Rust operator, so the two are interchangeable. With
// `"scores": true` in the config it also emits every payment's `txn_id`
// and `score` to output `scores` (sdk/js/weir_outputs.js). `amount` may
// be a float64 or a decimal(P,S) column (compared exactly, as a
// BigInt-backed `Decimal`: sdk/js/weir_types.js), `ts` Unix milliseconds
// or a timestamp; both are passed to the alerts in the input's type.

import { float64Column, int64Column, numbers, strings, utf8Column } from "./weir_columns.js";
import { emit } from "./weir_outputs.js";
import { Decimal, T, columnValues, schema, typedOutput } from "./weir_types.js";

const RULES = ["amount_above", "country_mismatch", "merchant_in", "currency_not_in"];

// One component instance per epoch: what `init` parsed lives here.
let config = null;

function configError(message) {
  return { tag: "invalid-config", val: `fraud-rules config: ${message}` };
}

function parse(text) {
  let raw;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw configError(String(e.message));
  }
  const keys = raw && typeof raw === "object" ? Object.keys(raw).filter((k) => k !== "scores").sort().join(",") : "";
  if (keys !== "alert_threshold,rules") {
    throw configError("expected exactly `alert_threshold` and `rules` (and optionally `scores`)");
  }
  if ("scores" in raw && typeof raw.scores !== "boolean") throw configError("`scores` must be true or false");
  if (typeof raw.alert_threshold !== "number" || !Number.isFinite(raw.alert_threshold)) {
    throw configError("`alert_threshold` must be a finite number");
  }
  if (!Array.isArray(raw.rules) || raw.rules.length === 0) throw configError("`rules` is empty");
  if (raw.rules.length > 63) throw configError("at most 63 rules");
  const rules = raw.rules.map((rule) => {
    if (!rule || !RULES.includes(rule.rule)) throw configError(`unknown rule ${JSON.stringify(rule && rule.rule)}`);
    const weight = Number(rule.weight);
    let arg = null;
    if (rule.rule === "amount_above") arg = threshold(rule.threshold);
    if (rule.rule === "merchant_in") arg = new Set(rule.merchants);
    if (rule.rule === "currency_not_in") arg = new Set(rule.currencies);
    return { name: rule.rule, arg, weight };
  });
  return { threshold: raw.alert_threshold, rules, scores: raw.scores === true };
}

// An `amount_above` threshold (a number, or a string of one): the number
// for a float64 amount, the Decimal of the digits written for a decimal one.
function threshold(value) {
  if (!(typeof value === "number" || typeof value === "string")) {
    throw configError("`threshold` must be a number (or a string of one)");
  }
  let exact;
  try {
    exact = Decimal.parse(typeof value === "number" ? numberText(value) : value.trim());
  } catch (e) {
    throw configError(`\`threshold\` ${JSON.stringify(value)} is not a number`);
  }
  return { float: Number(value), exact };
}

// A finite number's digits without an exponent (1e21 and beyond, and
// values below 1e-6, are written with one by `String`).
function numberText(value) {
  if (!Number.isFinite(value)) throw new Error("not finite");
  const text = String(value);
  return /e/i.test(text) ? value.toFixed(20).replace(/\.?0+$/, "") : text;
}

export function init(text) {
  config = parse(text);
}

export function process(ctx, input) {
  if (config === null) throw { tag: "failed", val: "process called before init" };
  try {
    return score(input);
  } catch (e) {
    if (e && typeof e === "object" && "tag" in e) throw e;
    throw { tag: "failed", val: `${e && e.name}: ${e && e.message}` };
  }
}

function score(input) {
  const n = input.numRows();
  // The typed schema: `input.schema()` cannot describe a decimal or a
  // timestamp column (the host traps rather than leave one out).
  const fields = schema(input);
  const index = new Map(fields.map((f, i) => [f.name, i]));
  const typeOf = (name) => {
    if (!index.has(name)) throw { tag: "failed", val: `input has no column \`${name}\`` };
    return fields[index.get(name)].type;
  };
  const col = (name) => {
    typeOf(name);
    return input.column(index.get(name));
  };
  const decimal = typeOf("amount").kind === "decimal";
  const typedTs = typeOf("ts").kind !== "int64";
  const amount = decimal ? columnValues(input, "amount") : numbers(col("amount"), n);
  const above = decimal
    ? (a, t) => a !== null && a.cmp(t.exact) > 0
    : (a, t) => a !== null && a > t.float;
  const currency = strings(col("currency"), n);
  const country = strings(col("country"), n);
  const cardCountry = strings(col("card_country"), n);
  const merchant = strings(col("merchant_id"), n);

  const scores = new Float64Array(n);
  const fired = new Array(n).fill(0n);
  config.rules.forEach(({ name, arg, weight }, bit) => {
    const mask = 1n << BigInt(bit);
    for (let row = 0; row < n; row++) {
      let hit;
      if (name === "amount_above") hit = above(amount[row], arg);
      else if (name === "country_mismatch") hit = country[row] !== null && cardCountry[row] !== null && country[row] !== cardCountry[row];
      else if (name === "merchant_in") hit = merchant[row] !== null && arg.has(merchant[row]);
      else hit = currency[row] !== null && !arg.has(currency[row]);
      if (hit) {
        scores[row] += weight;
        fired[row] |= mask;
      }
    }
  });

  if (config.scores) {
    emit("scores", n, [
      { name: "txn_id", column: utf8Column(strings(col("txn_id"), n)) },
      { name: "score", column: float64Column(Array.from(scores)) },
    ]);
  }
  const rows = [];
  for (let r = 0; r < n; r++) if (fired[r] !== 0n && scores[r] >= config.threshold) rows.push(r);
  if (rows.length === 0) return { numRows: 0, columns: [] };
  const picked = Uint32Array.from(rows);
  const txn = strings(input.take(index.get("txn_id"), picked), rows.length);
  const card = strings(input.take(index.get("card_id"), picked), rows.length);
  const reasons = rows.map((r) =>
    config.rules.filter((_, bit) => (fired[r] & (1n << BigInt(bit))) !== 0n).map((rule) => rule.name).join(","),
  );
  const amounts = rows.map((r) => amount[r]);
  const scored = rows.map((r) => scores[r]);
  if (decimal || typedTs) {
    const ts = columnValues(input, "ts");
    return typedOutput(rows.length, [
      ["txn_id", T.utf8, txn],
      ["card_id", T.utf8, card],
      ["amount", typeOf("amount"), amounts],
      ["score", T.float64, scored],
      ["reasons", T.utf8, reasons],
      ["ts", typeOf("ts"), rows.map((r) => ts[r])],
    ]);
  }
  const ts = numbers(input.take(index.get("ts"), picked), rows.length);
  return {
    numRows: rows.length,
    columns: [
      { name: "txn_id", column: utf8Column(txn) },
      { name: "card_id", column: utf8Column(card) },
      { name: "amount", column: float64Column(amounts) },
      { name: "score", column: float64Column(scored) },
      { name: "reasons", column: utf8Column(reasons) },
      { name: "ts", column: int64Column(ts) },
    ],
  };
}
