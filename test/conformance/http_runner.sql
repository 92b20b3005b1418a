-- The SQL runner of test/conformance/http.json (docs/records.md "The HTTP contract"): each case
-- through idem_http_begin / idem_http_end / idem_http_release / idem_http_errors as a client
-- package calls them, a block standing for the request's transaction (its rollback for the
-- package's ROLLBACK). Loaded by test/regress/sql/http_contract.sql; the client packages' runners read the
-- same file (clients/run-tests).

-- One request: the answer sent, whether the handler ran, and whether the attempt was reclaimed.
CREATE FUNCTION http_request(req jsonb, handler jsonb, mode text, tag text, hold interval,
    OUT ran boolean, OUT reclaimed boolean, OUT status integer, OUT headers jsonb, OUT body bytea)
LANGUAGE plpgsql AS $$
DECLARE
    b idempotency.idem_http_begin_result;
    op text := (req ->> 'operation') || ' #' || tag;
    shared boolean := coalesce((req ->> 'shared_key_space')::boolean, false);
    raw bytea := CASE WHEN req ? 'body_hex' THEN decode(req ->> 'body_hex', 'hex')
                      ELSE convert_to(req ->> 'body', 'UTF8') END;
    state text;
    e record;
BEGIN
    ran := false;
    reclaimed := false;
    IF hold IS NOT NULL OR mode = 'two-phase' THEN -- the claim commits on its own
        b := idempotency.idem_http_begin(req ->> 'principal', op, req ->> 'key', raw,
                                         lease => coalesce(hold, '30 seconds'),
                                         shared_key_space => shared);
        IF hold IS NOT NULL THEN
            RETURN;
        END IF;
    END IF;
    BEGIN
        IF mode = 'single' THEN
            b := idempotency.idem_http_begin(req ->> 'principal', op, req ->> 'key', raw,
                                             shared_key_space => shared);
        END IF;
        IF NOT b.run THEN
            status := b.status; headers := b.headers; body := b.body;
            RETURN;
        END IF;
        ran := true;
        reclaimed := b.reclaimed;
        IF handler ? 'raise' THEN
            RAISE EXCEPTION USING ERRCODE = CASE handler ->> 'raise' WHEN 'exception' THEN 'HX001'
                                                 ELSE handler ->> 'raise' END;
        END IF;
        status := (handler ->> 'status')::integer;
        headers := handler -> 'headers';
        body := convert_to(handler ->> 'body', 'UTF8');
        IF NOT idempotency.idem_http_end(b.scope, b.key, b.attempt, status, headers, body) THEN
            RAISE EXCEPTION USING ERRCODE = 'HX000'; -- the package's ROLLBACK
        END IF;
    EXCEPTION WHEN OTHERS THEN
        state := CASE SQLSTATE WHEN 'HX001' THEN NULL ELSE SQLSTATE END;
        PERFORM idempotency.idem_http_release(b.scope, b.key, b.attempt);
        IF state = 'HX000' THEN
            RETURN; -- the handler's own answer, not stored
        END IF;
        SELECT * INTO e FROM idempotency.idem_http_errors() m
        WHERE m.sqlstate = state OR m.sqlstate = left(state, 2) OR m.sqlstate IS NULL
        ORDER BY length(m.sqlstate) DESC NULLS LAST LIMIT 1;
        IF e.sqlstate = 'IK003' THEN -- another attempt finished: its answer
            SELECT * INTO e FROM idempotency.idem_http_answer(b.scope, b.key);
            IF e.status IS NULL THEN
                SELECT * INTO e FROM idempotency.idem_http_errors() m WHERE m.sqlstate = 'IK002';
            END IF;
        END IF;
        status := e.status; headers := e.headers; body := e.body;
    END;
END
$$;

