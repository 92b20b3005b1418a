#!/usr/bin/env bash
#: stage  hostile_big
#: about  the 100 MB variants of test/regress/sql/hostile.sql (about 30 s and 2 GB of server memory)
#: needs  server
#: runs   named
#: order  175
# The 100 MB variants of test/regress/sql/hostile.sql (which runs 10 MB): a 100 MB JSON document as raw text
# and as jsonb, a 100 MB stored response replayed whole, a 100 MB inbox payload, and
# statement_timeout cancelling a 100 MB canonicalisation. About 30 s and 2 GB of server memory;
# not a default stage. Needs the libpq environment of a running cluster (as a superuser: it raises
# the bounds idempotency.max_response_bytes and max_inbox_payload_bytes).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1 # the regress helper is read from test/regress/
export PGOPTIONS='-c client_min_messages=warning'
DB=idem_hostile_big
psql -qAtX -d postgres -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB" || exit 1
got=$(psql -qAtX -d $DB 2>&1 <<'SQL'
CREATE EXTENSION idempotency;
\i test/regress/helpers.sql
-- past the default bounds (16MB, docs/settings.md#bounds): raised for this session
SET idempotency.max_response_bytes = '200MB';
SET idempotency.max_inbox_payload_bytes = '200MB';
CREATE TEMP TABLE big AS SELECT '"' || repeat('a', 104857600) || '"' AS doc;
SELECT idempotency.idem_fingerprint(doc) = sha256(convert_to(doc, 'UTF8')) FROM big;
SELECT idempotency.idem_fingerprint(doc::jsonb) = sha256(convert_to(doc, 'UTF8')) FROM big;
SELECT length(idempotency.idem_canonical_json(doc::jsonb)) FROM big;
SELECT outcome FROM idempotency.idem_claim('big', 'k');
SELECT idempotency.idem_complete('big', 'k', 1, 'r', jsonb_build_object('blob', repeat('x', 104857600)), 200);
SELECT outcome || ' ' || length(response ->> 'blob') FROM idempotency.idem_claim('big', 'k');
SELECT idempotency.idem_inbox_receive('big', 'e', NULL, true, NULL, convert_to(repeat('p', 104857600), 'UTF8'));
SELECT length(payload) FROM idempotency.idem_inbox_next('big');
CREATE TEMP TABLE nums AS SELECT '[' || repeat('1234567.5,', 10485760) || '0]' AS doc;
SET statement_timeout = '200ms';
SELECT split_part(try($$SELECT idempotency.idem_fingerprint(doc) FROM nums$$), ':', 1);
RESET statement_timeout;
SELECT count(*) FROM idempotency.records;
SQL
)
want='t
t
104857602
claimed
t
replayed 104857600
new
104857600
57014
1'
psql -qAtX -d postgres -c "DROP DATABASE $DB"
if [ "$got" != "$want" ]; then
    echo "hostile_big: unexpected answers"; diff <(echo "$want") <(echo "$got"); exit 1
fi
echo "hostile_big: 100 MB payloads answered correctly; a 100 MB canonicalisation was cancelled (57014)"
