-- Every statement the PostgreSQL store sends, each under a name (`-- name --`), loaded by
-- ``queries.py`` (but the schema's own bookkeeping, in schema.py, and LISTEN, in listen.py).
-- Parameters are named (%(name)s) or positional (%s); %(name)b sends one in binary (event bodies,
-- fingerprints, logs: text full of quotes, which the text format escapes element by element). The
-- workers' path comes first; then runs, their history and snapshots, stored values, readers, the
-- runner lease.
--
-- A statement joining rows to an array parameter (``unnest``) also names the rows' keys with
-- ``step = ANY(...)``: the rows are then found by their primary key, whatever the planner's
-- statistics say (those of a run submitted moments ago are stale, and a plan from them read every
-- attempt or step of the run once per element).
--
-- Lock order, the same in every transaction: step rows first (claims with FOR UPDATE SKIP LOCKED,
-- completions by their fenced claim, a handle's write by the units its events touch, a submit all
-- of them), then the run's row, which the workers' path takes only to stop a run and to number
-- its events (FOR NO KEY UPDATE: inserts referencing the run take KEY SHARE, which it lets by).

-- append_events --
-- A transaction's events, pending: numbered later by sequence_events (no run row is touched here).
INSERT INTO resumable_pending_events (run_pk, tx, body)
SELECT %(pk)s, %(tx)s, t.body FROM unnest(%(bodies)b::text[]) WITH ORDINALITY AS t(body, i) ORDER BY t.i;

-- sequence_events --
-- The run (by its row key, or by id when %(pk)s is NULL) locked, unless another transaction holds
-- it (that one numbers them: nothing is done); then every committed pending event gets the run's
-- next number, in the order of its id, and moves into the history. Returns how many, the run's last
-- number, and whether the events after its snapshot outgrew it; watchers are told when there
-- were any. (Rows another numbering moved since
-- this statement's snapshot are skipped by the DELETE; the run's row is updated in its latest version.)
WITH target AS (
    SELECT pk FROM resumable_runs
    WHERE pk = coalesce(%(pk)s::bigint, (SELECT pk FROM resumable_runs WHERE id = %(run)s AND archived_at IS NULL))
    FOR NO KEY UPDATE SKIP LOCKED
), moved AS (
    DELETE FROM resumable_pending_events p USING target WHERE p.run_pk = target.pk RETURNING p.id, p.tx, p.body
), numbered AS (
    SELECT body, row_number() OVER (ORDER BY id) AS i,
        CASE WHEN row_number() OVER (PARTITION BY tx ORDER BY id) = 1 THEN tx END AS tx
    FROM moved
), counted AS (
    SELECT count(*) AS n, coalesce(sum(length(body)), 0) AS size FROM numbered
), run AS (
    UPDATE resumable_runs r SET seq = r.seq + c.n, tail_bytes = r.tail_bytes + c.size, changed_at = now()
    FROM counted c, target t WHERE r.pk = t.pk AND c.n > 0
    RETURNING r.pk, r.seq, c.n, r.tail_bytes, r.snap_bytes
), events AS (
    INSERT INTO resumable_events (run_pk, seq, tx, body)
    SELECT run.pk, run.seq - run.n + numbered.i, numbered.tx, numbered.body FROM run, numbered
)
SELECT n, seq, tail_bytes >= greatest(snap_bytes, %(min_tail)s), pg_notify(%(channel)s, %(payload)s) FROM run;

-- pending_events --
-- The committed events not numbered yet, in the order they will be numbered (a reader applies them
-- after the numbered ones).
SELECT id, body FROM resumable_pending_events WHERE run_pk = %(pk)s ORDER BY id;

-- run_over --
-- The run (by its row key, or by id when %(pk)s is NULL), and whether nothing of it runs and
-- nothing more will start (a stopping run starts nothing).
SELECT r.pk, r.status = 'running' AND r.job IS NOT NULL AND NOT EXISTS (
    SELECT 1 FROM resumable_steps s
    WHERE s.run_pk = r.pk AND s.state IN ('pending', 'running') AND (s.state = 'running' OR NOT r.stopping))
FROM resumable_runs r
WHERE r.pk = coalesce(%(pk)s::bigint, (SELECT pk FROM resumable_runs WHERE id = %(run)s AND archived_at IS NULL));

-- steps_over --
-- Under the run's lock: whether none of its steps runs, and none waits to start (unless it stops).
SELECT NOT EXISTS (SELECT 1 FROM resumable_steps
                   WHERE run_pk = %(pk)s AND (state = 'running' OR (state = 'pending' AND NOT %(stopping)s::boolean)));

-- stop_run --
-- A step failed for good and the policy stops the run: nothing more is claimed.
UPDATE resumable_runs SET stopping = true WHERE pk = %(pk)s;

-- ready_steps --
-- Ready steps of a running run (by its row key, or by id when %(pk)s is NULL), in the job's order,
-- locked; those another worker is taking are skipped.
SELECT s.run_pk, s.step, s.spec, s.attempt, s.epoch, s.needs, s.fingerprint,
    -- what its needs made (their artifacts), and which of them ran since the job was submitted
    (SELECT jsonb_object_agg(n.step, n.fingerprint -> 'artifacts') FROM resumable_steps n
     WHERE s.needs <> '{}' AND n.run_pk = s.run_pk AND n.step = ANY(s.needs)),
    (SELECT array_agg(n.step) FROM resumable_steps n
     WHERE s.needs <> '{}' AND n.run_pk = s.run_pk AND n.step = ANY(s.needs) AND n.tries > 0),
    s.ord
FROM resumable_steps s JOIN resumable_runs r ON r.pk = s.run_pk
WHERE r.pk = coalesce(%(pk)s::bigint, (SELECT pk FROM resumable_runs WHERE id = %(run)s AND archived_at IS NULL))
  AND r.status = 'running' AND NOT r.stopping
  AND s.state = 'pending' AND s.remaining = 0 AND (s.not_before IS NULL OR s.not_before <= now())
ORDER BY s.ord LIMIT %(limit)s
FOR UPDATE OF s SKIP LOCKED;

-- expired_leases --
-- Claims whose lease ran out (their worker stopped renewing it), locked, to take back; and whether
-- the claim's attempt had started (an attempt of the claim's epoch is on record).
SELECT s.run_pk, s.step, s.attempt, s.worker, EXISTS (
    SELECT 1 FROM resumable_attempts a
    WHERE a.run_pk = s.run_pk AND a.step = s.step AND a.n = s.attempt AND a.epoch = s.epoch)
