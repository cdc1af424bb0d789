#!/usr/bin/env node
// An independent reader of matrix-report's timeline export: validates a
// Chrome trace-event JSON file against the format's rules that Perfetto UI,
// chrome://tracing and speedscope rely on, then checks it against what the
// test program did. No dependencies beyond node.
//
//   node timeline_check.js trace.json expect.json
//
// expect.json:
//   { "spans": [ { "tid": 1, "name_contains": "Step", "begin_ns": <monotonic>,
//                  "dur_us": 50000, "tol_us": 15000, "unfinished": false,
//                  "min_dur_us": 0 } ],
//     "instant": { "tid": 5, "min_ns": <monotonic>, "max_ns": <monotonic> },
//     "min_count": { "2": 3 },            // at least N "X" events on a tid
//     "min_arg": [ { "tid": 2, "arg": "dropped_frames", "min": 2, "count": 3 } ],
//     "contained": [ [3, 2], [4, 1] ] }   // every X on tid a lies inside an X on tid b
// Exit status 0 when every check passes; otherwise each failure on stderr, 1.
'use strict';
const fs = require('fs');

const failures = [];
function fail(msg) { failures.push(msg); }

const [tracePath, expectPath] = process.argv.slice(2);
if (!tracePath || !expectPath) {
  console.error('usage: timeline_check.js trace.json expect.json');
  process.exit(2);
}
let trace;
try {
  trace = JSON.parse(fs.readFileSync(tracePath, 'utf8'));
} catch (e) {
  console.error(`not JSON: ${e.message}`);
  process.exit(1);
}
const expect = JSON.parse(fs.readFileSync(expectPath, 'utf8'));

// --- The trace-event format (JSON Object Format). ---
if (typeof trace !== 'object' || !Array.isArray(trace.traceEvents)) {
  console.error('no traceEvents array');
  process.exit(1);
}
if (trace.displayTimeUnit !== undefined && !['ms', 'ns'].includes(trace.displayTimeUnit)) {
  fail(`displayTimeUnit must be "ms" or "ns", got ${trace.displayTimeUnit}`);
}
const isInt = (v) => Number.isInteger(v);
const isNum = (v) => typeof v === 'number' && Number.isFinite(v);
const named = new Set();  // "pid:tid" with a thread_name
const used = new Set();
const complete = [];
const instants = [];
trace.traceEvents.forEach((e, i) => {
  const where = `event ${i} (${JSON.stringify(e).slice(0, 120)})`;
  if (typeof e !== 'object' || e === null) return fail(`${where}: not an object`);
  if (typeof e.ph !== 'string') return fail(`${where}: no ph`);
  if (!isInt(e.pid) || !isInt(e.tid)) fail(`${where}: pid and tid must be integers`);
  if (e.args !== undefined && (typeof e.args !== 'object' || Array.isArray(e.args))) {
    fail(`${where}: args must be an object`);
  }
  switch (e.ph) {
    case 'M':
      if (!['process_name', 'thread_name', 'thread_sort_index', 'process_sort_index',
            'process_labels'].includes(e.name)) {
        fail(`${where}: unknown metadata ${e.name}`);
      }
      if (e.name === 'thread_name') {
        if (typeof (e.args || {}).name !== 'string') fail(`${where}: thread_name without args.name`);
        named.add(`${e.pid}:${e.tid}`);
      }
      break;
    case 'X':
      if (typeof e.name !== 'string' || e.name === '') fail(`${where}: X without a name`);
      if (!isNum(e.ts) || e.ts < 0) fail(`${where}: bad ts`);
      if (!isNum(e.dur) || e.dur < 0) fail(`${where}: bad dur`);
      complete.push(e);
      used.add(`${e.pid}:${e.tid}`);
      break;
    case 'i':
    case 'I':
      if (typeof e.name !== 'string') fail(`${where}: instant without a name`);
      if (!isNum(e.ts)) fail(`${where}: bad ts`);
      if (e.s !== undefined && !['t', 'p', 'g'].includes(e.s)) fail(`${where}: bad scope ${e.s}`);
      instants.push(e);
      used.add(`${e.pid}:${e.tid}`);
      break;
    default:
      fail(`${where}: unexpected phase ${e.ph}`);
  }
});
for (const t of used) if (!named.has(t)) fail(`track ${t} has events but no thread_name`);

