// The official libraries, called as a receiver calls them: sign(...) and verifyAll(case).
// The clock is the case's: Date.now is replaced around each call (standardwebhooks and svix
// read it; stripe is given receivedAt). A library verifies with one secret: a receiver with
// several tries each, and the case is valid when one succeeds.
'use strict';
const sw = require('standardwebhooks');
const svix = require('svix');
const Stripe = require('stripe');

const stripe = new Stripe('sk_test_webhooks_diff'); // no request is made: webhooks only
const TOLERANCE = 300; // seconds: the libraries' default, passed to the extension too

function at(nowSeconds, fn) {
    const real = Date.now;
    Date.now = () => nowSeconds * 1000;
    try {
        return fn();
    } finally {
        Date.now = real;
    }
}

// One header entry for (secret, id, ts, body).
function signStandard(lib, secret, id, ts, body) {
    const W = lib === 'svix' ? svix.Webhook : sw.Webhook;
    return new W(secret).sign(id, new Date(Number(ts) * 1000), body);
}

// "v1=<hex>" of (secret, t, body).
function signStripe(secret, t, body) {
    const h = stripe.webhooks.generateTestHeaderString({ payload: body, secret, timestamp: Number(t) });
    return h.slice(h.indexOf(',') + 1);
}

// true / false, or 'error ...' for an exception classify does not know (undefined).
function verdict(fn, classify) {
    try {
        fn();
        return true;
    } catch (e) {
        const v = classify(e);
        return v === undefined ? `error ${e.constructor.name}: ${e.message}` : v;
    }
}

function anySecret(secrets, one) {
    let out = false;
    for (const s of secrets) {
        const v = one(s);
        if (v === true) return true;
        if (v !== false) out = v;
    }
    return out;
}

function verifyAll(c) {
    if (c.scheme === 'stripe') {
        const v = anySecret(c.secrets, (s) => verdict(
            () => stripe.webhooks.signature.verifyHeader(c.body, c.header, s, TOLERANCE, undefined,
                                                         c.now * 1000),
            (e) => (e.type === 'StripeSignatureVerificationError' ? false : undefined)));
        return { stripe: v };
    }
    const headers = { 'webhook-id': c.id, 'webhook-timestamp': c.ts, 'webhook-signature': c.header };
    return at(c.now, () => ({
        standardwebhooks: anySecret(c.secrets, (s) => verdict(
            () => new sw.Webhook(s).verify(c.body, headers, { jsonParse: false }),
            (e) => (e instanceof sw.WebhookVerificationError ? false : undefined))),
        // svix parses the body as JSON once a signature matched: a SyntaxError is a match
        svix: anySecret(c.secrets, (s) => verdict(
            () => new svix.Webhook(s).verify(c.body, headers),
            (e) => (e instanceof svix.WebhookVerificationError ? false
                    : e instanceof SyntaxError ? true : undefined))),
    }));
}

module.exports = { signStandard, signStripe, verifyAll, TOLERANCE };