-- What differs between a case's expectation and what happened ('' when nothing).
CREATE FUNCTION http_check(c jsonb, r record, tag text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    x jsonb := c -> 'expect';
    req jsonb := c -> 'request';
    s jsonb := c -> 'stored';
    problems text[] := '{}';
    h record;
    got text;
    doc jsonb;
    l record;
BEGIN
    IF (x ->> 'ran')::boolean IS DISTINCT FROM r.ran THEN
        problems := problems || format('ran %s', r.ran);
    END IF;
    IF x ? 'reclaimed' AND (x ->> 'reclaimed')::boolean IS DISTINCT FROM r.reclaimed THEN
        problems := problems || format('reclaimed %s', r.reclaimed);
    END IF;
    IF (x ->> 'status')::integer IS DISTINCT FROM r.status THEN
        problems := problems || format('status %s', r.status);
    END IF;
    FOR h IN SELECT * FROM jsonb_each_text(coalesce(x -> 'headers', '{}')) LOOP
        SELECT v INTO got FROM jsonb_each_text(r.headers) AS g(k, v) WHERE lower(k) = lower(h.key);
        IF got IS NULL OR (h.value <> '*' AND got <> h.value) THEN
            problems := problems || format('header %s: %s', h.key, coalesce(got, 'absent'));
        END IF;
    END LOOP;
    FOR h IN SELECT value FROM jsonb_array_elements_text(coalesce(x -> 'absent', '[]')) LOOP
        IF EXISTS (SELECT FROM jsonb_each_text(r.headers) AS g(k, v) WHERE lower(k) = lower(h.value)) THEN
            problems := problems || format('header %s present', h.value);
        END IF;
    END LOOP;
    IF x ? 'body' AND convert_from(r.body, 'UTF8') IS DISTINCT FROM x ->> 'body' THEN
        problems := problems || format('body %s', convert_from(r.body, 'UTF8'));
    END IF;
    IF x ? 'problem' THEN
        doc := convert_from(r.body, 'UTF8')::jsonb;
        IF doc ->> 'type' IS DISTINCT FROM 'about:blank' OR (doc ->> 'status')::integer IS DISTINCT FROM (x ->> 'problem')::integer THEN
            problems := problems || format('problem %s', doc);
        END IF;
    END IF;
    IF jsonb_typeof(s) IS DISTINCT FROM 'null' AND s IS NOT NULL THEN
        SELECT * INTO l FROM idempotency.idem_lookup(
            idempotency.idem_http_scope(req ->> 'principal', (req ->> 'operation') || ' #' || tag,
                                        coalesce((req ->> 'shared_key_space')::boolean, false)),
            idempotency.idem_key_from_header(req ->> 'key'));
        IF s = '"released"' THEN
            IF l.status IS NOT NULL AND l.status <> 'failed' THEN
                problems := problems || format('stored %s', l.status);
            END IF;
        ELSE
            IF l.status IS DISTINCT FROM s ->> 'status' THEN
                problems := problems || format('stored status %s', l.status);
            END IF;
            IF s ? 'response_status' AND l.response_status IS DISTINCT FROM (s ->> 'response_status')::integer THEN
                problems := problems || format('stored response_status %s', l.response_status);
            END IF;
            IF s ? 'resource_id' AND l.resource_id IS DISTINCT FROM s ->> 'resource_id' THEN
                problems := problems || format('stored resource_id %s', l.resource_id);
            END IF;
            IF s ? 'attempt' AND l.attempt IS DISTINCT FROM (s ->> 'attempt')::integer THEN
                problems := problems || format('stored attempt %s', l.attempt);
            END IF;
            IF s ? 'response_headers' AND l.response_headers IS DISTINCT FROM s -> 'response_headers' THEN
                problems := problems || format('stored response_headers %s', l.response_headers);
            END IF;
            IF s ? 'response_body' AND convert_from(l.response_body, 'UTF8') IS DISTINCT FROM s ->> 'response_body' THEN
                problems := problems || format('stored response_body %s', convert_from(l.response_body, 'UTF8'));
            END IF;
        END IF;
    END IF;
    RETURN array_to_string(problems, '; ');
END
$$;

-- Every case in a mode: its prior requests, its request, what differs.
CREATE FUNCTION http_conformance(doc jsonb, mode text, tag text)
RETURNS TABLE (name text, ran boolean, status integer, problems text)
LANGUAGE plpgsql AS $$
DECLARE
    c jsonb;
    p jsonb;
    r record;
BEGIN
    FOR c IN SELECT value FROM jsonb_array_elements(doc -> 'cases') LOOP
        IF c ? 'modes' AND NOT (c -> 'modes') ? mode THEN
            CONTINUE;
        END IF;
        FOR p IN SELECT value FROM jsonb_array_elements(coalesce(c -> 'prior', '[]')) LOOP
            PERFORM http_request(p -> 'request', p -> 'handler', mode, tag, (p ->> 'hold')::interval);
            PERFORM pg_sleep(coalesce((p ->> 'sleep_ms')::numeric, 0) / 1000);
        END LOOP;
        r := http_request(c -> 'request', c -> 'handler', mode, tag, NULL);
        name := c ->> 'name';
        ran := r.ran;
        status := r.status;
        problems := http_check(c, r, tag);
        RETURN NEXT;
    END LOOP;
END
$$;