// Nesting: on one thread, complete events are disjoint or nested.
const byTid = new Map();
for (const e of complete) {
  if (!byTid.has(e.tid)) byTid.set(e.tid, []);
  byTid.get(e.tid).push(e);
}
for (const [tid, events] of byTid) {
  events.sort((a, b) => a.ts - b.ts || b.dur - a.dur);
  const stack = [];
  for (const e of events) {
    while (stack.length && stack[stack.length - 1].ts + stack[stack.length - 1].dur <= e.ts) {
      stack.pop();
    }
    const top = stack[stack.length - 1];
    if (top && e.ts + e.dur > top.ts + top.dur) {
      fail(`tid ${tid}: "${e.name}" [${e.ts}, ${e.ts + e.dur}] overlaps "${top.name}" ` +
           `[${top.ts}, ${top.ts + top.dur}] without nesting`);
    }
    stack.push(e);
  }
}

// --- Against what the program did. ---
const other = trace.otherData || {};
if (!isNum(other.window_start_ns)) fail('otherData.window_start_ns missing');
const originNs = other.window_start_ns || 0;
const toUs = (ns) => (ns - originNs) / 1000;

for (const s of expect.spans || []) {
  const candidates = complete.filter((e) => e.tid === s.tid && e.name.includes(s.name_contains));
  const wantTs = toUs(s.begin_ns);
  if (!candidates.length) {
    fail(`no X on tid ${s.tid} named *${s.name_contains}*`);
    continue;
  }
  const e = candidates.reduce((a, b) => (Math.abs(a.ts - wantTs) <= Math.abs(b.ts - wantTs) ? a : b));
  const label = `"${e.name}" (tid ${s.tid})`;
  if (Math.abs(e.ts - wantTs) > s.tol_us) {
    fail(`${label}: ts ${e.ts} us, the program saw ${wantTs.toFixed(0)} us (tolerance ${s.tol_us})`);
  }
  if (s.dur_us !== undefined && Math.abs(e.dur - s.dur_us) > s.tol_us) {
    fail(`${label}: dur ${e.dur} us, the program took ${s.dur_us} us (tolerance ${s.tol_us})`);
  }
  if (s.min_dur_us !== undefined && e.dur < s.min_dur_us) {
    fail(`${label}: dur ${e.dur} us < ${s.min_dur_us}`);
  }
  if (s.unfinished !== undefined && Boolean((e.args || {}).unfinished) !== s.unfinished) {
    fail(`${label}: unfinished should be ${s.unfinished}`);
  }
}
if (expect.instant) {
  const want = expect.instant;
  const hits = instants.filter((e) => e.tid === want.tid);
  if (hits.length !== 1) {
    fail(`expected one instant on tid ${want.tid}, got ${hits.length}`);
  } else if (hits[0].ts < toUs(want.min_ns) || hits[0].ts > toUs(want.max_ns)) {
    fail(`instant at ${hits[0].ts} us, expected in [${toUs(want.min_ns).toFixed(0)}, ` +
         `${toUs(want.max_ns).toFixed(0)}] us`);
  }
}
for (const [tid, n] of Object.entries(expect.min_count || {})) {
  const got = complete.filter((e) => e.tid === Number(tid)).length;
  if (got < n) fail(`tid ${tid}: ${got} X events, expected at least ${n}`);
}
for (const m of expect.min_arg || []) {
  const got = complete.filter((e) => e.tid === m.tid && ((e.args || {})[m.arg] || 0) >= m.min);
  if (got.length < m.count) {
    fail(`tid ${m.tid}: ${got.length} events with ${m.arg} >= ${m.min}, expected ${m.count}`);
  }
}
for (const [inner, outer] of expect.contained || []) {
  const outers = complete.filter((e) => e.tid === outer);
  for (const e of complete.filter((x) => x.tid === inner)) {
    if (!outers.some((o) => o.ts <= e.ts && e.ts + e.dur <= o.ts + o.dur)) {
      fail(`"${e.name}" on tid ${inner} [${e.ts}, ${e.ts + e.dur}] is inside no event of tid ${outer}`);
    }
  }
}

if (failures.length) {
  for (const f of failures) console.error(`FAIL: ${f}`);
  process.exit(1);
}
console.log(`ok: ${trace.traceEvents.length} events, ${complete.length} complete, ` +
            `${instants.length} instants, ${byTid.size} tracks`);