FROM resumable_steps s
WHERE s.run_pk = (SELECT pk FROM resumable_runs WHERE id = %(run)s AND archived_at IS NULL)
  AND s.state = 'running' AND s.lease_expires < now()
ORDER BY s.ord
FOR UPDATE OF s SKIP LOCKED;

-- first_waiting --
-- What claiming ahead of a worker's free slots may take. The job's order of the first step that
-- waits (for a need, or for a retry's backoff): a step after it is not claimed ahead, so claiming
-- ahead never starts a step before one the local runner would start first. And how many steps are
-- ready (counted up to %(bound)s): a worker claims ahead only from the ready steps beyond its free
-- slots, and leaves as many for other workers (a few slow steps are not held by one worker).
SELECT (SELECT ord FROM resumable_steps
        WHERE run_pk = t.pk AND state = 'pending' AND (remaining > 0 OR not_before IS NOT NULL)
          AND (remaining > 0 OR not_before > now())
        ORDER BY ord LIMIT 1),
       (SELECT count(*) FROM (SELECT 1 FROM resumable_steps
                              WHERE run_pk = t.pk AND state = 'pending' AND remaining = 0
                                AND (not_before IS NULL OR not_before <= now())
                              LIMIT %(bound)s) AS ready)
FROM (SELECT coalesce(%(pk)s::bigint,
                      (SELECT pk FROM resumable_runs WHERE id = %(run)s AND archived_at IS NULL)) AS pk) AS t;

-- next_due --
-- Seconds until something falls due without a notification: a retry's backoff ends, or a lease
-- held by another worker runs out.
SELECT extract(epoch FROM least(
    min(not_before) FILTER (WHERE state = 'pending' AND remaining = 0 AND not_before > now()),
    min(lease_expires) FILTER (WHERE state = 'running' AND worker IS DISTINCT FROM %(worker)s)) - now())
FROM resumable_steps
WHERE run_pk = (SELECT pk FROM resumable_runs WHERE id = %(run)s AND archived_at IS NULL)
  AND (state = 'running' OR not_before IS NOT NULL);

-- candidates --
-- Runs with something to claim or to take back (an expired lease), oldest first.
SELECT r.id FROM resumable_runs r
WHERE r.archived_at IS NULL AND r.status = 'running' AND r.job IS NOT NULL
  AND EXISTS (SELECT 1 FROM resumable_steps s WHERE s.run_pk = r.pk AND
      ((s.state = 'pending' AND s.remaining = 0 AND (s.not_before IS NULL OR s.not_before <= now()))
       OR (s.state = 'running' AND s.lease_expires < now())))
ORDER BY r.pk;

-- take_steps --
-- The claimed steps are held under this worker's lease; each claim's epoch is its fencing token. A
-- claim is not an attempt yet: the attempt starts when the worker starts the step (start_attempts),
-- so a claim handed back unstarted leaves no attempt behind.
UPDATE resumable_steps s SET state = 'running', worker = %(worker)s, epoch = c.epoch, not_before = NULL,
    lease_expires = now() + make_interval(secs => %(ttl)s)
FROM unnest(%(steps)s::text[], %(epochs)s::bigint[]) AS c(step, epoch)
WHERE s.run_pk = %(pk)s AND s.step = ANY(%(steps)s::text[]) AND s.step = c.step;

-- start_attempts --
-- Attempts the worker started, each under the claim that still holds its step (the epoch matches):
-- the step's attempt number and tries move on, the attempt is on record. Returns the steps whose
-- claim held (the others were taken back: their processes are stopped).
WITH started AS (
    UPDATE resumable_steps s SET attempt = c.n, tries = s.tries + 1
    FROM unnest(%(steps)s::text[], %(epochs)s::bigint[], %(ns)s::integer[]) AS c(step, epoch, n)
    WHERE s.run_pk = %(pk)s AND s.step = ANY(%(steps)s::text[]) AND s.step = c.step
      AND s.epoch = c.epoch AND s.state = 'running'
    RETURNING s.step
), attempts AS (
    INSERT INTO resumable_attempts (run_pk, step, n, epoch, worker, host, pid, started_at, status, log_path)
    SELECT %(pk)s, c.step, c.n, c.epoch, %(worker)s, %(host)s, %(pid)s, to_timestamp(c.at), 'running', c.log
    FROM unnest(%(steps)s::text[], %(epochs)s::bigint[], %(ns)s::integer[], %(ats)s::float8[], %(logs)s::text[])
        AS c(step, epoch, n, at, log)
    JOIN started USING (step)
    ON CONFLICT (run_pk, step, n) DO NOTHING
)
SELECT step FROM started;

-- release_unstarted --
-- Claims handed back before their step started (a worker stopping, a run that stopped, a failure
-- whose consequences come first): pending again, the epoch moved on, no attempt recorded.
UPDATE resumable_steps s SET state = 'pending', worker = NULL, lease_expires = NULL, epoch = s.epoch + 1
FROM unnest(%(steps)s::text[], %(epochs)s::bigint[]) AS c(step, epoch)
WHERE s.run_pk = %(pk)s AND s.step = ANY(%(steps)s::text[]) AND s.step = c.step
      AND s.epoch = c.epoch AND s.state = 'running'
RETURNING s.step;

-- take_back --
-- Steps whose lease expired are pending again, and the epoch moves on: the worker that held them
-- is fenced off.
UPDATE resumable_steps SET state = 'pending', epoch = epoch + 1, worker = NULL, lease_expires = NULL
WHERE run_pk = %(pk)s AND step = ANY(%(steps)s::text[]);

-- expire_attempts --
UPDATE resumable_attempts a SET status = 'expired', finished_at = clock_timestamp(),
    reason = 'lease expired: worker ' || c.worker || ' stopped renewing it'
FROM unnest(%(steps)s::text[], %(ns)s::integer[], %(workers)s::text[]) AS c(step, n, worker)
WHERE a.run_pk = %(pk)s AND a.step = ANY(%(steps)s::text[]) AND a.step = c.step AND a.n = c.n
  AND a.status = 'running';

-- finish_done --
-- Steps done by the claims that still hold them (the epoch matches): done, the epoch moved on, and
-- each dependent one need closer to ready. Returns the steps recorded, the dependents released,
-- and the current epoch of the steps whose claim no longer held.
WITH done AS (
    UPDATE resumable_steps s SET state = 'done', worker = NULL, lease_expires = NULL, not_before = NULL,
        epoch = s.epoch + 1, fingerprint = c.fingerprint
    FROM unnest(%(steps)s::text[], %(epochs)s::bigint[], %(fingerprints)b::jsonb[]) AS c(step, epoch, fingerprint)
    WHERE s.run_pk = %(pk)s AND s.step = ANY(%(steps)s::text[]) AND s.step = c.step AND s.epoch = c.epoch
      AND s.state = 'running'
    RETURNING s.step, s.dependents
), released AS (
    UPDATE resumable_steps d SET remaining = d.remaining - n.hits
    FROM (SELECT dep AS step, count(*) AS hits FROM done, unnest(done.dependents) AS dep GROUP BY dep) AS n
    WHERE d.run_pk = %(pk)s AND d.step = n.step
    RETURNING d.step, d.remaining, d.state
)
SELECT 'done', step, NULL::bigint FROM done
UNION ALL SELECT 'ready', step, NULL FROM released WHERE remaining = 0 AND state = 'pending'
UNION ALL SELECT 'epoch', s.step, s.epoch FROM resumable_steps s
    WHERE s.run_pk = %(pk)s AND s.step = ANY(%(steps)s::text[]) AND s.step NOT IN (SELECT step FROM done);

-- run_view --
-- What a completion needs to know of its run, in one statement: its row (status, job, stopping);
-- whether a step other than %(steps)s is open, and whether one runs; with %(failures)s, how many
-- steps failed for good; with %(bound)s > 0, first_waiting's two answers (claiming ahead).
SELECT r.pk, r.status, r.job, r.stopping,
    EXISTS (SELECT 1 FROM resumable_steps WHERE run_pk = r.pk AND state IN ('pending', 'running')
            AND NOT (step = ANY(%(steps)s::text[]))),
    EXISTS (SELECT 1 FROM resumable_steps WHERE run_pk = r.pk AND state = 'running'
            AND NOT (step = ANY(%(steps)s::text[]))),
    CASE WHEN %(failures)s::boolean THEN
        (SELECT count(*) FROM resumable_steps WHERE run_pk = r.pk AND state IN ('failed', 'timeout')) END,
    CASE WHEN %(bound)s::integer > 0 THEN
        (SELECT ord FROM resumable_steps
         WHERE run_pk = r.pk AND state = 'pending' AND (remaining > 0 OR not_before IS NOT NULL)
           AND (remaining > 0 OR not_before > now())
         ORDER BY ord LIMIT 1) END,
    CASE WHEN %(bound)s::integer > 0 THEN
        (SELECT count(*) FROM (SELECT 1 FROM resumable_steps
                               WHERE run_pk = r.pk AND state = 'pending' AND remaining = 0
                                 AND (not_before IS NULL OR not_before <= now())
                               LIMIT %(bound)s) AS ready) END
FROM resumable_runs r WHERE r.pk = %(pk)s;

-- write_outcomes --
-- The rest of a completion, in one statement sent with its COMMIT: the claims taken (as
-- take_steps), the attempts finished (as finish_attempts), the events (as append_events), the run
-- stopped when the policy says so (stop_run: the run's row, touched last), and idle workers told
-- when steps became claimable.
WITH taken AS (
    UPDATE resumable_steps s SET state = 'running', worker = %(worker)s, epoch = c.epoch, not_before = NULL,
        lease_expires = now() + make_interval(secs => %(ttl)s)
    FROM unnest(%(take)s::text[], %(take_epochs)s::bigint[]) AS c(step, epoch)
    WHERE s.run_pk = %(pk)s AND s.step = ANY(%(take)s::text[]) AND s.step = c.step
    RETURNING 1
), finished AS (
    UPDATE resumable_attempts a SET status = c.status, exit_code = c.exit_code, reason = c.reason,
        finished_at = clock_timestamp(), log = c.log
    FROM unnest(%(steps)s::text[], %(ns)s::integer[], %(statuses)s::text[], %(exit_codes)s::integer[],
                %(reasons)b::text[], %(logs)b::bytea[]) AS c(step, n, status, exit_code, reason, log)
    WHERE a.run_pk = %(pk)s AND a.step = ANY(%(steps)s::text[]) AND a.step = c.step AND a.n = c.n
    RETURNING 1
), events AS (
    INSERT INTO resumable_pending_events (run_pk, tx, body)
    SELECT %(pk)s, %(tx)s, t.body FROM unnest(%(bodies)b::text[]) WITH ORDINALITY AS t(body, i) ORDER BY t.i
    RETURNING 1
), stopped AS (
    UPDATE resumable_runs SET stopping = true WHERE pk = %(pk)s AND %(stop)s::boolean
    RETURNING 1
)
SELECT CASE WHEN %(notify)s::boolean THEN pg_notify(%(channel)s, %(run)s) END;

-- claimed_rows --
-- The rows of steps whose outcome is not done, locked, to check each claim's fence (and to claim
-- again a retry due at once: what its needs made, as ready_steps says it).
SELECT s.step, s.state, s.epoch, s.failures, s.spec, s.attempt, s.needs, s.fingerprint, s.ord,
    (SELECT jsonb_object_agg(n.step, n.fingerprint -> 'artifacts') FROM resumable_steps n
     WHERE s.needs <> '{}' AND n.run_pk = s.run_pk AND n.step = ANY(s.needs)),
    (SELECT array_agg(n.step) FROM resumable_steps n
     WHERE s.needs <> '{}' AND n.run_pk = s.run_pk AND n.step = ANY(s.needs) AND n.tries > 0)
FROM resumable_steps s
WHERE s.run_pk = %(pk)s AND s.step = ANY(%(steps)s::text[])
ORDER BY s.ord
FOR UPDATE OF s;

-- downstream --
-- The steps downstream of failed ones (a failure blocks them, keep-going), with their needs and
-- states, locked.
WITH RECURSIVE down(step) AS (
    SELECT unnest(%(steps)s::text[])
    UNION
    SELECT s.step FROM resumable_steps s JOIN down ON s.needs @> ARRAY[down.step] WHERE s.run_pk = %(pk)s
)
SELECT s.step, s.needs, s.state FROM resumable_steps s JOIN down USING (step)
WHERE s.run_pk = %(pk)s ORDER BY s.ord
FOR UPDATE OF s;

-- settle_steps --
-- Outcomes other than done, as the policy settled them: pending again (a retry after its backoff,
-- in the server's clock, or handed back), failed or timed out for good, or dep_blocked.
UPDATE resumable_steps s SET state = c.state, worker = NULL, lease_expires = NULL,
    failures = coalesce(c.failures, s.failures),
    not_before = CASE WHEN c.delay IS NULL THEN s.not_before ELSE now() + make_interval(secs => c.delay) END
FROM unnest(%(steps)s::text[], %(states)s::text[], %(failures)s::integer[], %(delays)s::float8[])
    AS c(step, state, failures, delay)
WHERE s.run_pk = %(pk)s AND s.step = ANY(%(steps)s::text[]) AND s.step = c.step;

-- stale_attempts --
-- Completions the fence refused: kept with their attempt, never applied to the run.
UPDATE resumable_attempts a SET stale = c.stale, log = coalesce(c.log, a.log)
FROM unnest(%(steps)s::text[], %(ns)s::integer[], %(stales)b::jsonb[], %(logs)b::bytea[]) AS c(step, n, stale, log)
WHERE a.run_pk = %(pk)s AND a.step = ANY(%(steps)s::text[]) AND a.step = c.step AND a.n = c.n;

-- renew_leases --
-- One heartbeat renews every claim a worker still holds; returns those it holds.
WITH renewed AS (
    UPDATE resumable_steps s SET lease_expires = now() + make_interval(secs => %(ttl)s)
    FROM unnest(%(pks)s::bigint[], %(steps)s::text[], %(epochs)s::bigint[]) AS c(pk, step, epoch)
    WHERE s.run_pk = c.pk AND s.step = ANY(%(steps)s::text[]) AND s.step = c.step
      AND s.epoch = c.epoch AND s.state = 'running'
    RETURNING s.run_pk, s.step
), seen AS (
    UPDATE resumable_workers SET seen_at = now() WHERE id = %(worker)s
)
SELECT run_pk, step FROM renewed;

-- notify --
SELECT pg_notify(%(channel)s, %(payload)s);

-- saved --
-- Whether a transaction whose COMMIT lost its answer wrote its events (numbered or not yet).
SELECT 1 FROM resumable_pending_events WHERE run_pk = %(pk)s AND tx = %(tx)s
UNION ALL SELECT 1 FROM resumable_events WHERE run_pk = %(pk)s AND tx = %(tx)s LIMIT 1;

-- claim_refresh --
-- Whether to refresh the run's snapshot: the events after it still outgrow it, and no other
-- process is refreshing it (a lock of this transaction, tried, not waited for). The workers that
-- numbered events together all hear that the tail outgrew the snapshot; one of them refreshes it.
SELECT tail_bytes >= greatest(snap_bytes, %(min_tail)s)
    AND pg_try_advisory_xact_lock(%(space)s::integer, mod(pk, 2147483647)::integer)
FROM resumable_runs WHERE pk = %(pk)s;

-- refresh_snapshot --
-- A newer snapshot of the document (a pure function of the events up to its sequence number),
-- built without the run's lock; an older one never replaces a newer. The run's row is locked
-- before the snapshot's row, in the lock order above: a handle's write holds the run's row and then
-- writes the snapshot's, so a refresh that took the snapshot's row first waited for that write's
-- run row while the write waited for its snapshot row, until the server's deadlock check (a second)
-- broke the tie. When the row is held (numbering, a handle's write), nothing is stored: the next
-- numbering that finds the events outgrowing the snapshot asks again.
WITH target AS (
    SELECT pk FROM resumable_runs WHERE pk = %(pk)s FOR NO KEY UPDATE SKIP LOCKED
), snap AS (
    INSERT INTO resumable_snapshots (run_pk, seq, doc) SELECT target.pk, %(seq)s, %(doc)s FROM target
    ON CONFLICT (run_pk) DO UPDATE SET seq = excluded.seq, doc = excluded.doc
    WHERE resumable_snapshots.seq < excluded.seq
    RETURNING 1
)
UPDATE resumable_runs SET snap_seq = %(seq)s, snap_bytes = %(snap_bytes)s,
    tail_bytes = greatest(tail_bytes - %(covered)s, 0)
WHERE pk = %(pk)s AND EXISTS (SELECT 1 FROM snap);

-- lock_steps_of --
-- A write through a handle locks the step rows of the units its events touch, before the run's row.
SELECT s.step FROM resumable_steps s
WHERE s.run_pk = (SELECT pk FROM resumable_runs WHERE id = %(run)s AND archived_at IS NULL)
  AND s.step = ANY(%(steps)s::text[])
ORDER BY s.ord
FOR UPDATE OF s;

-- mark_done --
-- Steps recorded done through a handle: a claim on them is fenced off (the epoch moves on) and
-- their dependents are one need closer to ready. Returns how many were still open.
WITH done AS (
    UPDATE resumable_steps SET state = 'done', worker = NULL, lease_expires = NULL, not_before = NULL,
        epoch = epoch + 1
    WHERE run_pk = %(pk)s AND step = ANY(%(steps)s::text[]) AND state IN ('pending', 'running')
    RETURNING step, dependents
), released AS (
    UPDATE resumable_steps d SET remaining = d.remaining - n.hits
    FROM (SELECT dep AS step, count(*) AS hits FROM done, unnest(done.dependents) AS dep GROUP BY dep) AS n
    WHERE d.run_pk = %(pk)s AND d.step = n.step
)
SELECT count(*) FROM done;

-- lock_all_steps --
-- A submit: every step row of the run, locked before the run's row (the workers' lock order).
SELECT s.step, s.epoch, s.attempt, s.state, s.worker, s.lease_expires, s.lease_expires > now(), s.run_pk
FROM resumable_steps s JOIN resumable_runs r ON r.pk = s.run_pk
WHERE r.id = %(run)s AND r.archived_at IS NULL
FOR UPDATE OF s;

-- drop_steps --
DELETE FROM resumable_steps WHERE run_pk = %(pk)s;

-- insert_step --
INSERT INTO resumable_steps (run_pk, step, ord, spec, needs, remaining, state, epoch, attempt, worker,
    lease_expires, fingerprint, dependents)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s);

-- set_job --
-- The run's options as submitted; a resubmitted run no longer stops.
UPDATE resumable_runs SET job = %(job)s, stopping = false WHERE pk = %(pk)s;

-- find_run --
-- A live run's row.
SELECT pk, seq, status, job, stopping, snap_bytes, tail_bytes FROM resumable_runs
WHERE id = %s AND archived_at IS NULL;

-- find_run_locked --
-- A live run's row, locked (FOR NO KEY UPDATE: inserts that reference it, taking KEY SHARE, go on).
SELECT pk, seq, status, job, stopping, snap_bytes, tail_bytes FROM resumable_runs
WHERE id = %s AND archived_at IS NULL
FOR NO KEY UPDATE;

-- lock_run --
-- A live run's row locked, for a write through a handle.
SELECT pk FROM resumable_runs WHERE id = %s AND archived_at IS NULL FOR NO KEY UPDATE;

-- events_after --
-- The run's numbered events after a sequence number, in order.
SELECT seq, body FROM resumable_events WHERE run_pk = %s AND seq > %s ORDER BY seq;

-- snapshot_of --
-- The run's stored snapshot.
SELECT seq, doc FROM resumable_snapshots WHERE run_pk = %s;

-- save_events --
-- A handle's events, numbered under the run's lock, and the run's row moved on.
WITH events AS (
    INSERT INTO resumable_events (run_pk, seq, tx, body)
    SELECT %(pk)s, %(first)s + t.i - 1, CASE WHEN t.i = 1 THEN %(tx)s END, t.body
    FROM unnest(%(bodies)b::text[]) WITH ORDINALITY AS t(body, i)
), run AS (
    UPDATE resumable_runs SET seq = %(seq)s, status = %(status)s, updated_at = %(updated)s, changed_at = now(),
        tail_bytes = %(tail)s
    WHERE pk = %(pk)s
)
SELECT pg_notify(%(channel)s, %(run)s);

-- save_events_and_snapshot --
-- As save_events, with a new snapshot of the document.
WITH events AS (
    INSERT INTO resumable_events (run_pk, seq, tx, body)
    SELECT %(pk)s, %(first)s + t.i - 1, CASE WHEN t.i = 1 THEN %(tx)s END, t.body
    FROM unnest(%(bodies)b::text[]) WITH ORDINALITY AS t(body, i)
), snap AS (
    INSERT INTO resumable_snapshots (run_pk, seq, doc) VALUES (%(pk)s, %(seq)s, %(doc)s)
    ON CONFLICT (run_pk) DO UPDATE SET seq = excluded.seq, doc = excluded.doc
), run AS (
    UPDATE resumable_runs SET seq = %(seq)s, status = %(status)s, updated_at = %(updated)s, changed_at = now(),
        tail_bytes = %(tail)s, snap_seq = %(seq)s, snap_bytes = %(snap_bytes)s
    WHERE pk = %(pk)s
)
SELECT pg_notify(%(channel)s, %(run)s);

-- save_events_if_current --
-- A handle's events on a run without a job, written at once on the document this process holds:
-- only if the run is still where it was (its last number is %(expect)s, it is live, no job, no
-- pending events), else nothing is written and the writer catches up and tries again. The UPDATE
-- takes the run's row lock and rechecks its condition on the row's latest version, so the events
-- are numbered as under lock_run; everything travels with the COMMIT, in one round trip.
WITH run AS (
    UPDATE resumable_runs SET seq = %(seq)s, status = %(status)s, updated_at = %(updated)s, changed_at = now(),
        tail_bytes = tail_bytes + %(size)s
    WHERE pk = %(pk)s AND seq = %(expect)s AND archived_at IS NULL AND job IS NULL
      AND NOT EXISTS (SELECT 1 FROM resumable_pending_events WHERE run_pk = %(pk)s)
    RETURNING pk, tail_bytes, snap_bytes
), events AS (
    INSERT INTO resumable_events (run_pk, seq, tx, body)
    SELECT run.pk, %(first)s + t.i - 1, CASE WHEN t.i = 1 THEN %(tx)s END, t.body
    FROM run, unnest(%(bodies)b::text[]) WITH ORDINALITY AS t(body, i)
)
SELECT tail_bytes, snap_bytes, pg_notify(%(channel)s, %(run)s) FROM run;

-- save_events_and_snapshot_if_current --
-- As save_events_if_current, with a new snapshot of the document.
WITH run AS (
    UPDATE resumable_runs SET seq = %(seq)s, status = %(status)s, updated_at = %(updated)s, changed_at = now(),
        tail_bytes = 0, snap_seq = %(seq)s, snap_bytes = %(snap_bytes)s
    WHERE pk = %(pk)s AND seq = %(expect)s AND archived_at IS NULL AND job IS NULL
      AND NOT EXISTS (SELECT 1 FROM resumable_pending_events WHERE run_pk = %(pk)s)
    RETURNING pk, tail_bytes, snap_bytes
), events AS (
    INSERT INTO resumable_events (run_pk, seq, tx, body)
    SELECT run.pk, %(first)s + t.i - 1, CASE WHEN t.i = 1 THEN %(tx)s END, t.body
    FROM run, unnest(%(bodies)b::text[]) WITH ORDINALITY AS t(body, i)
), snap AS (
    INSERT INTO resumable_snapshots (run_pk, seq, doc) SELECT run.pk, %(seq)s, %(doc)s FROM run
    ON CONFLICT (run_pk) DO UPDATE SET seq = excluded.seq, doc = excluded.doc
)
SELECT tail_bytes, snap_bytes, pg_notify(%(channel)s, %(run)s) FROM run;

-- create_run --
-- A run's row, unless a live run of that id has one.
INSERT INTO resumable_runs (id) VALUES (%s) ON CONFLICT (id) WHERE archived_at IS NULL DO NOTHING;

-- archive_run --
-- A finished run set aside (gc; init over a finished run): its id is free again.
UPDATE resumable_runs SET archived_at = now() WHERE pk = %s;

-- new_run --
-- A fresh row for a run's id (after the old one was archived).
INSERT INTO resumable_runs (id) VALUES (%s) RETURNING pk;

-- last_pending --
-- The last pending event's id (a watcher's change token moves with it).
SELECT max(id) FROM resumable_pending_events WHERE run_pk = %s;

