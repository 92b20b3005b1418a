'use strict';
// The HTTP contract's conformance file (test/conformance/http.json, driven as
// test/conformance/http_runner.sql drives it) through the package on Express and on Fastify,
// over HTTP, in single-transaction and two-phase mode: every case's prior requests, its
// request, then what was answered, whether the handler ran, and what idem_lookup has stored.
// A run tag of its own per framework and mode (' #' and the tag after every operation).
const { describe, test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const crypto = require('node:crypto');
const { setTimeout: sleep } = require('node:timers/promises');
const idempotency = require('..');
const apps = require('./apps');
const db = require('./db');

const FILE = path.resolve(__dirname, '../../../test/conformance/http.json');
const doc = JSON.parse(fs.readFileSync(FILE, 'utf8'));

let pool;
before(async () => { pool = await db.pool({ max: 4 }); });
after(() => pool.end());

const raw = (r) => (r.body_hex !== undefined ? Buffer.from(r.body_hex, 'hex') : Buffer.from(r.body ?? '', 'utf8'));

for (const framework of ['express', 'fastify']) {
  for (const mode of ['single', 'two-phase']) {
    describe(`conformance ${framework} ${mode}`, () => {
      const tag = `node-${framework}-${mode}-${crypto.randomBytes(4).toString('hex')}`;
      const state = { handler: null, ran: 0, reclaimed: false };
      let service;
      before(async () => {
        // The request's principal, operation and handler come from the runner: principal and
        // operation from two test headers (the operation with the run's tag), the handler from
        // the current case.
        const options = (shared) => ({ pool, mode, sharedKeySpace: shared,
          principal: (req) => req.headers['x-principal'] ?? null,
          operation: (req) => req.headers['x-operation'] });
        const handler = async (ctx) => {
          state.ran += 1;
          state.reclaimed = ctx.idem.reclaimed;
          const h = state.handler;
          if (h.raise === 'exception') throw new Error('the handler raised');
          if (h.raise !== undefined) {
            assert.match(h.raise, /^[0-9A-Z]{5}$/);
            await ctx.idem.query(`DO $$ BEGIN RAISE EXCEPTION USING ERRCODE = '${h.raise}'; END $$`);
          }
          ctx.answer(h.status, h.headers, h.body);
        };
        const routes = [{ path: '/contract', idem: idempotency(options(false)), handler },
          { path: '/shared', idem: idempotency(options(true)), handler }];
        for (const r of routes) await r.idem.ready();
        service = await apps[framework](routes);
      });
      after(() => service?.close());

      // One request through the service; { ran, reclaimed, status, headers, body }.
      async function request(r, handler) {
        Object.assign(state, { handler, ran: 0, reclaimed: false });
        const headers = { 'Content-Type': 'application/json', 'X-Operation': `${r.operation} #${tag}` };
        if (r.principal !== null && r.principal !== undefined) headers['X-Principal'] = r.principal;
        if (r.key !== null && r.key !== undefined) headers['Idempotency-Key'] = r.key;
        const got = await apps.send(`${service.base}/${r.shared_key_space ? 'shared' : 'contract'}`, { headers, body: raw(r) });
        return { ran: state.ran > 0, reclaimed: state.reclaimed, ...got };
      }

      // A prior request held in flight: claimed two-phase with the lease given, never finished
      // (as http_runner.sql does it).
      const hold = (r, lease) => pool.query(`SELECT idempotency.idem_http_begin($1, $2, $3, $4, lease => $5::interval,
        shared_key_space => $6)`, [r.principal, `${r.operation} #${tag}`, r.key, raw(r), lease, Boolean(r.shared_key_space)]);

      for (const c of doc.cases) {
        if (c.modes && !c.modes.includes(mode)) continue;
        test(c.name, async () => {
          for (const p of c.prior ?? []) {
            if (p.hold) await hold(p.request, p.hold);
            else await request(p.request, p.handler);
            await sleep(p.sleep_ms ?? 0);
          }
          const got = await request(c.request, c.handler);
          const problems = await check(c, got, tag);
          assert.deepEqual(problems, [], `${c.name}: ${problems.join('; ')}`);
        });
      }
    });
  }
}

// What differs between a case's expectation and what happened (http_runner.sql's http_check).
async function check(c, r, tag) {
  const x = c.expect;
  const problems = [];
  if (x.ran !== r.ran) problems.push(`ran ${r.ran}`);
  if ('reclaimed' in x && x.reclaimed !== r.reclaimed) problems.push(`reclaimed ${r.reclaimed}`);
  if (x.status !== r.status) problems.push(`status ${r.status}`);
  for (const [name, want] of Object.entries(x.headers ?? {})) {
    const got = r.headers.get(name);
    if (got === null || (want !== '*' && got !== want)) problems.push(`header ${name}: ${got ?? 'absent'}`);
  }
  for (const name of x.absent ?? []) if (r.headers.has(name)) problems.push(`header ${name} present`);
  if ('body' in x && r.body.toString('utf8') !== x.body) problems.push(`body ${r.body.toString('utf8')}`);
  if ('problem' in x) {
    let d;
    try { d = JSON.parse(r.body.toString('utf8')); } catch { d = null; }
    if (d?.type !== 'about:blank' || d?.status !== x.problem) problems.push(`problem ${r.body.toString('utf8')}`);
  }
  const s = c.stored;
  if (s !== null && s !== undefined) {
    const q = c.request;
    const { rows: [l] } = await pool.query(`SELECT l.status, l.response_status, l.resource_id, l.attempt, l.response_headers,
        convert_from(l.response_body, 'UTF8') AS response_body
      FROM idempotency.idem_lookup(idempotency.idem_http_scope($1, $2, $3), idempotency.idem_key_from_header($4)) l`,
    [q.principal, `${q.operation} #${tag}`, Boolean(q.shared_key_space), q.key]);
    if (s === 'released') {
      if (l && l.status !== 'failed') problems.push(`stored ${l.status}`);
    } else {
      if ((l?.status ?? null) !== s.status) problems.push(`stored status ${l?.status ?? null}`);
      if ('response_status' in s && l?.response_status !== s.response_status) problems.push(`stored response_status ${l?.response_status}`);
      if ('resource_id' in s && l?.resource_id !== s.resource_id) problems.push(`stored resource_id ${l?.resource_id}`);
      if ('attempt' in s && l?.attempt !== s.attempt) problems.push(`stored attempt ${l?.attempt}`);
      if ('response_headers' in s && !equalJson(l?.response_headers, s.response_headers)) problems.push(`stored response_headers ${JSON.stringify(l?.response_headers)}`);
      if ('response_body' in s && l?.response_body !== s.response_body) problems.push(`stored response_body ${l?.response_body}`);
    }
  }
  return problems;
}

// jsonb equality: objects equal whatever their keys' order.
function equalJson(a, b) {
  try {
    assert.deepStrictEqual(a ?? null, b ?? null);
    return true;
  } catch {
    return false;
  }
}
