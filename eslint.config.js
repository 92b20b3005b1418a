'use strict';
// The JavaScript lint of the lint stage (test/lint): eslint's recommended rules over every tracked
// .js and .mjs file (the Node package clients/node, its example examples/node, the webhook
// comparison test/webhooks), Node's globals, the language of Node 20. eslint, @eslint/js and
// globals come from clients/node's lock file (clients/node/setup).
const js = require('@eslint/js');
const globals = require('globals');

module.exports = [
  js.configs.recommended,
  {
    files: ['**/*.js'],
    languageOptions: { ecmaVersion: 2023, sourceType: 'commonjs', globals: { ...globals.node } },
  },
  {
    files: ['**/*.mjs'],
    languageOptions: { ecmaVersion: 2023, sourceType: 'module', globals: { ...globals.node } },
  },
  {
    rules: {
      // an unused catch binding or argument named _ is deliberate
      'no-unused-vars': ['error', { argsIgnorePattern: '^_', caughtErrors: 'none' }],
    },
  },
];
