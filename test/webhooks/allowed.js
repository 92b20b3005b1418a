// Where the extension and an official library may disagree (test/webhooks/diff.js): each
// entry names the scheme, the libraries, the cases (by their tags, cases.js), the two
// verdicts (ext: the extension, lib: the library; undefined: either) and why. The same list
// is in docs/webhooks.md, "Differences from the official libraries"; keep the two alike.
'use strict';
const has = (tag) => (c) => c.tags.includes(tag);
const STD = ['standardwebhooks', 'svix'];

const ALLOWED = [
    {
        name: 'standard: webhook-timestamp not plain digits ("0…", "+…", "…x")',
        scheme: 'standard', libs: STD, when: has('ts_noncanonical'), ext: false, lib: true,
        why: 'The libraries read the timestamp with parseInt and sign the number printed anew; ' +
             'the extension signs the header as received and takes only 1 to 18 digits. Another ' +
             'spelling of a signed timestamp, not a forgery.',
    },
    {
        name: 'standard: webhook-signature with CR LF at its end',
        scheme: 'standard', libs: STD, when: has('header_trailing_ws'), ext: true, lib: false,
        why: 'HTTP whitespace at the ends is not part of a field value (RFC 9110, 5.5); the ' +
             'libraries compare the last entry with the CR LF. The header is not signed.',
    },
    {
        name: 'standard: webhook-signature with an entry without a comma',
        scheme: 'standard', libs: STD, when: has('garbage_entry'), ext: false, lib: true,
        why: 'The extension refuses a malformed header; the libraries skip the entry.',
    },
    {
        name: 'standard: webhook-id longer than 1024 bytes',
        scheme: 'standard', libs: STD, when: has('id_long'), ext: false, lib: true,
        why: 'The id is the inbox\'s dedup key, at most 1024 bytes; verify refuses what receive ' +
             'could not record (test/regress/sql/webhooks_agree.sql).',
    },
    {
        name: 'standard (svix): a body that is not UTF-8',
        scheme: 'standard', libs: ['svix'], when: has('non_utf8_body'), ext: undefined, lib: undefined,
        why: 'svix 1.76 turns a Buffer body into a string (invalid bytes become U+FFFD) before ' +
             'signing and verifying: it signs other bytes than were sent. standardwebhooks and ' +
             'the extension sign the bytes.',
    },
    {
        name: 'stripe: t= not plain digits ("t=0…", "t=+…")',
        scheme: 'stripe', libs: ['stripe'], when: has('ts_noncanonical'), ext: false, lib: true,
        why: 'stripe reads t with parseInt and signs the number printed anew; the extension ' +
             'signs t as received. Another spelling of a signed timestamp, not a forgery.',
    },
    {
        name: 'stripe: spaces after the commas',
        scheme: 'stripe', libs: ['stripe'], when: has('item_space'), ext: true, lib: false,
        why: 'The extension reads items without surrounding HTTP whitespace; stripe takes " v1" ' +
             'for another scheme. The header is not signed.',
    },
    {
        name: 'stripe: Stripe-Signature with CR LF at its end',
        scheme: 'stripe', libs: ['stripe'], when: has('header_trailing_ws'), ext: true, lib: false,
        why: 'As for Standard Webhooks: stripe compares the last v1 value with the CR LF.',
    },
    {
        name: 'stripe: v1 in upper-case hex',
        scheme: 'stripe', libs: ['stripe'], when: has('upper_hex'), ext: true, lib: false,
        why: 'The extension compares the decoded 32 bytes; stripe compares the hex text. The ' +
             'same MAC, not a forgery.',
    },
    {
        name: 'stripe: an item without "="',
        scheme: 'stripe', libs: ['stripe'], when: has('junk_item'), ext: false, lib: true,
        why: 'The extension refuses a malformed header; stripe skips the item.',
    },
    {
        name: 'stripe: two t= items',
        scheme: 'stripe', libs: ['stripe'], when: has('t_twice'), ext: false, lib: true,
        why: 'Which timestamp was signed is ambiguous: the extension refuses, stripe takes the ' +
             'last.',
    },
    {
        name: 'stripe: t more than the tolerance in the future',
        scheme: 'stripe', libs: ['stripe'], when: has('future'), ext: false, lib: true,
        why: 'stripe checks only the age; the extension applies the tolerance in both ' +
             'directions, as the Standard Webhooks libraries do.',
    },
    {
        name: 'stripe: a body that is not UTF-8',
        scheme: 'stripe', libs: ['stripe'], when: has('non_utf8_body'), ext: undefined, lib: undefined,
        why: 'stripe decodes a Buffer body as UTF-8 (invalid bytes become U+FFFD) before ' +
             'signing and verifying; the extension signs the bytes. Stripe\'s events are JSON ' +
             '(UTF-8).',
    },
];

module.exports = { ALLOWED };
