// pprof_decode.js: reads a `gpumemprof convert --pprof` file with a decoder nobody here wrote (the
// npm package pprof-format, DataDog's pure JavaScript profile.proto reader, pinned in
// tests/convert/nodedeps) after node's own gunzip, checks the references of the profile (every id
// and string index must resolve) and prints what check_pprof.py compares as JSON:
//   {"sample_types": ["inuse_space/bytes", ...], "default": "inuse_space", "period": ...,
//    "samples": [{"values": [...], "labels": {...}, "frames": [[function, file, line], ...]}],
//    "errors": [...]}
// Frames are innermost first, a location's inlined lines flattened (innermost first).
//   node pprof_decode.js NODE_MODULES_DIR FILE
'use strict';
const fs = require('fs');
const path = require('path');
const zlib = require('zlib');

const [modules, file] = process.argv.slice(2);
const { Profile } = require(path.resolve(modules, 'pprof-format'));

const errors = [];
const raw = fs.readFileSync(file);
if (raw[0] !== 0x1f || raw[1] !== 0x8b) errors.push('not gzip (no 1f 8b magic)');
const p = Profile.decode(zlib.gunzipSync(raw));
const strings = p.stringTable.strings;
if (strings[0] !== '') errors.push('string_table[0] is not ""');
const S = (i, what) => {
  const k = Number(i);
  if (!Number.isInteger(k) || k < 0 || k >= strings.length) {
    errors.push(`${what}: string index ${i} out of range`);
    return '';
  }
  return strings[k];
};
const byId = (list, what) => {
  const m = new Map();
  for (const x of list) {
    const id = Number(x.id);
    if (!id) errors.push(`${what} with id 0`);
    if (m.has(id)) errors.push(`${what} ${id} twice`);
    m.set(id, x);
  }
  return m;
};
const funcs = byId(p.function, 'function');
const locs = byId(p.location, 'location');
for (const f of p.function) {
  S(f.name, 'function name');
  S(f.filename, 'function filename');
}
const frameOf = (loc) => {
  const out = [];
  if (!loc.line.length) errors.push(`location ${loc.id} has no line`);
  for (const ln of loc.line) {
    const f = funcs.get(Number(ln.functionId));
    if (!f) {
      errors.push(`location ${loc.id}: function ${ln.functionId} missing`);
      continue;
    }
    out.push([S(f.name, 'name'), S(f.filename, 'file'), Number(ln.line)]);
  }
  return out;
};
const samples = [];
for (const s of p.sample) {
  const labels = {};
  for (const l of s.label) labels[S(l.key, 'label key')] = S(l.str, 'label str');
  const frames = [];
  for (const id of s.locationId) {
    const loc = locs.get(Number(id));
    if (!loc) errors.push(`sample: location ${id} missing`);
    else frames.push(...frameOf(loc));
  }
  if (s.value.length !== p.sampleType.length)
    errors.push(`sample with ${s.value.length} values for ${p.sampleType.length} types`);
  samples.push({ values: s.value.map(Number), labels, frames });
}
process.stdout.write(JSON.stringify({
  sample_types: p.sampleType.map((t) => S(t.type, 'type') + '/' + S(t.unit, 'unit')),
  default: S(p.defaultSampleType, 'default_sample_type'),
  period_type: p.periodType ? S(p.periodType.type, 'period type') + '/' + S(p.periodType.unit, 'period unit') : '',
  period: Number(p.period),
  time_nanos: String(p.timeNanos),
  comments: p.comment.map((c) => S(c, 'comment')),
  samples,
  errors,
}) + '\n');
