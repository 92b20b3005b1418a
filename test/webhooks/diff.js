#!/usr/bin/env node
// The webhooks_diff stage: the extension's webhook signatures against the
// official libraries, npm standardwebhooks and svix (Standard Webhooks) and stripe (the
// Stripe-Signature header), versions pinned in package.json / package-lock.json here.
//
// Generated cases (a seeded PRNG: IDEM_WH_SEED, IDEM_WH_CASES) are signed by a library or by
// the extension (idem_webhook_sign_*), then maybe altered (a tampered body, id or timestamp,
// whitespace, several signatures, a stale or future timestamp, ...), then verified by every
// library of the scheme and by the extension (idem_webhook_verify_*). Every case where a
// library and the extension disagree must match an entry of ALLOWED below (the same list is
// docs/webhooks.md, "Differences from the official libraries"); any other disagreement fails.
//   node diff.js            run (psql from PATH, the connection from PG* variables; creates
//                           and drops the database webhooks_diff)
//   IDEM_WH_PLANT=1 ...     self-check: the extension's verdicts are replaced by a planted
//                           fault (timestamps one second past the tolerance accepted); the run
//                           must fail
'use strict';
const { spawnSync } = require('child_process');
const { ALLOWED } = require('./allowed.js');
const { generate } = require('./cases.js');
const libs = require('./libs.js');

function psql(db, sql) {
    const r = spawnSync('psql', ['-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-d', db], {
        input: sql,
        encoding: 'utf8',
        maxBuffer: 1 << 30,
    });
    if (r.status !== 0) throw new Error(`psql failed (${r.status}): ${r.stderr}`);
    return r.stdout.split('\n').filter((l) => l !== '');
}

// COPY text format: a backslash is its escape character (JSON has no raw tabs or newlines).
function copyRows(objects) {
    return objects.map((o) => JSON.stringify(o).replace(/\\/g, '\\\\')).join('\n') + '\n\\.\n';
}

const DB = 'webhooks_diff';

function setup() {
    psql('postgres', `DROP DATABASE IF EXISTS ${DB};\nCREATE DATABASE ${DB};`);
    psql(DB, 'CREATE EXTENSION idempotency;');
}

// The extension's signatures for the cases it signs: one per (case, signing secret).
function extensionSign(cases) {
    const reqs = [];
    cases.forEach((c, k) => {
        if (c.signer !== 'ext') return;
        c.signWith.forEach((secret, i) =>
            reqs.push({ k, i, scheme: c.scheme, secret, id: c.signId, ts: c.signTs,
                        body: c.signBody.toString('base64') }));
    });
    if (reqs.length === 0) return;
    const sql = `CREATE TEMP TABLE r (j jsonb);\nCOPY r FROM STDIN;\n${copyRows(reqs)}` +
        `SELECT json_build_object('k', j->'k', 'i', j->'i', 'sig', CASE j->>'scheme'
           WHEN 'standard' THEN idempotency.idem_webhook_sign_standard(j->>'secret', j->>'id', j->>'ts',
                                                          decode(j->>'body', 'base64'))
           ELSE idempotency.idem_webhook_sign_stripe(j->>'secret', (j->>'ts')::bigint,
                                         decode(j->>'body', 'base64')) END)::text FROM r;\n`;
    for (const line of psql(DB, sql)) {
        const { k, i, sig } = JSON.parse(line);
        cases[k].signatures[i] = sig;
    }
}

