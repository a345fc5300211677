// Artifacts for Weir operators in JavaScript: the named files deployed with
// this operator version (`weir deploy op.wasm --artifact model=model.onnx`,
// or `[operator] artifacts = { model = "model.onnx" }`). Their digests are
// recorded with every epoch, so a replay reads the same bytes; a new model
// alone is a new version, shadowed and rolled back like code. Read them in
// `init`: they never change for an instance.
//
//     import { require } from './weir_artifacts.js';
//     const weights = parse(require('model'));

import {
  get as hostGet,
  digest as hostDigest,
  names as hostNames,
} from 'weir:operator/artifacts@0.1.0';

// The bytes (Uint8Array) of artifact `name`, or undefined if this version
// has none.
export function get(name) {
  return hostGet(name);
}

// The bytes of artifact `name`; throws the config error `init` should
// return when the version was deployed without it.
export function require(name) {
  const data = hostGet(name);
  if (data === undefined || data === null) {
    throw { tag: 'invalid-config', val: `this version has no artifact \`${name}\` (deploy it with --artifact ${name}=FILE)` };
  }
  return data;
}

// The content digest (`sha256:…`) of artifact `name`, as `offsets/N` records it.
export function digest(name) {
  return hostDigest(name);
}

// This version's artifact names, sorted.
export function names() {
  return hostNames();
}
