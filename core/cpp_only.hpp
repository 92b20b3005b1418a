// The last include of every file in core/: the core is plain C++17 that never sees PostgreSQL's
// headers, so it builds and is unit-tested without a server, and no PostgreSQL macro (elog,
// palloc, PG_TRY, the snprintf -> pg_snprintf redirection, ...) reaches it. src/pg_cpp.hpp is
// the one bridge between the two. (pg_duckdb's cpp_only_file.hpp guards its C++ files alike.)
// No include guard: every inclusion checks again.
#if defined(POSTGRES_H) || defined(PG_VERSION_NUM)
#error "core/ must not include postgres.h or other PostgreSQL headers: that belongs in src/"
#endif
