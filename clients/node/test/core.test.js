'use strict';
// The package's decisions without a database: the SQLSTATE -> HTTP table, the retryable rule,
// the options, the header allow-list, the SQL literals.
const test = require('node:test');
const assert = require('node:assert/strict');
const { errorAnswer, retryable, settings, pick, text, bytes } = require('../lib/core');

const err = (code, message = 'm') => Object.assign(new Error(message), code ? { code } : {});
const problemOf = (a) => a && { status: a.status, headers: a.headers, body: JSON.parse(a.body) };

test('bad key or body SQLSTATEs answer 400 problem JSON with the message', () => {
  for (const code of ['22004', '22023', '22001', '22P02', '22021', '22003', '54001']) {
    assert.deepEqual(problemOf(errorAnswer(err(code, `bad ${code}`))), { status: 400,
      headers: { 'Content-Type': 'application/problem+json' },
      body: { type: 'about:blank', title: `bad ${code}`, status: 400 } }, code);
  }
});

test('retryable failures answer 503 with Retry-After: 1', () => {
  for (const e of [err('40001'), err('40P01'), err('25006'), err('57P01'), err('57P03'), err('53300'),
    err('08006'), err('ECONNREFUSED'), err('ECONNRESET'), err(null, 'Connection terminated unexpectedly'),
    err(null, 'timeout exceeded when trying to connect')]) {
    const a = errorAnswer(e);
    assert.equal(a?.status, 503, `${e.code} ${e.message}`);
    assert.equal(a.headers['Retry-After'], '1');
    assert.equal(retryable(e), true);
  }
});

test('other errors are the framework\'s (null: its 500)', () => {
  for (const e of [err('23505'), err('42883'), err('IK002'), err('IK003'), err('XX000'), err(null, 'boom'), new TypeError('x')]) {
    assert.equal(errorAnswer(e), null, `${e.code} ${e.message}`);
    assert.equal(retryable(e), false);
  }
});

test('options: scope required, seconds > 0, heartbeat lease/3, default allow-list', () => {
  assert.throws(() => settings({}), /scope option is required/);
  assert.throws(() => settings({ scope: 's', lease: 0 }), /lease must be seconds > 0/);
  assert.throws(() => settings({ scope: 's', ttl: Number.NaN }), /ttl must be seconds > 0/);
  assert.throws(() => settings({ scope: 's', heartbeat: -1 }), /heartbeat must be seconds > 0/);
  const o = settings({ scope: 's', lease: 9 });
  assert.equal(o.heartbeat, 3);
  assert.equal(o.mode, 'single');
  assert.deepEqual(o.headers, ['Content-Type', 'Location']);
});

test('pick keeps the allow-listed headers, under the allow-list\'s names', () => {
  const h = { 'content-type': 'application/json', 'set-cookie': ['a=1', 'b=2'], etag: 7 };
  const get = (n) => h[n.toLowerCase()];
  assert.deepEqual(pick(get, ['Content-Type', 'Location', 'Set-Cookie', 'ETag']),
    { 'Content-Type': 'application/json', 'Set-Cookie': 'a=1, b=2', ETag: '7' });
});

test('SQL literals: quotes and backslashes escaped, bytes as hex', () => {
  assert.equal(text("a'b\\c"), "E'a''b\\\\c'");
  assert.equal(bytes(Buffer.from([0, 255, 39])), "decode('00ff27', 'hex')");
  assert.equal(bytes(null), 'NULL');
});
