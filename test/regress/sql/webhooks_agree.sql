-- Verify and receive agree on every degenerate sender input: each case runs
-- idem_webhook_verify_* (boolean) and idempotency.idem_webhook_receive (outcome) on the same input, both
-- schemes, and checks that receive records the event exactly when verify is true (stripe: and
-- the event id, which verify does not see, is 1 to 1024 bytes), and that an error of the
-- receiver's own configuration is the same error in both.
\set VERBOSITY default
SET client_min_messages = warning;
\set std '''whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'''
\set str '''whsec_7Kq2mX9pL4vR8sT1wZ6yB3nC5dF0gH2j'''
CREATE FUNCTION ss(id text, ts text DEFAULT '1614265330', body bytea DEFAULT '\x7b7d')
RETURNS text LANGUAGE sql AS $$ SELECT idempotency.idem_webhook_sign_standard('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', id, ts, body) $$;
CREATE FUNCTION st(body bytea DEFAULT '\x7b7d', t bigint DEFAULT 1700000000)
RETURNS text LANGUAGE sql AS $$ SELECT idempotency.idem_webhook_sign_stripe('whsec_7Kq2mX9pL4vR8sT1wZ6yB3nC5dF0gH2j', t, body) $$;

-- One case: verify's answer, receive's outcome (into consumer 'agree-N'), and whether receive
-- wrote a row. Errors as 'ERROR <SQLSTATE>'.
CREATE FUNCTION agree(n int, scheme text, secrets text[], id text, ts text, body bytea,
                      header text, at timestamptz, tol interval DEFAULT NULL,
                      OUT verified text, OUT outcome text, OUT recorded boolean)
LANGUAGE plpgsql AS $$
BEGIN
    BEGIN
        verified := CASE scheme
            WHEN 'standard' THEN idempotency.idem_webhook_verify_standard(secrets, id, ts, body, header,
                                                              tolerance => tol, now => at)
            ELSE idempotency.idem_webhook_verify_stripe(secrets, header, body, tolerance => tol, now => at)
        END::text;
    EXCEPTION WHEN OTHERS THEN
        verified := 'ERROR ' || SQLSTATE;
    END;
    BEGIN
        outcome := idempotency.idem_webhook_receive('agree-' || n, scheme, secrets, id, body, header,
                                        CASE scheme WHEN 'standard' THEN ts END,
                                        tolerance => tol, now => at);
    EXCEPTION WHEN OTHERS THEN
        outcome := 'ERROR ' || SQLSTATE;
    END;
    recorded := EXISTS (SELECT FROM idempotency.inbox i
                        WHERE i.consumer = 'agree-' || n);
END $$;

CREATE TABLE cases (n int PRIMARY KEY, scheme text, input text, secrets text[], id text,
                    ts text, body bytea, header text, at timestamptz, tol interval);
