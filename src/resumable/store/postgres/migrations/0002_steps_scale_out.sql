-- resumable's PostgreSQL store, schema version 2: one run, many workers.
--
-- Claims and completions (the workers' path, queries.sql) lock only the step rows they touch:
-- claims take ready steps with FOR UPDATE SKIP LOCKED, completions take their own steps by the
-- claim's fencing token (epoch). Nothing on that path holds a lock of the whole run across a
-- network round trip or client-side work.
--
-- The run's event sequence stays gap-free and in commit order, so readers stay exact (`log --since
-- SEQ` and `status --watch` never skip an event), without a lock of the run on the workers' path:
-- a worker's transaction appends its events to resumable_pending_events (no sequence number, no
-- run row touched), and they are numbered later, in one statement, by whoever holds the run's row
-- lock for a moment: the statement (sequence_events) moves every pending event that is committed,
-- in the order of its id, into resumable_events with the run's next numbers. Events of one step are
-- ordered by its row lock (a later transaction on the step inserts after the earlier committed), so
-- their ids, and so their numbers, follow the order they happened in. Workers number their run's
-- events at most every append.NUMBER_EVERY (1 s) and when the run ends; every write through a handle numbers them
-- first; `log` numbers them before it reads; the document is read with the pending events after
-- the numbered ones. A reader has seen event N only once every event before it is numbered, so it
-- never skips one. Chosen over numbering each transaction's events in its own last statement
-- (the run's row locked through every commit's WAL flush: measured, 44 % of the samples of a
-- 4-worker run had a backend waiting on that row) and over a global sequence filtered by
-- transaction horizons (the per-run numbers are what `log`, `--since` and the journal promise).
--
-- The document is not rebuilt on the workers' path: the step rows are what claims and completions
-- act on; whoever finds no step of the run open concludes it, under the run's lock, once.

CREATE TABLE resumable_pending_events (
    id     bigserial PRIMARY KEY,
    run_pk bigint NOT NULL REFERENCES resumable_runs (pk) ON DELETE CASCADE,
    tx     text   NOT NULL,                    -- the writing transaction (ambiguous commits)
    body   text   NOT NULL
);
CREATE INDEX resumable_pending_events_run ON resumable_pending_events (run_pk, id);
CREATE INDEX resumable_pending_events_tx ON resumable_pending_events (run_pk, tx);

ALTER TABLE resumable_runs DROP COLUMN open_steps;  -- counted from the step rows, never a shared counter
CREATE INDEX resumable_steps_open ON resumable_steps (run_pk) WHERE state IN ('pending', 'running');

ALTER TABLE resumable_steps
    ADD COLUMN fingerprint jsonb,  -- the last done attempt's fingerprint and its host, for the next claim
    ADD CONSTRAINT resumable_steps_state
        CHECK (state IN ('pending', 'running', 'done', 'skipped', 'failed', 'timeout', 'dep_blocked')),
    ADD CONSTRAINT resumable_steps_lease CHECK (state <> 'running' OR lease_expires IS NOT NULL),
    ADD CONSTRAINT resumable_steps_counts CHECK (remaining >= 0 AND tries >= 0 AND failures >= 0);

ALTER TABLE resumable_attempts
    ADD CONSTRAINT resumable_attempts_status
        CHECK (status IN ('running', 'done', 'failed', 'timeout', 'interrupted', 'expired'));

-- The probe of a commit whose answer was lost looks its transaction up by tag.
CREATE INDEX resumable_events_tx ON resumable_events (run_pk, tx) WHERE tx IS NOT NULL;

-- Times are timestamptz. A document's updatedAt that is not a time (a malformed document) is NULL.
CREATE FUNCTION pg_temp.resumable_time(value text) RETURNS timestamptz LANGUAGE plpgsql AS $$
BEGIN
    RETURN value::timestamptz;
EXCEPTION WHEN others THEN
    RETURN NULL;
END $$;
ALTER TABLE resumable_runs ALTER COLUMN updated_at TYPE timestamptz USING pg_temp.resumable_time(updated_at);
ALTER TABLE resumable_runner_leases
    ALTER COLUMN started_at TYPE timestamptz USING coalesce(pg_temp.resumable_time(started_at), now());
