-- The roles of a pgcld fleet's PostgreSQL database (docs/scaling.md, "Privileges"):
--
--   pgcld_owner   owns the schema: runs `pgcld migrate --db postgresql://pgcld_owner@HOST/DB`
--                 (a Job or a person, at install and upgrade); never used by a serving daemon.
--   pgcld_writer  the daemons' role (`pgcld serve --db postgresql://pgcld_writer@HOST/DB`): SELECT on
--                 every table, INSERT on the append-only ones, and UPDATE / DELETE only where the
--                 store must keep something current (fleet_counters, writers.last_seen,
--                 input_retention and stored inputs, key revocation, idempotency-key expiry; each
--                 grant is justified in pgcld_grant_writer, migrations/pg/0001_fleet.sql). It cannot
--                 create, alter, drop or truncate anything, nor change or delete an audit row.
--
-- Run once per database, as a superuser (or a role with CREATEROLE that may grant on the
-- database), connected to the database pgcld will use, before the first `pgcld migrate`:
--
--   psql "postgresql://postgres@db.example.internal/pgcld" -v ON_ERROR_STOP=1 -f deploy/postgres/roles.sql
--
-- then give both roles a password outside this file (psql: \password pgcld_owner, \password
-- pgcld_writer; a managed service: its console) and put it in the clients' PGPASSFILE or Secret,
-- never in a URI in a manifest or a shell history. Running it again changes nothing; run after the
-- schema exists (roles made after `pgcld migrate`), it also grants pgcld_writer its privileges on
-- the existing tables. Later migrations keep the grants current themselves.

DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'pgcld_owner') THEN
    CREATE ROLE pgcld_owner LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'pgcld_writer') THEN
    CREATE ROLE pgcld_writer LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS;
  END IF;
  -- Both may connect to this database (whatever its name).
  EXECUTE format('GRANT CONNECT ON DATABASE %I TO pgcld_owner, pgcld_writer', current_database());
END $$;

-- The schema pgcld's tables live in: only the owner may create there (PostgreSQL 15 already
-- refuses CREATE on public to PUBLIC; older servers granted it to everyone).
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
GRANT USAGE, CREATE ON SCHEMA public TO pgcld_owner;
GRANT USAGE ON SCHEMA public TO pgcld_writer;

-- The schema already there (made before the roles): give pgcld_writer its privileges now.
DO $$
BEGIN
  IF to_regprocedure('pgcld_grant_writer(name)') IS NOT NULL THEN
    PERFORM pgcld_grant_writer('pgcld_writer');
  END IF;
END $$;
