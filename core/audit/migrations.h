/* The schema migrations compiled into the binary from migrations/NNNN_name.sql (see
 * migrations/embed_sql.py). Versions run 1..pgcl_migration_count without gaps. */
#ifndef PGCL_MIGRATIONS_H
#define PGCL_MIGRATIONS_H

typedef struct pgcl_migration {
    int version;
    const char *name;
    const char *sql;
    const char *sha256; /* lowercase hex SHA-256 of sql, computed at build time: what schema_migrations records */
} pgcl_migration;

extern const pgcl_migration pgcl_migrations[];
extern const int pgcl_migration_count;

/* The PostgreSQL store's migrations (migrations/pg/NNNN_name.sql, core/audit/pg/). */
extern const pgcl_migration pgcl_pg_migrations[];
extern const int pgcl_pg_migration_count;

#endif
