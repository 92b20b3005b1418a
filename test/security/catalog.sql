-- Every function and procedure of the installed extension that is not written in C runs with
-- search_path = pg_catalog, pg_temp (its SET clause), except the procedures that commit, which
-- cannot have one and must start with PERFORM pg_catalog.set_config('search_path',
-- 'pg_catalog, pg_temp', true). Prints one line per violation.
SET search_path = pg_catalog, pg_temp;
\pset tuples_only on
\pset format unaligned
SELECT 'CATALOG: ' OPERATOR(pg_catalog.||) p.oid::pg_catalog.regprocedure::pg_catalog.text OPERATOR(pg_catalog.||) ' (' OPERATOR(pg_catalog.||) l.lanname
       OPERATOR(pg_catalog.||) ', proconfig ' OPERATOR(pg_catalog.||) COALESCE(p.proconfig::pg_catalog.text, 'NULL')
       OPERATOR(pg_catalog.||) ') does not pin search_path = pg_catalog, pg_temp'
FROM pg_catalog.pg_proc p
JOIN pg_catalog.pg_depend d ON d.objid OPERATOR(pg_catalog.=) p.oid
     AND d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass AND d.deptype OPERATOR(pg_catalog.=) 'e'
JOIN pg_catalog.pg_extension e ON e.oid OPERATOR(pg_catalog.=) d.refobjid AND e.extname OPERATOR(pg_catalog.=) 'idempotency'
JOIN pg_catalog.pg_language l ON l.oid OPERATOR(pg_catalog.=) p.prolang
WHERE l.lanname OPERATOR(pg_catalog.<>) 'c'
  AND NOT COALESCE(p.proconfig, '{}') OPERATOR(pg_catalog.@>) ARRAY['search_path=pg_catalog, pg_temp']
  AND NOT (p.prokind OPERATOR(pg_catalog.=) 'p'
           AND p.prosrc OPERATOR(pg_catalog.~) '^\s*(DECLARE.*?)?BEGIN\s+(--[^\n]*\n\s*)*PERFORM\s+pg_catalog\.set_config\(''search_path'', ''pg_catalog, pg_temp'', true\);'
           AND p.prosrc OPERATOR(pg_catalog.~*) '\mCOMMIT\M')
ORDER BY 1;
SELECT 'catalog-checked', pg_catalog.count(*)
FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_extension e ON e.oid OPERATOR(pg_catalog.=) d.refobjid
WHERE e.extname OPERATOR(pg_catalog.=) 'idempotency' AND d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
  AND d.deptype OPERATOR(pg_catalog.=) 'e';
