// `operators/card-home` in JavaScript: each payment with its card's home
// country from the pipeline's `cards` table (sdk/js/weir_lookup.js),
// whether it was made away from home, the table version it read, and the
// size and digest of its artifact `notes` (sdk/js/weir_artifacts.js). The
// same output as the Rust operator, row for row.

import { strings, utf8Column, int64Column } from "./weir_columns.js";
import { get, version } from "./weir_lookup.js";
import { get as artifact, digest } from "./weir_artifacts.js";

export function init(_config) {}

function boolColumn(values) {
  const bits = new Uint8Array((values.length + 7) >> 3);
  values.forEach((v, i) => {
    if (v) bits[i >> 3] |= 1 << (i & 7);
  });
  return { values: { tag: "boolean", val: bits }, validity: undefined };
}

export function process(ctx, input) {
  const n = input.numRows();
  const index = new Map(input.schema().map((f, i) => [f.name, i]));
  const col = (name) => strings(input.column(index.get(name)), n);
  const card = col("card_id");
  const txn = col("txn_id");
  const country = col("country");
  const home = get("cards", card, ["home_country"]).home_country;
  const away = home.map((h, i) => h !== null && h !== country[i]);
  const v = version("cards") ?? "";
  const notes = artifact("notes");
  const notesBytes = notes === undefined || notes === null ? 0 : notes.length;
  const notesDigest = digest("notes") ?? "";
  return {
    numRows: n,
    columns: [
      { name: "txn_id", column: utf8Column(txn) },
      { name: "card_id", column: utf8Column(card) },
      { name: "home_country", column: utf8Column(home) },
      { name: "away", column: boolColumn(away) },
      { name: "cards_version", column: utf8Column(new Array(n).fill(v)) },
      { name: "notes_bytes", column: int64Column(new Array(n).fill(notesBytes)) },
      { name: "notes_digest", column: utf8Column(new Array(n).fill(notesDigest)) },
    ],
  };
}
