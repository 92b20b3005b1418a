
-- Initial privileges (0.6: restated after the functions recreated above) --------------------
-- A GRANT or REVOKE run by an extension script records the object's whole resulting ACL in
-- pg_init_privs as the extension's own initial privileges, and pg_dump leaves those out of a
-- dump. Run by ALTER EXTENSION UPDATE, the REVOKEs above would thereby record the grants that
-- users made under 0.1 (the README has them grant idempotency_user before updating) as the
-- extension's, and a dump and restore would silently lose them. Keep only the extension's own
-- entries, as a fresh installation records them: the owner's, and pg_monitor's.
UPDATE pg_catalog.pg_init_privs i
SET initprivs = ARRAY(
    SELECT pg_catalog.makeaclitem(x.grantee, x.grantor, x.privilege_type, x.is_grantable)
    FROM pg_catalog.aclexplode(i.initprivs) x
    WHERE x.grantee OPERATOR(pg_catalog.=) p.proowner
       OR x.grantee OPERATOR(pg_catalog.=) 'pg_monitor'::pg_catalog.regrole)
FROM pg_catalog.pg_proc p, pg_catalog.pg_depend d, pg_catalog.pg_extension e
WHERE i.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
  AND i.objoid OPERATOR(pg_catalog.=) p.oid
  AND i.privtype OPERATOR(pg_catalog.=) 'e'
  AND d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
  AND d.objid OPERATOR(pg_catalog.=) p.oid
  AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
  AND d.refobjid OPERATOR(pg_catalog.=) e.oid
  AND d.deptype OPERATOR(pg_catalog.=) 'e'
  AND e.extname OPERATOR(pg_catalog.=) 'idempotency';
