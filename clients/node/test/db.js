'use strict';
// The tests' database: the one the libpq environment names (PGHOST, PGPORT, PGUSER, PGDATABASE;
// clients/run-tests), which must have the extension. When it has not and the role may create a
// database, a database of the tests' own, clients_node_test, with the extension (as
// test/stages/examples.sh clients:node runs them, with PGDATABASE=postgres).
const pg = require('pg');

let chosen;
async function database() {
  chosen ??= (async () => {
    const probe = new pg.Client();
    await probe.connect();
    try {
      const { rows: [r] } = await probe.query(`SELECT current_database() AS db,
        EXISTS (SELECT FROM pg_extension WHERE extname = 'idempotency') AS ext,
        (SELECT rolcreatedb OR rolsuper FROM pg_roles WHERE rolname = current_user) AS may`);
      if (r.ext) return r.db;
      if (!r.may) throw new Error(`the database ${r.db} has no extension idempotency: point PGDATABASE at one that has`);
      const name = 'clients_node_test';
      const { rows: [has] } = await probe.query('SELECT count(*)::int AS n FROM pg_database WHERE datname = $1', [name]);
      if (!has.n) await probe.query(`CREATE DATABASE ${name}`);
      const c = new pg.Client({ database: name });
      await c.connect();
      await c.query('CREATE EXTENSION IF NOT EXISTS idempotency').finally(() => c.end());
      return name;
    } finally {
      await probe.end();
    }
  })();
  return chosen;
}

// A pool on the tests' database; idle connections lost (a test that ends a backend) are dropped.
async function pool(options = {}) {
  const p = new pg.Pool({ database: await database(), ...options });
  p.on('error', () => {});
  return p;
}

module.exports = { database, pool };
