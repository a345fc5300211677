// Named outputs for Weir operators in JavaScript: rows for an output other
// than the one `process` returns (the `default` output). The pipeline
// routes each output to its own sinks (`[[sink]] output = "scores"`).
// Emitted rows go with the epoch like returned ones: none if the epoch
// fails, the same on replay.
//
//     import { emit } from './weir_outputs.js';
//     emit('scores', n, [{ name: 'txn_id', column: utf8Column(txn) }, ...]);

import { emit as hostEmit } from 'weir:operator/outputs@0.1.0';

// Sends `numRows` rows (`columns`: `{ name, column }` objects) to output
// `name` (1 to 64 lowercase letters, digits, `_` or `-`, starting with a
// letter). The host checks them like returned rows: a bad name or bad rows
// fail the epoch.
export function emit(name, numRows, columns) {
  if (numRows > 0) {
    hostEmit(name, { numRows, columns });
  }
}
