-- What a database's batteries left (run by a superuser; the search path is pinned first, so that
-- the report itself resolves no decoy). Prints the failures; the stage reads the last line.
SET search_path = pg_catalog, pg_temp;
\pset tuples_only on
\pset format unaligned
\pset fieldsep ' | '
SELECT 'CROSSED: decoy "' OPERATOR(pg_catalog.||) l.decoy OPERATOR(pg_catalog.||) '" planted by ' OPERATOR(pg_catalog.||) l.planter
       OPERATOR(pg_catalog.||) ' ran as ' OPERATOR(pg_catalog.||) l.ran_as OPERATOR(pg_catalog.||) ' (session ' OPERATOR(pg_catalog.||) l.session_as
       OPERATOR(pg_catalog.||) ') in entry point ' OPERATOR(pg_catalog.||) COALESCE(NULLIF(l.call, ''), '(none: the pg_cron job, or outside a call)')
       OPERATOR(pg_catalog.||) ': ' OPERATOR(pg_catalog.||) pg_catalog.count(*) OPERATOR(pg_catalog.||) ' time(s)'
FROM public.attack_log l WHERE l.ran_as OPERATOR(pg_catalog.<>) l.planter
GROUP BY l.decoy, l.planter, l.ran_as, l.session_as, l.call ORDER BY 1;
SELECT 'same-role firing (information): decoy "' OPERATOR(pg_catalog.||) l.decoy OPERATOR(pg_catalog.||) '" of ' OPERATOR(pg_catalog.||) l.planter
       OPERATOR(pg_catalog.||) ' in ' OPERATOR(pg_catalog.||) COALESCE(NULLIF(l.call, ''), '(none)') OPERATOR(pg_catalog.||) ': '
       OPERATOR(pg_catalog.||) pg_catalog.count(*) OPERATOR(pg_catalog.||) ' time(s)'
FROM public.attack_log l WHERE l.ran_as OPERATOR(pg_catalog.=) l.planter
GROUP BY l.decoy, l.planter, l.call ORDER BY 1;
SELECT 'WRONG: ' OPERATOR(pg_catalog.||) c.role OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) c.session OPERATOR(pg_catalog.||) ' '
       OPERATOR(pg_catalog.||) c.call OPERATOR(pg_catalog.||) ': got ' OPERATOR(pg_catalog.||) COALESCE(c.got, 'NULL')
       OPERATOR(pg_catalog.||) ', want ' OPERATOR(pg_catalog.||) COALESCE(c.want, 'NULL')
       OPERATOR(pg_catalog.||) COALESCE(' (' OPERATOR(pg_catalog.||) c.error OPERATOR(pg_catalog.||) ')', '')
FROM public.attack_calls c WHERE c.verdict OPERATOR(pg_catalog.=) 'WRONG' ORDER BY c.role, c.session, c.call;
SELECT 'ESCALATED: role ' OPERATOR(pg_catalog.||) r.rolname OPERATOR(pg_catalog.||) ' is now SUPERUSER'
FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.~~) 'sec\_%' AND r.rolsuper ORDER BY 1;
SELECT 'counts', (SELECT pg_catalog.count(*) FROM public.attack_calls),
       (SELECT pg_catalog.count(*) FROM public.attack_calls c WHERE c.verdict OPERATOR(pg_catalog.=) 'ok'),
       (SELECT pg_catalog.count(*) FROM public.attack_calls c WHERE c.verdict OPERATOR(pg_catalog.=) 'unreachable'),
       (SELECT pg_catalog.count(*) FROM public.attack_calls c WHERE c.verdict OPERATOR(pg_catalog.=) 'WRONG'),
       (SELECT pg_catalog.count(DISTINCT c.session) FROM public.attack_calls c),
       (SELECT pg_catalog.count(*) FROM public.attack_decoys),
       (SELECT pg_catalog.count(*) FROM public.attack_log),
       (SELECT pg_catalog.count(*) FROM public.attack_log l WHERE l.ran_as OPERATOR(pg_catalog.<>) l.planter);
