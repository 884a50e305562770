-- Roles for a production PostgreSQL, run as a superuser in the service's database (made
-- first: createdb pitboss): psql -d pitboss -v ON_ERROR_STOP=1 -f deploy/postgres-roles.sql,
-- twice: before the owner's first start (the roles and the schema; the grants find no tables
-- yet), and after it (the grants). Running it again changes nothing.
--
-- pitboss_owner   owns the schema and every table, trigger and function; nobody logs in
--                 as it except to create or migrate tables (start the service once with
--                 this role and CREATE_TABLE=y, and once again after each upgrade: see
--                 README's Upgrading).
-- pitboss_service the API and the projection worker: may add events, only through the
--                 ledger's insert function (which locks, chains and inserts with the owner's
--                 rights), read them, and maintain the projection tables. It cannot INSERT,
--                 UPDATE or DELETE a stored event directly (no grant, and the owner's
--                 triggers refuse changes anyway), nor drop a trigger (only the owner can).
-- pitboss_auditor read-only access for auditors' own tools. Live shoe orders are sealed
--                 (AES-GCM, key held by the service only) and a face-down card is recorded
--                 without its face until it is turned over, so reading events reveals none
--                 (rounds recorded by earlier versions of pitboss hold a face-down card's face).
--
-- Passwords are set outside this file: ALTER ROLE ... PASSWORD ...

DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'pitboss_owner') THEN
    CREATE ROLE pitboss_owner NOLOGIN;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'pitboss_service') THEN
    CREATE ROLE pitboss_service LOGIN;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'pitboss_auditor') THEN
    CREATE ROLE pitboss_auditor LOGIN;
  END IF;
END $$;

CREATE SCHEMA IF NOT EXISTS pitboss AUTHORIZATION pitboss_owner;
GRANT USAGE ON SCHEMA pitboss TO pitboss_service, pitboss_auditor;

-- The ledger's tables, once the owner has created them (its first start):
DO $$
BEGIN
  IF to_regclass('pitboss.ledger_events') IS NOT NULL THEN
    -- What an earlier version of this file granted beyond it goes (INSERT on the event table,
    -- its id sequence): the service appends through the insert function alone.
    REVOKE ALL ON pitboss.ledger_events FROM pitboss_service, pitboss_auditor;
    IF pg_get_serial_sequence('pitboss.ledger_events', 'notification_id') IS NOT NULL THEN
      EXECUTE format('REVOKE ALL ON SEQUENCE %s FROM pitboss_service, pitboss_auditor',
                     pg_get_serial_sequence('pitboss.ledger_events', 'notification_id'));
    END IF;
    GRANT SELECT ON pitboss.ledger_events TO pitboss_service, pitboss_auditor;
    GRANT EXECUTE ON FUNCTION pitboss.ledger_events_insert(uuid[], bigint[], text[], bytea[])
      TO pitboss_service;
  END IF;
  IF to_regclass('pitboss.ledger_snapshots') IS NOT NULL THEN
    REVOKE ALL ON pitboss.ledger_snapshots FROM pitboss_service, pitboss_auditor;
    GRANT SELECT, INSERT ON pitboss.ledger_snapshots TO pitboss_service;
  END IF;
END $$;

-- The projection tables (their names start with balances_, round_index_ or table_days_) are
-- maintained by the service. Run this once they exist (after the owner's first start of
-- pitboss serve and pitboss project); `pitboss rebuild`, run as the owner, gives the tables it
-- swaps in the grants of those they replace.
DO $$
DECLARE t text;
BEGIN
  FOR t IN SELECT tablename FROM pg_tables WHERE schemaname = 'pitboss'
             AND tablename ~ '^(balances|round_index|table_days)_' LOOP
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON pitboss.%I TO pitboss_service', t);
    EXECUTE format('GRANT SELECT ON pitboss.%I TO pitboss_auditor', t);
  END LOOP;
END $$;
ALTER DEFAULT PRIVILEGES FOR ROLE pitboss_owner IN SCHEMA pitboss
    GRANT SELECT ON TABLES TO pitboss_auditor;
