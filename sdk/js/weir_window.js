// Event-time windows for Weir operators in JavaScript, on the host's keyed
// state and timers: tumbling, sliding (hop) and session windows per key,
// with count, sum, min and max of a value and, if asked, the rows
// themselves. A window is emitted when the watermark closes it (Spark's
// append mode) or on every update (update mode).
//
// The same semantics and the same stored form as the Rust SDK's
// `weir_sdk::window` and the Python `weir_window.py`, so an operator can be
// rewritten in another language and keep its open windows:
// - windows are [start, end) of event time; tumbling and sliding starts are
//   multiples of the slide; a session is [first, last + gap) and merges with
//   any session it overlaps;
// - a window closes in the epoch whose watermark reaches its end: its timer
//   fires after the epoch's rows, so they are in it;
// - a row is late for a window the epoch before had already closed
//   (end <= previous watermark); it is left out, its index in `added.late`.
//
// Build against the `timer-operator` world (componentize-js --world-name
// timer-operator) with this file next to the operator:
//
//   import { Windows } from "./weir_window.js";
//   const windows = Windows.tumbling(60_000).collectRows(true);
//   export function process(ctx, batch) { windows.add(rows); ... }   // rows: {key, tsMs, value, payload}
//   export function onTimers(ctx, fired) { for (const w of windows.close(fired)) ... }
//
// Keys and payloads are Uint8Arrays; times are numbers of Unix ms (the WIT
// s64s are BigInts; this module converts at the boundary).

import * as state from "weir:operator/state@0.1.0";
import * as timers from "weir:operator/timers@0.1.0";
import * as eventTime from "weir:operator/event-time@0.1.0";

const AGG_LEN = 32;

/** Bad window settings or corrupt window state. */
export class WindowError extends Error {}

function corrupt() {
  return new WindowError("window state is corrupt");
}

/** Count, sum, min and max of the values added to a window. */
export class Aggregate {
  constructor(count = 0, sum = 0, min = Infinity, max = -Infinity) {
    this.count = count;
    this.sum = sum;
    this.min = min;
    this.max = max;
  }
  add(value) {
    this.count += 1;
    this.sum += value;
    if (value < this.min) this.min = value;
    if (value > this.max) this.max = value;
  }
  merge(other) {
    this.count += other.count;
    this.sum += other.sum;
    if (other.min < this.min) this.min = other.min;
    if (other.max > this.max) this.max = other.max;
  }
  mean() {
    return this.count ? this.sum / this.count : NaN;
  }
}

// Byte strings: growing writer and bounds-checked reader.

class Writer {
  constructor() {
    this.buf = new Uint8Array(256);
    this.len = 0;
  }
  reserve(n) {
    if (this.len + n <= this.buf.length) return;
    const grown = new Uint8Array(Math.max(this.buf.length * 2, this.len + n));
    grown.set(this.buf.subarray(0, this.len));
    this.buf = grown;
  }
  bytes(b) {
    this.reserve(b.length);
    this.buf.set(b, this.len);
    this.len += b.length;
  }
  u32le(n) {
    this.reserve(4);
    new DataView(this.buf.buffer).setUint32(this.len, n, true);
    this.len += 4;
  }
  agg(a) {
    this.reserve(AGG_LEN);
    const v = new DataView(this.buf.buffer);
    v.setBigUint64(this.len, BigInt(a.count), true);
    v.setFloat64(this.len + 8, a.sum, true);
    v.setFloat64(this.len + 16, a.min, true);
    v.setFloat64(this.len + 24, a.max, true);
    this.len += AGG_LEN;
  }
  i64le(t) {
    this.reserve(8);
    new DataView(this.buf.buffer).setBigInt64(this.len, BigInt(t), true);
    this.len += 8;
  }
  done() {
    return this.buf.slice(0, this.len);
  }
}

