-- resumable's PostgreSQL store, schema version 3: workers claim ahead of their free slots.
--
-- A worker holds a few claimed steps beyond its free slots, so a slot that frees starts its next
-- step with no round trip to the server. A claim is not an attempt: the attempt is recorded when
-- the step starts (start_attempts, fenced by the claim's epoch), so a claim handed back unstarted
-- leaves nothing behind. A step is claimed ahead only when no step before it in the job's order
-- waits (for a need, or for a retry's backoff): first_waiting finds the first such step with
-- this index, in one lookup however large the run.

CREATE INDEX resumable_steps_waiting ON resumable_steps (run_pk, ord)
    WHERE state = 'pending' AND (remaining > 0 OR not_before IS NOT NULL);
