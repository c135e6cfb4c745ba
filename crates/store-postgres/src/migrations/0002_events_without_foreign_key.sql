-- dsh sessions in PostgreSQL, version 2: no foreign key from dsh_events to dsh_sessions.
--
-- Every row is inserted by a statement that proves its session exists under the writer's
-- lease in the same transaction: an append joins its rows to the fenced UPDATE of the
-- session's row (no row updated, no row inserted), and an import inserts the session's row
-- first. The key's check ran again for each inserted row (a share lock of the session row
-- per event) and was the largest part of an append statement's cost: with it, a group of ten
-- events took about twice the server time of the same INSERT alone. Deleting a session now
-- deletes its events explicitly, in the transaction that deletes its row (PgStore::delete).
ALTER TABLE dsh_events DROP CONSTRAINT IF EXISTS dsh_events_session_id_fkey;