class Reader {
  constructor(bytes) {
    this.b = bytes;
    this.v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.at = 0;
  }
  need(n) {
    if (this.at + n > this.b.length) throw corrupt();
  }
  take(n) {
    this.need(n);
    const out = this.b.slice(this.at, this.at + n);
    this.at += n;
    return out;
  }
  u32le() {
    this.need(4);
    const n = this.v.getUint32(this.at, true);
    this.at += 4;
    return n;
  }
  i64le() {
    this.need(8);
    const n = Number(this.v.getBigInt64(this.at, true));
    this.at += 8;
    return n;
  }
  agg() {
    this.need(AGG_LEN);
    const at = this.at;
    this.at += AGG_LEN;
    return new Aggregate(
      Number(this.v.getBigUint64(at, true)),
      this.v.getFloat64(at + 8, true),
      this.v.getFloat64(at + 16, true),
      this.v.getFloat64(at + 24, true),
    );
  }
  get done() {
    return this.at >= this.b.length;
  }
}

function encodeAgg(a) {
  const w = new Writer();
  w.agg(a);
  return w.done();
}

// Big-endian bytes whose byte order is the numeric order of t.
function sortable(t) {
  const out = new Uint8Array(8);
  new DataView(out.buffer).setBigUint64(0, BigInt.asUintN(64, BigInt(t)) ^ (1n << 63n), false);
  return out;
}

function unsortable(b) {
  const v = new DataView(b.buffer, b.byteOffset, 8).getBigUint64(0, false) ^ (1n << 63n);
  return Number(BigInt.asIntN(64, v));
}

function concat(...parts) {
  const w = new Writer();
  for (const p of parts) w.bytes(p);
  return w.done();
}

function u32be(n) {
  const out = new Uint8Array(4);
  new DataView(out.buffer).setUint32(0, n, false);
  return out;
}

