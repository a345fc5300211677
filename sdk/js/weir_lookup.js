// Reference tables for Weir operators in JavaScript: the tables the
// pipeline declares (`[[lookup]] name = "cards"`), read a whole column of
// keys per call, at the versions the epoch's `offsets/N` records (a replay
// reads what the first run read).
//
//     import { get, version } from './weir_lookup.js';
//     const home = get('cards', cardIds, ['home_country']).home_country;

import { get as hostGet, version as hostVersion } from 'weir:operator/lookup@0.1.0';
import { numbers, strings, utf8Column, int64Column } from './weir_columns.js';

// Columns `columns` of table `table`'s rows for `keys` (strings, or bigints /
// numbers for an int64 key), in the keys' order, as an object of arrays
// (strings for utf8 columns, numbers otherwise; null where a key is not in
// the table). Throws the operator error the host names (an unknown table or
// column).
export function get(table, keys, columns) {
  const numeric = keys.some((k) => typeof k === 'bigint' || typeof k === 'number');
  const keyColumn = numeric ? int64Column(keys) : utf8Column(keys);
  let found;
  try {
    found = hostGet(table, keyColumn, columns);
  } catch (e) {
    throw { tag: 'failed', val: `lookup: ${e && e.payload !== undefined ? e.payload : e}` };
  }
  const out = {};
  columns.forEach((name, i) => {
    const column = found[i];
    out[name] = column.values.tag === 'utf8' ? strings(column, keys.length) : numbers(column, keys.length);
  });
  return out;
}

// The version of `table` this epoch reads (`sha256:…`), or undefined.
export function version(table) {
  return hostVersion(table);
}