-- put_blob --
-- A value stored by content; the same bytes are stored once.
INSERT INTO resumable_blobs (run_pk, ref, data) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING;

-- get_blob --
-- A stored value of a live run.
SELECT b.data FROM resumable_blobs b JOIN resumable_runs r ON r.pk = b.run_pk
WHERE r.id = %s AND r.archived_at IS NULL AND b.ref = %s;

-- live_runs --
-- Every live run with a history, by id.
SELECT id, created_at FROM resumable_runs WHERE archived_at IS NULL AND seq > 0 ORDER BY id;

-- finished_runs --
-- Live runs that are over (gc's candidates).
SELECT id FROM resumable_runs WHERE archived_at IS NULL AND status IN ('done', 'aborted') ORDER BY id;

-- changed_at --
-- When a run's row last changed (a run whose document has no updatedAt).
SELECT extract(epoch FROM changed_at) FROM resumable_runs WHERE pk = %s;

-- forget_workers --
-- Workers stopped before the cutoff.
DELETE FROM resumable_workers WHERE stopped_at < to_timestamp(%s);

-- delete_run --
-- A live run and everything of it (cascade).
DELETE FROM resumable_runs WHERE id = %s AND archived_at IS NULL RETURNING seq;

-- run_states --
-- The status of each of these live runs.
SELECT id, status FROM resumable_runs WHERE archived_at IS NULL AND id = ANY(%s);

-- step_counts --
-- How many steps of a live run are in each state.
SELECT s.state, count(*) FROM resumable_steps s JOIN resumable_runs r ON r.pk = s.run_pk
WHERE r.id = %s AND r.archived_at IS NULL GROUP BY s.state ORDER BY s.state;

-- attempts --
-- Every attempt on a live run's steps (of one step, when %(step)s is not NULL), oldest first.
SELECT a.step, a.n, a.epoch, a.worker, a.host, a.pid, a.started_at, a.finished_at, a.status, a.exit_code,
    a.reason, a.stale, a.log_path, length(a.log)
FROM resumable_attempts a JOIN resumable_runs r ON r.pk = a.run_pk
WHERE r.id = %(run)s AND r.archived_at IS NULL AND (%(step)s::text IS NULL OR a.step = %(step)s)
ORDER BY a.started_at, a.step;

-- attempt_log --
-- A step's attempt and its stored log (attempt %(n)s, or the last when NULL).
SELECT a.n, a.log FROM resumable_attempts a JOIN resumable_runs r ON r.pk = a.run_pk
WHERE r.id = %(run)s AND r.archived_at IS NULL AND a.step = %(step)s AND (%(n)s::integer IS NULL OR a.n = %(n)s)
ORDER BY a.n DESC LIMIT 1;

-- step_states --
-- Every step's state and attempts since submitted, in the job's order.
SELECT step, state, tries FROM resumable_steps WHERE run_pk = %s ORDER BY ord;

-- snapshot_seq --
-- The stored snapshot's sequence number.
SELECT seq FROM resumable_snapshots WHERE run_pk = %s;

-- event_bytes --
-- The size of a run's numbered events in a range (what a new snapshot covers).
SELECT coalesce(sum(length(body)), 0) FROM resumable_events WHERE run_pk = %s AND seq > %s AND seq <= %s;

-- register_worker --
-- A worker starting (again).
INSERT INTO resumable_workers (id, host, pid) VALUES (%s, %s, %s)
ON CONFLICT (id) DO UPDATE SET seen_at = now(), stopped_at = NULL;

-- unregister_worker --
-- A worker stopping.
UPDATE resumable_workers SET stopped_at = now() WHERE id = %s;

-- live_claims --
-- The runner lease: how many of a run's steps workers hold under unexpired leases, and on which hosts.
SELECT count(*), string_agg(DISTINCT w.host, ', ')
FROM resumable_steps s JOIN resumable_runs r ON r.pk = s.run_pk
LEFT JOIN resumable_workers w ON w.id = s.worker
WHERE r.id = %s AND r.archived_at IS NULL AND s.state = 'running' AND s.lease_expires > now();

-- hold_runner_lease --
-- Who holds the runner lease (information for a refusal; the lock itself is the advisory lock).
INSERT INTO resumable_runner_leases (run_id, pid, host, started_at) VALUES (%s, %s, %s, %s)
ON CONFLICT (run_id) DO UPDATE SET pid = excluded.pid, host = excluded.host, started_at = excluded.started_at;

-- try_runner_lock --
SELECT pg_try_advisory_lock(%s);

-- runner_unlock --
SELECT pg_advisory_unlock(%s);

-- runner_lease --
SELECT pid, host, started_at FROM resumable_runner_leases WHERE run_id = %s;

-- drop_runner_lease --
DELETE FROM resumable_runner_leases WHERE run_id = %s AND pid = %s;

-- runner_lock_held --
-- Whether a session holds a run's runner lock, read from pg_locks without taking it. A bigint
-- advisory key shows as its high half in classid, its low half in objid, with objsubid 1.
SELECT 1 FROM pg_locks
WHERE locktype = 'advisory' AND granted AND objsubid = 1
  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND classid = %s::bigint::oid AND objid = %s::bigint::oid
LIMIT 1;

-- workers_holding --
-- The workers holding unexpired claims on a run's steps: the steps, and when the last lease ends.
SELECT w.id, w.host, w.pid, array_agg(s.step ORDER BY s.ord),
    extract(epoch FROM max(s.lease_expires) - now())::float8
FROM resumable_steps s JOIN resumable_runs r ON r.pk = s.run_pk
JOIN resumable_workers w ON w.id = s.worker
WHERE r.id = %s AND r.archived_at IS NULL AND s.state = 'running' AND s.lease_expires > now()
GROUP BY w.id, w.host, w.pid ORDER BY w.host, w.pid;

-- workers_of_run --
-- The registered workers that have not stopped and made an attempt on a run.
SELECT w.id, w.host, w.pid FROM resumable_workers w
WHERE w.stopped_at IS NULL AND EXISTS (
    SELECT 1 FROM resumable_attempts a JOIN resumable_runs r ON r.pk = a.run_pk
    WHERE r.id = %s AND r.archived_at IS NULL AND a.worker = w.id)
ORDER BY w.host, w.pid;