function equal(a, b) {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function startsWith(a, prefix) {
  return a.length >= prefix.length && equal(a.subarray(0, prefix.length), prefix);
}

function compare(a, b) {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return a[i] - b[i];
  return a.length - b.length;
}

// Map keys for byte strings (Latin-1: one char per byte, order preserved).
function tag(bytes) {
  let s = "";
  for (let i = 0; i < bytes.length; i++) s += String.fromCharCode(bytes[i]);
  return s;
}

function pack(strings) {
  const offsets = new Uint32Array(strings.length + 1);
  const w = new Writer();
  strings.forEach((s, i) => {
    w.bytes(s);
    offsets[i + 1] = w.len;
  });
  return { offsets, data: w.done() };
}

function unpack({ offsets, data }) {
  const out = [];
  for (let i = 0; i + 1 < offsets.length; i++) out.push(data.slice(offsets[i], offsets[i + 1]));
  return out;
}

// The header of a key that names its key group (two big-endian bytes after
// it): with parallel tasks, a key that gathers many routing keys (every
// card's window ending at one time) is kept once per group, so that each
// task touches its own (the Rust SDK's `state::grouped_key`).
const GROUPED = Uint8Array.from([0xff, 0x6b, 0x67]);

function inGroup(group, rest) {
  return concat(GROUPED, [group >> 8, group & 0xff], rest);
}

function ungrouped(key) {
  return startsWith(key, GROUPED) && key.length >= GROUPED.length + 2
    ? key.subarray(GROUPED.length + 2)
    : key;
}

function prefixEnd(prefix) {
  const end = Array.from(prefix);
  while (end.length) {
    const last = end.pop();
    if (last < 255) {
      end.push(last + 1);
      return Uint8Array.from(end);
    }
  }
  return undefined;
}

function pushPart(w, key, agg, payloads) {
  w.u32le(key.length);
  w.bytes(key);
  w.agg(agg);
  w.u32le(payloads.length);
  for (const p of payloads) {
    w.u32le(p.length);
    w.bytes(p);
  }
}

function* readParts(chunk) {
  const r = new Reader(chunk);
  while (!r.done) {
    const key = r.take(r.u32le());
    const agg = r.agg();
    const n = r.u32le();
    const rows = [];
    for (let i = 0; i < n; i++) rows.push(r.take(r.u32le()));
    yield { key, agg, rows };
  }
}

// Ends of the [end - size, end) windows holding ts, latest first.
function ends(ts, size, slide) {
  const out = [];
  for (let end = (Math.floor(ts / slide) + 1) * slide + size - slide; end > ts; end -= slide) out.push(end);
  return out;
}

// "\xffwin": the prefix every window state and timer key starts with.
const WIN = Uint8Array.from([0xff, 0x77, 0x69, 0x6e]);

/** A windowed aggregation over the operator's state. */
export class Windows {
  constructor(kind, { sizeMs = 0, slideMs = 0, gapMs = 0 } = {}) {
    const ok = { tumbling: sizeMs > 0, sliding: slideMs > 0 && sizeMs >= slideMs, session: gapMs > 0 }[kind];
    if (!ok) {
      throw new WindowError(
        `window ${kind} (size ${sizeMs}, slide ${slideMs}, gap ${gapMs}): sizes must be positive and a slide no longer than the size`,
      );
    }
    this.kind = kind;
    this.size = sizeMs;
    this.slide = slideMs || sizeMs;
    this.gap = gapMs;
    this.onUpdate = false;
    this.collect = false;
    this.prefix = concat(WIN, [0]);
    this.groups = new Map();
  }

  // The key group the host routes `key`'s rows by (asked once per key).
  group(key) {
    const k = tag(key);
    if (!this.groups.has(k)) this.groups.set(k, state.keyGroup(key));
    return this.groups.get(k);
  }

  static tumbling(sizeMs) {
    return new Windows("tumbling", { sizeMs });
  }
  static sliding(sizeMs, slideMs) {
    return new Windows("sliding", { sizeMs, slideMs });
  }
  static session(gapMs) {
    return new Windows("session", { gapMs });
  }

  /** "close" (default: once, final) or "update" (every change). */
  emit(mode) {
    if (mode !== "close" && mode !== "update") throw new WindowError(`emit ${mode}: expected "close" or "update"`);
    this.onUpdate = mode === "update";
    return this;
  }

  /** Keep each row's payload, handed back in `window.rows` on close. */
  collectRows(collect = true) {
    this.collect = collect;
    return this;
  }

  /** Names the aggregation so one operator can keep several apart. */
  named(name) {
    const n = new TextEncoder().encode(name).subarray(0, 255);
    this.prefix = concat(WIN, [n.length], n);
    return this;
  }

  /** Whether a fired timer is this aggregation's. */
  owns(timer) {
    return startsWith(ungrouped(timer.key), this.prefix);
  }

  // In the key group of the routing key: the task that gets the key's rows
  // owns its sessions and running aggregates.
  keyPrefix(key) {
    return inGroup(this.group(key), concat(this.prefix, [0x6b], u32be(key.length), key));
  }
  windowKey(key, start) {
    return concat(this.keyPrefix(key), sortable(start));
  }
  parse(wkey) {
    wkey = ungrouped(wkey);
    const head = concat(this.prefix, [0x6b]);
    const rest = wkey.subarray(head.length);
    if (!startsWith(wkey, head) || rest.length < 4) throw new WindowError("window state key is corrupt");
    const n = new DataView(rest.buffer, rest.byteOffset, 4).getUint32(0, false);
    if (rest.length !== 4 + n + 8) throw new WindowError("window state key is corrupt");
    return { key: rest.slice(4, 4 + n), start: unsortable(rest.subarray(4 + n)) };
  }
  // The list (and timer) of key group `group`'s windows ending at `end`.
  endKey(group, end) {
    return inGroup(group, this.endName(end));
  }
  endName(end) {
    return concat(this.prefix, [0x65], sortable(end));
  }

  /**
   * Adds a batch's rows (`{key, tsMs, value, payload}`) to their windows;
   * returns `{late: [row index], updated: [window]}`.
   */
  add(rows) {
    const previous = eventTime.previousWatermark();
    const closedThrough = previous === undefined ? undefined : Number(previous);
    return this.kind === "session" ? this.addSessions(rows, closedThrough) : this.addAligned(rows, closedThrough);
  }

  /**
   * The windows the fired timers close (`{key, startMs, endMs, agg, rows}`),
   * by end then key; their state is removed. Timers of other owners are
   * skipped.
   */
  close(fired) {
    const closed = [];
    for (const timer of fired) {
      if (!this.owns(timer)) continue;
      if (this.kind === "session") {
        const w = this.closeSession(timer);
        if (w) closed.push(w);
      } else {
        closed.push(...this.closeEnd(timer));
      }
    }
    // By end then key, as the Rust SDK emits them: timers fire by end then
    // key group, which is not key order.
    closed.sort((a, b) => a.endMs - b.endMs || compare(a.key, b.key));
    return closed;
  }

  // Tumbling and sliding: state per window end and key group (see the
  // Rust SDK's aligned.rs): one chunk per (end, group) per batch, one timer
  // per (end, group).

  addAligned(rows, closedThrough) {
    const late = [];
    // By (end, group): `${end}/${group}` → {end, group, parts}.
    const byEnd = new Map();
    rows.forEach((row, i) => {
      let kept = false;
      const k = tag(row.key);
      const group = this.group(row.key);
      for (const end of ends(row.tsMs, this.size, this.slide)) {
        if (closedThrough !== undefined && end <= closedThrough) continue;
        kept = true;
        const slot = `${end}/${group}`;
        if (!byEnd.has(slot)) byEnd.set(slot, { end, group, parts: new Map() });
        const parts = byEnd.get(slot).parts;
        if (!parts.has(k)) parts.set(k, { key: row.key, agg: new Aggregate(), payloads: [] });
        const part = parts.get(k);
        part.agg.add(row.value);
        if (this.collect) part.payloads.push(row.payload);
      }
      if (!kept) late.push(i);
    });
    const slots = [...byEnd.values()].sort((a, b) => a.end - b.end || a.group - b.group);
    const sortedParts = (slot) => [...slot.parts.values()].sort((a, b) => compare(a.key, b.key));
    const lists = [];
    const chunks = [];
    for (const slot of slots) {
      const w = new Writer();
      for (const p of sortedParts(slot)) pushPart(w, p.key, p.agg, p.payloads);
      lists.push(this.endKey(slot.group, slot.end));
      chunks.push(w.done());
      timers.set(lists[lists.length - 1], BigInt(slot.end));
    }
    if (lists.length) state.appendMany(pack(lists), pack(chunks));
    const touched = slots.flatMap((slot) => sortedParts(slot).map((p) => ({ end: slot.end, ...p })));
    return { late, updated: this.onUpdate ? this.updateAggregates(touched) : [] };
  }

  updateAggregates(touched) {
    if (!touched.length) return [];
    const keys = touched.map((t) => this.windowKey(t.key, t.end - this.size));
    const [values, present] = state.getMany(pack(keys));
    const stored = unpack(values);
    const updated = touched.map((t, i) => {
      const agg = new Aggregate();
      agg.merge(t.agg);
      if (present[i >> 3] & (1 << (i & 7))) agg.merge(new Reader(stored[i]).agg());
      return { key: t.key, startMs: t.end - this.size, endMs: t.end, agg, rows: [] };
    });
    state.putMany(pack(keys), pack(updated.map((w) => encodeAgg(w.agg))), undefined);
    return updated;
  }

  closeEnd(timer) {
    const end = Number(timer.atMs);
    // The timer names the list: one group's (or, written before key
    // groups, every key's) windows ending at `end`.
    if (!equal(ungrouped(timer.key), this.endName(end))) return [];
    const list = timer.key;
    const merged = new Map();
    for (const chunk of unpack(state.readList(list))) {
      for (const { key, agg, rows } of readParts(chunk)) {
        const k = tag(key);
        if (!merged.has(k)) merged.set(k, { key, agg: new Aggregate(), rows: [] });
        const total = merged.get(k);
        total.agg.merge(agg);
        total.rows.push(...rows);
      }
    }
    state.clearList(list);
    const windows = [...merged.values()].sort((a, b) => compare(a.key, b.key));
    if (this.onUpdate && windows.length) {
      state.deleteMany(pack(windows.map((w) => this.windowKey(w.key, end - this.size))));
    }
    return windows.map((w) => ({ key: w.key, startMs: end - this.size, endMs: end, agg: w.agg, rows: w.rows }));
  }

  // Sessions: each under its own key (key, start) with a timer at its end.

  addSessions(rows, closedThrough) {
    const late = [];
    const byKey = new Map();
    rows.forEach((row, i) => {
      if (closedThrough !== undefined && row.tsMs + this.gap <= closedThrough) {
        late.push(i);
        return;
      }
      const k = tag(row.key);
      if (!byKey.has(k)) byKey.set(k, { key: row.key, indices: [] });
      byKey.get(k).indices.push(i);
    });
    const updated = [];
    for (const { key, indices } of [...byKey.values()].sort((a, b) => compare(a.key, b.key))) {
      updated.push(...this.mergeSessions(key, rows, indices));
    }
    return { late, updated };
  }

  storedSessions(key) {
    const prefix = this.keyPrefix(key);
    const end = prefixEnd(prefix);
    const found = [];
    let start = prefix;
    for (;;) {
      const [keys, values] = state.scan(start, end, 1024);
      const ks = unpack(keys);
      const vs = unpack(values);
      ks.forEach((k, i) => found.push([k, vs[i]]));
      if (ks.length < 1024) return found;
      start = concat(ks[ks.length - 1], [0]);
    }
  }

  mergeSessions(key, rows, indices) {
    const pieces = [];
    for (const [wkey, value] of this.storedSessions(key)) {
      const { start } = this.parse(wkey);
      const r = new Reader(value);
      const agg = r.agg();
      const end = r.i64le();
      pieces.push({ start, end, agg, stored: [[start, end]], added: 0, payloads: [] });
    }
    for (const i of indices) {
      const row = rows[i];
      const agg = new Aggregate();
      agg.add(row.value);
      const payloads = this.collect ? [row.payload] : [];
      pieces.push({ start: row.tsMs, end: row.tsMs + this.gap, agg, stored: [], added: 1, payloads });
    }
    pieces.sort((a, b) => a.start - b.start); // stable: stored first, rows in order
    const merged = [];
    for (const p of pieces) {
      const cur = merged[merged.length - 1];
      if (cur && p.start < cur.end) {
        cur.end = Math.max(cur.end, p.end);
        cur.agg.merge(p.agg);
        cur.stored.push(...p.stored);
        cur.added += p.added;
        cur.payloads.push(...p.payloads);
      } else {
        merged.push(p);
      }
    }
    const updated = [];
    for (const s of merged) {
      if (!s.added) continue;
      this.writeSession(key, s);
      if (this.onUpdate) updated.push({ key, startMs: s.start, endMs: s.end, agg: s.agg, rows: [] });
    }
    return updated;
  }

  writeSession(key, s) {
    const wkey = this.windowKey(key, s.start);
    for (const [oldStart, oldEnd] of s.stored) {
      const oldKey = this.windowKey(key, oldStart);
      timers.delete(oldKey, BigInt(oldEnd));
      if (oldStart !== s.start) {
        state.delete(oldKey);
        if (this.collect) {
          const moved = unpack(state.readList(oldKey));
          if (moved.length) state.appendMany(pack(moved.map(() => wkey)), pack(moved));
          state.clearList(oldKey);
        }
      }
    }
    const w = new Writer();
    w.agg(s.agg);
    w.i64le(s.end);
    state.put(wkey, w.done(), undefined);
    timers.set(wkey, BigInt(s.end));
    if (s.payloads.length) state.appendMany(pack(s.payloads.map(() => wkey)), pack(s.payloads));
  }

  closeSession(timer) {
    const value = state.get(timer.key);
    if (value === undefined) return null;
    const { key, start } = this.parse(timer.key);
    const r = new Reader(value);
    const agg = r.agg();
    const end = r.i64le();
    if (end !== Number(timer.atMs)) return null;
    let rows = [];
    if (this.collect) {
      rows = unpack(state.readList(timer.key));
      state.clearList(timer.key);
    }
    state.delete(timer.key);
    return { key, startMs: start, endMs: end, agg, rows };
  }
}
