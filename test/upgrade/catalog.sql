-- The catalog of a database's idempotency extension, one line per object and property, sorted:
-- test/stages/upgrade.sh prints it for a fresh database of the current version and for each updated one and
-- diffs them. It reads every object the database's users created (oid >= 16384, the first
-- normal object id: a test database holds only the extension), so an object an update left
-- behind shows too. Run with psql -AtX.
SET search_path = pg_catalog, pg_temp;

WITH ext AS (
    SELECT e.oid FROM pg_extension e WHERE e.extname = 'idempotency'
), facts(object, property, value) AS (
    -- the extension itself
    SELECT 'extension idempotency', 'version', e.extversion FROM pg_extension e JOIN ext USING (oid)
    UNION ALL
    SELECT 'extension idempotency', 'relocatable, schema, owner',
           format('%s %s %s', e.extrelocatable, e.extnamespace::regnamespace, e.extowner::regrole)
    FROM pg_extension e JOIN ext USING (oid)
    -- config-dump registrations (pg_extension_config_dump): the relation and its condition
    UNION ALL
    SELECT 'extension idempotency', 'config ' || c.rel::regclass::text, coalesce(c.cond, '(null)')
    FROM pg_extension e JOIN ext USING (oid),
         unnest(e.extconfig, e.extcondition) AS c(rel, cond)
    -- membership: every object pg_depend makes a member of the extension
    UNION ALL
    SELECT 'extension idempotency', 'member', pg_describe_object(d.classid, d.objid, d.objsubid)
    FROM pg_depend d JOIN ext ON d.refobjid = ext.oid
    WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
    -- schemas
    UNION ALL
    SELECT 'schema ' || n.nspname, 'owner, acl', format('%s %s', n.nspowner::regrole, n.nspacl)
    FROM pg_namespace n WHERE n.oid >= 16384
    -- functions and procedures
    UNION ALL
    SELECT pg_describe_object('pg_proc'::regclass, p.oid, 0), x.property, x.value
    FROM pg_proc p,
         LATERAL (VALUES
            ('arguments', pg_get_function_arguments(p.oid)),
            ('result', coalesce(pg_get_function_result(p.oid), '(procedure)')),
            ('kind, volatility, strict, parallel, security definer, leakproof',
             format('%s %s %s %s %s %s', p.prokind, p.provolatile, p.proisstrict, p.proparallel,
                    p.prosecdef, p.proleakproof)),
            ('cost, rows', format('%s %s', p.procost, p.prorows)),
            ('support', p.prosupport::regproc::text),
            ('config', coalesce(p.proconfig::text, '(none)')),
            ('owner, language', format('%s %s', p.proowner::regrole,
                                       (SELECT l.lanname FROM pg_language l WHERE l.oid = p.prolang))),
            ('source', p.prosrc),
            ('library', coalesce(p.probin, '(none)')),
            ('acl', coalesce(p.proacl::text, '(default)'))) AS x(property, value)
    WHERE p.oid >= 16384
    -- relations: tables, indexes, views, sequences, composite types (not the TOAST tables, whose
    -- names hold their table's oid)
    UNION ALL
    SELECT pg_describe_object('pg_class'::regclass, c.oid, 0), x.property, x.value
    FROM pg_class c,
         LATERAL (VALUES
            ('kind, persistence, owner', format('%s %s %s', c.relkind, c.relpersistence, c.relowner::regrole)),
            ('options', coalesce(c.reloptions::text, '(none)')),
            ('acl', coalesce(c.relacl::text, '(default)')),
            ('row security', format('%s %s', c.relrowsecurity, c.relforcerowsecurity)),
            ('definition', CASE c.relkind WHEN 'i' THEN pg_get_indexdef(c.oid)
                                          WHEN 'v' THEN pg_get_viewdef(c.oid)
                                          ELSE '(none)' END)) AS x(property, value)
    WHERE c.oid >= 16384 AND c.relnamespace <> 'pg_toast'::regnamespace
    -- columns, in their order (the module reads the tables by column number)
    UNION ALL
    SELECT format('column %s.%s', a.attrelid::regclass, a.attname), 'position, type, not null, default',
           format('%s %s %s %s %s %s', a.attnum, format_type(a.atttypid, a.atttypmod), a.attnotnull,
                  coalesce(pg_get_expr(ad.adbin, ad.adrelid), '(no default)'),
                  nullif(a.attidentity, ''), nullif(a.attgenerated, ''))
    FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
    LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
    WHERE c.oid >= 16384 AND c.relnamespace <> 'pg_toast'::regnamespace AND a.attnum > 0
    UNION ALL
    SELECT format('column %s.%s', a.attrelid::regclass, a.attname), 'acl', a.attacl::text
    FROM pg_attribute a WHERE a.attrelid >= 16384 AND a.attnum > 0 AND a.attacl IS NOT NULL
    UNION ALL
    SELECT 'relation ' || c.oid::regclass::text, 'dropped columns', count(*)::text
    FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
    WHERE c.oid >= 16384 AND a.attisdropped GROUP BY c.oid
    -- constraints (of tables and domains)
    UNION ALL
    SELECT pg_describe_object('pg_constraint'::regclass, k.oid, 0), 'definition',
           format('%s %s deferrable=%s validated=%s', k.contype, pg_get_constraintdef(k.oid),
                  k.condeferrable, k.convalidated)
    FROM pg_constraint k WHERE k.oid >= 16384
    -- sequences
    UNION ALL
    SELECT 'sequence ' || s.seqrelid::regclass::text, 'parameters',
           format('%s start %s increment %s min %s max %s cache %s cycle %s', s.seqtypid::regtype,
                  s.seqstart, s.seqincrement, s.seqmin, s.seqmax, s.seqcache, s.seqcycle)
    FROM pg_sequence s WHERE s.seqrelid >= 16384
    -- triggers
    UNION ALL
    SELECT pg_describe_object('pg_trigger'::regclass, t.oid, 0), 'definition',
           format('%s enabled=%s', pg_get_triggerdef(t.oid), t.tgenabled)
    FROM pg_trigger t WHERE t.oid >= 16384
    -- types (composite types' attributes are columns above)
    UNION ALL
    SELECT pg_describe_object('pg_type'::regclass, t.oid, 0), 'kind, owner, acl',
           format('%s %s %s %s', t.typtype, t.typowner::regrole, t.typacl,
                  CASE WHEN t.typelem <> 0 THEN 'array of ' || t.typelem::regtype::text END)
    FROM pg_type t WHERE t.oid >= 16384
    -- comments on every object and sub-object
    UNION ALL
    SELECT pg_describe_object(d.classoid, d.objoid, d.objsubid), 'comment', d.description
    FROM pg_description d WHERE d.objoid >= 16384
    -- the extension's initial privileges (pg_dump leaves these out of a dump)
    UNION ALL
    SELECT pg_describe_object(i.classoid, i.objoid, i.objsubid), 'initial privileges ' || i.privtype::text,
           i.initprivs::text
    FROM pg_init_privs i WHERE i.objoid >= 16384
    -- rules other than views' own, policies, casts, operators, event triggers: none expected
    UNION ALL
    SELECT pg_describe_object('pg_rewrite'::regclass, r.oid, 0), 'rule', r.rulename
    FROM pg_rewrite r WHERE r.oid >= 16384 AND r.rulename <> '_RETURN'
    UNION ALL
    SELECT pg_describe_object('pg_policy'::regclass, p.oid, 0), 'policy', p.polname FROM pg_policy p
    UNION ALL
    SELECT pg_describe_object('pg_operator'::regclass, o.oid, 0), 'operator', o.oprname
    FROM pg_operator o WHERE o.oid >= 16384
    UNION ALL
    SELECT pg_describe_object('pg_cast'::regclass, c.oid, 0), 'cast', '' FROM pg_cast c WHERE c.oid >= 16384
)
SELECT object || ' | ' || property || ' = ' || replace(coalesce(value, '(null)'), E'\n', E'\n    ')
FROM facts
ORDER BY object COLLATE "C", property COLLATE "C", value COLLATE "C";
