// Unit tests of the log view's line store (no daemon needed).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LogStore, MAX_LINE_BYTES, clean } from '../src/lines.js';

const enc = new TextEncoder();

test('lines split across chunks keep their stream and first-byte offset', () => {
  const s = new LogStore(100);
  s.push('stdout', enc.encode('hel'));
  s.push('stderr', enc.encode('oops\n'));
  s.push('stdout', enc.encode('lo\nwor'));
  s.push('stdout', enc.encode('ld\n'));
  assert.deepEqual(
    s.lines.map((l) => [l.stream, l.off, l.text]),
    [['stderr', 0, 'oops'], ['stdout', 0, 'hello'], ['stdout', 6, 'world']],
  );
  assert.deepEqual(s.next, { stdout: 12, stderr: 5 });
});

test('a multi-byte character split between chunks is decoded whole', () => {
  const s = new LogStore(10);
  const b = enc.encode('é€\n');
  s.push('stdout', b.subarray(0, 1));
  s.push('stdout', b.subarray(1, 4));
  s.push('stdout', b.subarray(4));
  assert.equal(s.lines[0].text, 'é€');
});

test('the store keeps only the newest lines, whatever the input size', () => {
  const cases = [
    { name: 'one huge chunk', chunks: 1 },
    { name: 'many small chunks', chunks: 500 },
  ];
  for (const tc of cases) {
    const s = new LogStore(50);
    const all = Array.from({ length: 10000 }, (_, i) => `line-${i}\n`).join('');
    const bytes = enc.encode(all);
    const step = Math.ceil(bytes.length / tc.chunks);
    for (let o = 0; o < bytes.length; o += step) s.push('stdout', bytes.subarray(o, o + step));
    const tail = s.since(0);
    assert.ok(tail.length <= 50, `${tc.name}: ${tail.length} lines kept`);
    assert.equal(tail[tail.length - 1].text, 'line-9999', tc.name);
    assert.ok(s.lines.length <= 50 + 50 / 4, `${tc.name}: ${s.lines.length} lines held`);
    assert.equal(s.next.stdout, bytes.length, tc.name);
  }
});

test('a line without end is cut into bounded pieces', () => {
  const s = new LogStore(10);
  s.push('stdout', new Uint8Array(MAX_LINE_BYTES * 3 + 5).fill(0x61));
  assert.ok(s.lines.length >= 3);
  for (const l of s.lines) assert.ok(l.text.length <= MAX_LINE_BYTES);
});

test('clean drops escape sequences and keeps what a carriage return leaves', () => {
  const cases = [
    ['\x1b[31mred\x1b[0m', 'red'],
    ['10%\r50%\r100%', '100%'],
    ['dos line\r', 'dos line'],
    ['\x1b]0;title\x07text', 'text'],
  ];
  for (const [in_, want] of cases) assert.equal(clean(in_), want, JSON.stringify(in_));
});
