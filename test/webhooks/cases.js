// The generated cases of the webhooks_diff stage (test/webhooks/diff.js): a seeded PRNG picks
// the scheme, the receiver's secrets (1 to 3, with or without whsec_), the signer (a library
// or the extension) and its secrets (the receiver's, a foreign one, or both: several
// signatures in one header), the id, the body (JSON, non-ASCII, control characters, empty,
// large, binary), the timestamp (inside the tolerance, at it, one second past it, far off, in
// both directions) and one alteration made after signing. Each case carries tags, which the
// allow-list (allowed.js) matches.
'use strict';

const TOLERANCE = 300;

function prng(seed) {
    let a = seed >>> 0;
    const next = () => { // mulberry32
        a = (a + 0x6d2b79f5) >>> 0;
        let t = a;
        t = Math.imul(t ^ (t >>> 15), t | 1);
        t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
        return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
    const int = (lo, hi) => lo + Math.floor(next() * (hi - lo + 1));
    const pick = (xs) => xs[int(0, xs.length - 1)];
    const bytes = (n) => Buffer.from(Array.from({ length: n }, () => int(0, 255)));
    const alnum = (n) => Array.from({ length: n }, () =>
        pick('ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789')).join('');
    return { next, int, pick, bytes, alnum };
}

const isUtf8 = (buf) => Buffer.from(buf.toString('utf8'), 'utf8').equals(buf);

function body(r) {
    const kind = r.pick(['json', 'json', 'unicode', 'control', 'empty', 'large', 'binary']);
    const text = {
        json: () => JSON.stringify({ id: 'evt_' + r.alnum(12), amount: r.int(0, 1e9), ok: r.next() < 0.5 }),
        unicode: () => `{"name":"Zoë ✓ 日本語 😀 \u2028","note":"${r.alnum(8)}"}`,
        control: () => `{"a":1}\r\n\t${r.alnum(5)}\u0000\u0001\u007f end\n`,
        empty: () => '',
        large: () => JSON.stringify({ blob: r.alnum(65536) }),
    }[kind];
    return kind === 'binary' ? r.bytes(r.int(1, 200)) : Buffer.from(text(), 'utf8');
}

function standardSecret(r) {
    const b64 = r.bytes(r.int(24, 64)).toString('base64');
    return r.next() < 0.7 ? 'whsec_' + b64 : b64;
}

// The same key written the other way (with or without whsec_).
const otherForm = (s) => (s.startsWith('whsec_') ? s.slice(6) : 'whsec_' + s);

function stripeSecret(r) {
    return (r.next() < 0.8 ? 'whsec_' : '') + r.alnum(r.int(32, 64));
}

// The timestamp relative to now, with its tags.
function timestamp(r, now) {
    const off = r.pick([0, 0, 0, -1, 1, -TOLERANCE, TOLERANCE, -TOLERANCE - 1, TOLERANCE + 1,
                        r.int(-TOLERANCE, TOLERANCE), -3600, 3600, -now]);
    const tags = [];
    if (Math.abs(off) > TOLERANCE) tags.push('stale');
    if (off > TOLERANCE) tags.push('future');
    return { ts: String(now + off), tags };
}

const swapCase = (ch) => (ch === ch.toUpperCase() ? ch.toLowerCase() : ch.toUpperCase());

// Alterations after signing: name → [tags, function(case)]. 'tampered' marks a case whose
// signed content no longer matches.
const STANDARD_ALTER = {
    none: [[], () => {}],
    tamper_body: [['tampered'], (c) => { c.body = Buffer.concat([c.body, Buffer.from('x')]); }],
    tamper_id: [['tampered'], (c) => { c.id += '1'; }],
    tamper_ts: [['tampered'], (c) => { c.ts = String(Number(c.ts) + 1); }],
    tamper_sig: [['tampered'], (c) => { c.header = c.header.replace(/v1,(.)/, (m, ch) => 'v1,' + (ch === 'A' ? 'B' : 'A')); }],
    ts_leading_zero: [['ts_noncanonical'], (c) => { c.ts = '0' + c.ts; }],
    ts_plus: [['ts_noncanonical'], (c) => { c.ts = '+' + c.ts; }],
    ts_trailing_junk: [['ts_noncanonical'], (c) => { c.ts += 'x'; }],
    ts_whitespace: [[], (c) => { c.ts = ' ' + c.ts + '\r\n'; }],
    header_crlf: [['header_trailing_ws'], (c) => { c.header += '\r\n'; }],
    header_leading_space: [[], (c) => { c.header = ' ' + c.header; }],
    header_double_space: [[], (c) => { c.header = c.header.split(' ').join('  '); }],
    header_other_version: [[], (c) => { c.header = 'v1a,' + 'A'.repeat(86) + '== ' + c.header; }],
    header_garbage: [['garbage_entry'], (c) => { c.header += ' garbage'; }],
    header_truncated: [['tampered'], (c) => { c.header = c.header.slice(0, -2); }],
    b64_noncanonical: [['tampered'], (c) => { // the last base64 digit's unused bits set
        c.header = c.header.replace(/(.)=(?= |$)/, (m, ch) => {
            const A = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
            return A[A.indexOf(ch) ^ 1] + '=';
        });
    }],
    b64_case: [['tampered'], (c) => { c.header = c.header.replace(/v1,(.)/, (m, ch) => 'v1,' + swapCase(ch)); }],
};

const STRIPE_ALTER = {
    none: [[], () => {}],
    tamper_body: [['tampered'], (c) => { c.body = Buffer.concat([c.body, Buffer.from('x')]); }],
    tamper_t: [['tampered'], (c) => { c.header = c.header.replace(/t=(\d+)/, (m, t) => 't=' + (Number(t) + 1)); }],
    tamper_sig: [['tampered'], (c) => { c.header = c.header.replace(/v1=(.)/, (m, ch) => 'v1=' + (ch === 'a' ? 'b' : 'a')); }],
    t_leading_zero: [['ts_noncanonical'], (c) => { c.header = c.header.replace('t=', 't=0'); }],
    t_plus: [['ts_noncanonical'], (c) => { c.header = c.header.replace('t=', 't=+'); }],
    item_space: [['item_space'], (c) => { c.header = c.header.split(',').join(', '); }],
    header_crlf: [['header_trailing_ws'], (c) => { c.header += '\r\n'; }],
    upper_hex: [['upper_hex'], (c) => { c.header = c.header.replace(/v1=([0-9a-f]+)/g, (m, h) => 'v1=' + h.toUpperCase()); }],
    junk_item: [['junk_item'], (c) => { c.header += ',junk'; }],
    v0_item: [[], (c) => { c.header += ',v0=' + 'ab'.repeat(32); }],
    order_swap: [[], (c) => { const [t, ...v] = c.header.split(','); c.header = [...v, t].join(','); }],
    t_twice: [['t_twice'], (c) => { c.header = 't=' + (Number(c.signTs) + 1000) + ',' + c.header; }],
    no_t: [['tampered'], (c) => { c.header = c.header.split(',').filter((i) => !i.startsWith('t=')).join(','); }],
    header_truncated: [['tampered'], (c) => { c.header = c.header.slice(0, -2); }],
};

function generate(seed, n, libs) {
    const r = prng(seed);
    const cases = [];
    for (let k = 0; k < n; k++) {
        const scheme = r.next() < 0.55 ? 'standard' : 'stripe';
        const mkSecret = scheme === 'standard' ? standardSecret : stripeSecret;
        const secrets = Array.from({ length: r.int(1, 3) }, () => mkSecret(r));
        const foreign = mkSecret(r);
        const signers = r.pick(['own', 'own', 'own', 'foreign', 'both']);
        let signWith = signers === 'foreign' ? [foreign]
            : signers === 'both' ? [foreign, r.pick(secrets)] : [r.pick(secrets)];
        if (scheme === 'standard' && r.next() < 0.3) signWith = signWith.map(otherForm);
        const now = 1700000000 + r.int(0, 1e8);
        const { ts, tags } = timestamp(r, now);
        const idKind = scheme === 'standard' ? r.pick(['plain', 'plain', 'unicode', 'blank', 'empty', 'long']) : 'plain';
        const id = { plain: 'msg_' + r.alnum(r.int(5, 30)), unicode: 'msg_é✓_' + r.alnum(4), blank: ' ',
                     empty: '', long: 'm'.repeat(1025) }[idKind];
        const b = body(r);
        const alters = scheme === 'standard' ? STANDARD_ALTER : STRIPE_ALTER;
        const alterName = r.next() < 0.3 ? 'none' : r.pick(Object.keys(alters));
        const [alterTags, alter] = alters[alterName];
        const c = {
            scheme, secrets, signer: r.next() < 0.5 ? 'lib' : 'ext',
            signLib: r.pick(['standardwebhooks', 'svix']), signWith, signId: id, signTs: ts,
            signBody: b, signatures: [], now, alteration: alterName,
            tags: [...tags, ...alterTags, 'id_' + idKind, 'signers_' + signers],
        };
        if (!isUtf8(b)) c.tags.push('non_utf8_body');
        if (b.length === 0) c.tags.push('empty_body');
        if (signers !== 'foreign' && !alterTags.includes('tampered')) c.tags.push('authentic');
        if (c.signer === 'lib')
            c.signatures = signWith.map((s) => (scheme === 'standard'
                ? libs.signStandard(c.signLib, s, id, ts, b)
                : 't=' + ts + ',' + libs.signStripe(s, ts, b)));
        c.finish = (cc) => {
            cc.id = cc.signId;
            cc.ts = cc.signTs;
            cc.body = cc.signBody;
            cc.header = cc.scheme === 'standard' ? cc.signatures.join(' ')
                : 't=' + cc.signTs + ',' + cc.signatures.map((h) => h.slice(h.indexOf(',') + 1)).join(',');
            alter(cc);
        };
        cases.push(c);
    }
    return cases;
}

module.exports = { generate, TOLERANCE };
