// `window-kinds` in JavaScript, a test guest: the JavaScript SDK's windows
// (sdk/js/weir_window.js) of the configured kind and output mode over
// `card_id`, `ts` and `amount`, emitting one row per window reported —
// "update" rows from `add` in update mode, "close" rows when the watermark
// closes a window — exactly as the Rust `window-kinds` does, so the tests
// hold all three languages to the same windows computed offline.
//
// Config: {"kind": "tumbling" | "sliding" | "session", "size_ms",
// "slide_ms", "gap_ms", "emit": "close" | "update"}.

import { Windows } from "./weir_window.js";
import { byteStrings, float64Column, int64Column, numbers, utf8Column } from "./weir_columns.js";

// One component instance per epoch: what `init` built lives here.
let windows = null;

function failed(e) {
  if (e && typeof e === "object" && "tag" in e) return e;
  return { tag: "failed", val: `${e && e.name}: ${e && e.message}` };
}

export function init(text) {
  try {
    const c = JSON.parse(text);
    if (c.kind === "tumbling") windows = Windows.tumbling(c.size_ms);
    else if (c.kind === "sliding") windows = Windows.sliding(c.size_ms, c.slide_ms);
    else if (c.kind === "session") windows = Windows.session(c.gap_ms);
    else throw new Error(`unknown kind ${JSON.stringify(c.kind)}`);
    windows.emit(c.emit === "update" ? "update" : "close").collectRows(true);
  } catch (e) {
    throw { tag: "invalid-config", val: `config: ${e && e.message}` };
  }
}

export function migrate(_fromVersion) {}

function output(rows) {
  const col = (f) => rows.map(([what, w]) => f(what, w));
  const comma = new Uint8Array([0x2c]);
  const joined = (parts) => {
    const out = [];
    parts.forEach((p, i) => {
      if (i) out.push(...comma);
      out.push(...p);
    });
    return Uint8Array.from(out);
  };
  return {
    numRows: rows.length,
    columns: [
      { name: "what", column: utf8Column(col((what) => what)) },
      { name: "card_id", column: utf8Column(col((_, w) => w.key)) },
      { name: "start", column: int64Column(col((_, w) => w.startMs)) },
      { name: "end", column: int64Column(col((_, w) => w.endMs)) },
      { name: "count", column: int64Column(col((_, w) => w.agg.count)) },
      { name: "sum", column: float64Column(col((_, w) => w.agg.sum)) },
      { name: "min", column: float64Column(col((_, w) => w.agg.min)) },
      { name: "max", column: float64Column(col((_, w) => w.agg.max)) },
      { name: "txns", column: utf8Column(col((_, w) => joined(w.rows))) },
    ],
  };
}

export function process(ctx, input) {
  try {
    const n = input.numRows();
    const index = new Map(input.schema().map((f, i) => [f.name, i]));
    const card = byteStrings(input.column(index.get("card_id")), n);
    const ts = numbers(input.column(index.get("ts")), n);
    const amount = numbers(input.column(index.get("amount")), n);
    const txn = byteStrings(input.column(index.get("txn_id")), n);
    const rows = [];
    for (let r = 0; r < n; r++) {
      if (card[r] === null || ts[r] === null || amount[r] === null || txn[r] === null) continue;
      rows.push({ key: card[r], tsMs: Number(ts[r]), value: amount[r], payload: txn[r] });
    }
    const added = windows.add(rows);
    return output(added.updated.map((w) => ["update", w]));
  } catch (e) {
    throw failed(e);
  }
}

export function onTimers(ctx, fired) {
  try {
    return output(windows.close(fired).map((w) => ["close", w]));
  } catch (e) {
    throw failed(e);
  }
}