// The extension's verdict on every case: true, false, or 'error <SQLSTATE>'.
function extensionVerify(cases) {
    const rows = cases.map((c, k) => ({
        k, scheme: c.scheme, secrets: c.secrets, id: c.id, ts: c.ts, header: c.header,
        body: c.body.toString('base64'), now: c.now,
    }));
    const sql = `CREATE TEMP TABLE v (j jsonb);\nCOPY v FROM STDIN;\n${copyRows(rows)}` +
        `CREATE FUNCTION pg_temp.verify(j jsonb) RETURNS text LANGUAGE plpgsql AS $$
         DECLARE
             secrets text[] := ARRAY(SELECT jsonb_array_elements_text(j->'secrets'));
             at timestamptz := to_timestamp((j->>'now')::bigint);
         BEGIN
             RETURN CASE j->>'scheme'
                 WHEN 'standard' THEN idempotency.idem_webhook_verify_standard(secrets, j->>'id', j->>'ts',
                     decode(j->>'body', 'base64'), j->>'header', interval '300 s', at)
                 ELSE idempotency.idem_webhook_verify_stripe(secrets, j->>'header',
                     decode(j->>'body', 'base64'), interval '300 s', at) END::text;
         EXCEPTION WHEN OTHERS THEN
             RETURN 'error ' || SQLSTATE;
         END $$;
         SELECT json_build_object('k', j->'k', 'v', pg_temp.verify(j))::text FROM v;\n`;
    for (const line of psql(DB, sql)) {
        const { k, v } = JSON.parse(line);
        cases[k].ext = v === 'true' ? true : v === 'false' ? false : v;
    }
}

// The planted fault of IDEM_WH_PLANT=1: a timestamp up to 60 s past the tolerance accepted.
function plantFault(cases) {
    for (const c of cases)
        if (c.tags.includes('stale') && c.ext === false && c.tags.includes('authentic'))
            c.ext = true;
}

function allowedFor(c, lib) {
    return ALLOWED.find((a) => a.libs.includes(lib) && a.scheme === c.scheme && a.when(c) &&
                               (a.ext === undefined || a.ext === c.ext) &&
                               (a.lib === undefined || a.lib === c.lib[lib]));
}

function main() {
    const seed = Number(process.env.IDEM_WH_SEED || 20261203);
    const n = Number(process.env.IDEM_WH_CASES || 4000);
    const cases = generate(seed, n, libs);
    setup();
    extensionSign(cases);
    for (const c of cases) c.finish(c); // the headers of extension-signed cases, then alterations
    for (const c of cases) c.lib = libs.verifyAll(c);
    extensionVerify(cases);
    if (process.env.IDEM_WH_PLANT === '1') plantFault(cases);

    const used = new Map(ALLOWED.map((a) => [a.name, 0]));
    const unlisted = [];
    let comparisons = 0, agreements = 0;
    for (const c of cases) {
        for (const [lib, verdict] of Object.entries(c.lib)) {
            comparisons++;
            if (verdict === c.ext) { agreements++; continue; }
            const a = allowedFor(c, lib);
            if (a) used.set(a.name, used.get(a.name) + 1);
            else unlisted.push({ lib, c });
        }
    }
    const byScheme = (s) => cases.filter((c) => c.scheme === s).length;
    const signedBy = (s) => cases.filter((c) => c.signer === s).length;
    console.log(`webhooks_diff: seed ${seed}, ${cases.length} cases (standard ${byScheme('standard')}, ` +
                `stripe ${byScheme('stripe')}; signed by a library ${signedBy('lib')}, ` +
                `by the extension ${signedBy('ext')}), ${comparisons} comparisons`);
    console.log(`  extension valid in ${cases.filter((c) => c.ext === true).length} cases, ` +
                `${agreements} agreements`);
    for (const [name, count] of used) console.log(`  allowed difference ${String(count).padStart(5)}  ${name}`);
    const cut = (s, n) => (s.length > n ? s.slice(0, n) + `… (${s.length})` : s);
    for (const { lib, c } of unlisted.slice(0, 20))
        console.log(`UNLISTED DISAGREEMENT: ${lib} says ${c.lib[lib]}, the extension ${c.ext}: ` +
                    JSON.stringify({ scheme: c.scheme, signer: c.signer, alteration: c.alteration,
                                     tags: c.tags, id: cut(c.id, 40), ts: c.ts,
                                     header: cut(c.header, 200), now: c.now, secrets: c.secrets,
                                     body_base64: cut(c.body.toString('base64'), 60) }));
    psql('postgres', `DROP DATABASE IF EXISTS ${DB};`);
    if (unlisted.length) {
        console.log(`webhooks_diff: FAILED, ${unlisted.length} unlisted disagreement(s)`);
        process.exit(1);
    }
    console.log('webhooks_diff: every disagreement is an allowed difference');
}

main();