\set t0 'to_timestamp(1614265330)'
\set s0 'to_timestamp(1700000000)'
INSERT INTO cases (n, scheme, input, secrets, id, ts, body, header, at) VALUES
    (1, 'standard', 'valid', ARRAY[:std], 'm1', '1614265330', '{}', ss('m1'), :t0),
    (2, 'standard', 'id NULL, signed over "m2"', ARRAY[:std], NULL, '1614265330', '{}', ss('m2'), :t0),
    (3, 'standard', 'id empty, signed', ARRAY[:std], '', '1614265330', '{}', ss(''), :t0),
    (4, 'standard', 'id empty, not signed', ARRAY[:std], '', '1614265330', '{}', 'v1,' || repeat('A', 43) || '=', :t0),
    (5, 'standard', 'id blank, signed', ARRAY[:std], ' ', '1614265330', '{}', ss(' '), :t0),
    (6, 'standard', 'id CR LF, signed', ARRAY[:std], E'\r\n', '1614265330', '{}', ss(E'\r\n'), :t0),
    (7, 'standard', 'id + CR LF, signed without', ARRAY[:std], E'm7\r\n', '1614265330', '{}', ss('m7'), :t0),
    (8, 'standard', 'id + CR LF, signed with', ARRAY[:std], E'm8\r\n', '1614265330', '{}', ss(E'm8\r\n'), :t0),
    (9, 'standard', 'id 1024 bytes, signed', ARRAY[:std], repeat('i', 1024), '1614265330', '{}', ss(repeat('i', 1024)), :t0),
    (10, 'standard', 'id 1025 bytes, signed', ARRAY[:std], repeat('i', 1025), '1614265330', '{}', ss(repeat('i', 1025)), :t0),
    (11, 'standard', 'id 1 MB, signed', ARRAY[:std], repeat('i', 1048576), '1614265330', '{}', ss(repeat('i', 1048576)), :t0),
    (12, 'standard', 'timestamp NULL', ARRAY[:std], 'm12', NULL, '{}', ss('m12'), :t0),
    (13, 'standard', 'timestamp empty', ARRAY[:std], 'm13', '', '{}', ss('m13'), :t0),
    (14, 'standard', 'timestamp blank', ARRAY[:std], 'm14', ' ', '{}', ss('m14'), :t0),
    (15, 'standard', 'timestamp + CR LF, signed without', ARRAY[:std], 'm15', E'1614265330\r\n', '{}', ss('m15'), :t0),
    (16, 'standard', 'timestamp +1614265330', ARRAY[:std], 'm16', '+1614265330', '{}', ss('m16'), :t0),
    (17, 'standard', 'timestamp 19 digits', ARRAY[:std], 'm17', repeat('1', 19), '{}', ss('m17'), :t0),
    (18, 'standard', 'timestamp 300 s old, signed', ARRAY[:std], 'm18', '1614265030', '{}', ss('m18', '1614265030'), :t0),
    (19, 'standard', 'timestamp 301 s old, signed', ARRAY[:std], 'm19', '1614265029', '{}', ss('m19', '1614265029'), :t0),
    (20, 'standard', 'timestamp 300 s ahead, signed', ARRAY[:std], 'm20', '1614265630', '{}', ss('m20', '1614265630'), :t0),
    (21, 'standard', 'timestamp 301 s ahead, signed', ARRAY[:std], 'm21', '1614265631', '{}', ss('m21', '1614265631'), :t0),
    (22, 'standard', 'timestamp 0, signed', ARRAY[:std], 'm22', '0', '{}', ss('m22', '0'), :t0),
    (23, 'standard', 'header NULL', ARRAY[:std], 'm23', '1614265330', '{}', NULL, :t0),
    (24, 'standard', 'header empty', ARRAY[:std], 'm24', '1614265330', '{}', '', :t0),
    (25, 'standard', 'header blank', ARRAY[:std], 'm25', '1614265330', '{}', '   ', :t0),
    (26, 'standard', 'header CR LF', ARRAY[:std], 'm26', '1614265330', '{}', E'\r\n', :t0),
    (27, 'standard', 'header + CR LF', ARRAY[:std], 'm27', '1614265330', '{}', ss('m27') || E'\r\n', :t0),
    (28, 'standard', 'header v1a only', ARRAY[:std], 'm28', '1614265330', '{}', replace(ss('m28'), 'v1,', 'v1a,'), :t0),
    (29, 'standard', 'header + entry without comma', ARRAY[:std], 'm29', '1614265330', '{}', ss('m29') || ' x', :t0),
    (30, 'standard', 'header 16384 bytes, signed', ARRAY[:std], 'm30', '1614265330', '{}', rpad(ss('m30'), 16384), :t0),
    (31, 'standard', 'header 16385 bytes, signed', ARRAY[:std], 'm31', '1614265330', '{}', rpad(ss('m31'), 16385), :t0),
    (32, 'standard', 'body NULL', ARRAY[:std], 'm32', '1614265330', NULL, ss('m32'), :t0),
    (33, 'standard', 'body empty, signed', ARRAY[:std], 'm33', '1614265330', '', ss('m33', body => ''), :t0),
    (34, 'standard', 'body binary (not UTF-8), signed', ARRAY[:std], 'm34', '1614265330', '\x00ff80fe0d0a', ss('m34', body => '\x00ff80fe0d0a'), :t0),
    (35, 'standard', 'body 1 MB, signed', ARRAY[:std], 'm35', '1614265330', convert_to(repeat('b', 1048576), 'UTF8'), ss('m35', body => convert_to(repeat('b', 1048576), 'UTF8')), :t0),
    (36, 'standard', 'body changed', ARRAY[:std], 'm36', '1614265330', '{ }', ss('m36'), :t0),
    (37, 'standard', 'second of two secrets', ARRAY['whsec_' || encode(repeat('n', 32)::bytea, 'base64'), :std], 'm37', '1614265330', '{}', ss('m37'), :t0),
    (38, 'standard', 'receiver: no secrets', '{}', 'm38', '1614265330', '{}', ss('m38'), :t0),
    (39, 'standard', 'receiver: secret NULL', ARRAY[NULL, :std], 'm39', '1614265330', '{}', ss('m39'), :t0),
    (40, 'standard', 'receiver: secret of 23 bytes', ARRAY['whsec_' || encode(repeat('k', 23)::bytea, 'base64')], '', NULL, NULL, NULL, :t0),
    (41, 'standard', 'receiver: 17 secrets', array_fill(:std::text, ARRAY[17]), 'm41', '1614265330', '{}', ss('m41'), :t0),
    (42, 'standard', 'receiver: secrets NULL', NULL, 'm42', '1614265330', '{}', ss('m42'), :t0),
    (51, 'stripe', 'valid', ARRAY[:str], 'e51', NULL, '{}', st(), :s0),
    (52, 'stripe', 'event id NULL, signed', ARRAY[:str], NULL, NULL, '{}', st(), :s0),
    (53, 'stripe', 'event id empty, signed', ARRAY[:str], '', NULL, '{}', st(), :s0),
    (54, 'stripe', 'event id empty, not signed', ARRAY[:str], '', NULL, '{}', 't=1700000000,v1=' || repeat('0', 64), :s0),
    (55, 'stripe', 'event id blank, signed', ARRAY[:str], ' ', NULL, '{}', st(), :s0),
    (56, 'stripe', 'event id CR LF, signed', ARRAY[:str], E'\r\n', NULL, '{}', st(), :s0),
    (57, 'stripe', 'event id 1025 bytes, signed', ARRAY[:str], repeat('e', 1025), NULL, '{}', st(), :s0),
    (58, 'stripe', 'event id 1 MB, not signed', ARRAY[:str], repeat('e', 1048576), NULL, '{}', 't=1700000000,v1=' || repeat('0', 64), :s0),
    (59, 'stripe', 'header NULL', ARRAY[:str], 'e59', NULL, '{}', NULL, :s0),
    (60, 'stripe', 'header empty', ARRAY[:str], 'e60', NULL, '{}', '', :s0),
    (61, 'stripe', 'header blank', ARRAY[:str], 'e61', NULL, '{}', '  ', :s0),
    (62, 'stripe', 'header CR LF', ARRAY[:str], 'e62', NULL, '{}', E'\r\n', :s0),
    (63, 'stripe', 'header + CR LF', ARRAY[:str], 'e63', NULL, '{}', st() || E'\r\n', :s0),
    (64, 'stripe', 'header t=1 (no signature)', ARRAY[:str], 'e64', NULL, '{}', 't=1', :s0),
    (65, 'stripe', 'header t only, fresh', ARRAY[:str], 'e65', NULL, '{}', 't=1700000000', :s0),
    (66, 'stripe', 'header v1 only', ARRAY[:str], 'e66', NULL, '{}', split_part(st(), ',', 2), :s0),
    (67, 'stripe', 'header t twice', ARRAY[:str], 'e67', NULL, '{}', 't=1700000000,' || st(), :s0),
    (68, 'stripe', 'header t empty', ARRAY[:str], 'e68', NULL, '{}', replace(st(), 't=1700000000', 't='), :s0),
    (69, 'stripe', 'header t CR LF, signed', ARRAY[:str], 'e69', NULL, '{}', replace(st(), ',', E'\r\n,'), :s0),
    (70, 'stripe', 'header 16385 bytes, signed', ARRAY[:str], 'e70', NULL, '{}', rpad(st(), 16385), :s0),
    (71, 'stripe', 't 300 s old, signed', ARRAY[:str], 'e71', NULL, '{}', st(t => 1699999700), :s0),
    (72, 'stripe', 't 301 s old, signed', ARRAY[:str], 'e72', NULL, '{}', st(t => 1699999699), :s0),
    (73, 'stripe', 't 301 s ahead, signed', ARRAY[:str], 'e73', NULL, '{}', st(t => 1700000301), :s0),
    (74, 'stripe', 'body NULL', ARRAY[:str], 'e74', NULL, NULL, st(), :s0),
    (75, 'stripe', 'body empty, signed', ARRAY[:str], 'e75', NULL, '', st(''), :s0),
    (76, 'stripe', 'body binary (not UTF-8), signed', ARRAY[:str], 'e76', NULL, '\x00ff80fe', st('\x00ff80fe'), :s0),
    (77, 'stripe', 'body 1 MB, signed', ARRAY[:str], 'e77', NULL, convert_to(repeat('b', 1048576), 'UTF8'), st(convert_to(repeat('b', 1048576), 'UTF8')), :s0),
    (78, 'stripe', 'body changed', ARRAY[:str], 'e78', NULL, '{ }', st(), :s0),
    (79, 'stripe', 'receiver: secret of 31 bytes', ARRAY[repeat('k', 31)], 'e79', NULL, NULL, NULL, :s0),
    (80, 'stripe', 'receiver: no secrets', '{}', NULL, NULL, NULL, NULL, :s0);
