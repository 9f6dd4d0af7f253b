-- resumable's PostgreSQL store, schema version 2: one run, many workers.
--
-- Claims and completions (the workers' path, queries.sql) lock only the step rows they touch:
-- claims take ready steps with FOR UPDATE SKIP LOCKED, completions take their own steps by the
-- claim's fencing token (epoch). Nothing on that path holds a lock of the whole run across a
-- network round trip or client-side work.
--
-- The run's event sequence stays gap-free and in commit order, so readers stay exact
-- (`log --since SEQ` and `status --watch` never skip an event): a transaction's events get their
-- sequence numbers in a single statement (append_events: UPDATE resumable_runs ... RETURNING seq,
-- and the INSERT of the events) sent together with its COMMIT in one round trip. The run's row is
-- locked from that statement to the end of the commit, so the next writer's numbers come after
-- this commit is visible: a reader never sees event N+1 before event N. Chosen over numbering
-- events later (a sequencer) because readers would then see a run's changes only once some
-- process had numbered them, and over a global sequence filtered by transaction horizons because
-- the per-run numbers are what `log`, `--since` and the journal format already promise.
--
-- The run's counters (open steps, whether it stops) move in that same statement. The document is
-- not rebuilt on the workers' path: the step rows are what claims and completions act on, and the
-- writer that closes the run's last open step concludes the run under its lock, once.

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