INSERT INTO cases (n, scheme, input, secrets, id, ts, body, header, at, tol) VALUES
    (43, 'standard', 'tolerance 0, signed now', ARRAY[:std], 'm43', '1614265330', '{}', ss('m43'), :t0, '0'),
    (44, 'standard', 'receiver: tolerance negative', ARRAY[:std], NULL, NULL, NULL, NULL, :t0, '-1 s'),
    (81, 'stripe', 'receiver: tolerance negative', ARRAY[:str], 'e81', NULL, '{}', 'garbage', :s0, '-1 s');

CREATE TABLE results AS
SELECT c.n, c.scheme, c.input, a.verified, a.outcome, a.recorded,
       CASE WHEN a.verified LIKE 'ERROR%' THEN a.outcome = a.verified AND NOT a.recorded
            ELSE a.recorded = (a.verified = 'true' AND (c.scheme = 'standard' OR
                               coalesce(octet_length(c.id) BETWEEN 1 AND 1024, false)))
       END AS agree
FROM cases c, LATERAL agree(c.n, c.scheme, c.secrets, c.id, c.ts, c.body, c.header, c.at,
                            c.tol) a;
SELECT n, scheme, input, verified, outcome, recorded, agree FROM results ORDER BY n;
-- none disagrees; an empty webhook-id verifies false
SELECT count(*) AS cases, count(*) FILTER (WHERE agree IS NOT TRUE) AS disagreements FROM results;
SELECT verified AS empty_webhook_id_verifies FROM results WHERE n = 3;
