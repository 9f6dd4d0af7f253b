-- resumable's PostgreSQL store, schema version 4: each step row names its dependents.
--
-- A completion makes each dependent of the steps it records one need closer to ready. Found by
-- searching the run's rows for those whose needs hold the step (the GIN index on needs), the
-- planner, whose statistics of a run submitted moments ago are stale, combined that search with
-- a scan of every row of the run, once per step recorded: a few milliseconds of the server per
-- completion, growing with the run. Each row now carries its dependents (the steps of the job
-- that need it, set by the submit alongside needs), so a completion reaches them by primary key.

ALTER TABLE resumable_steps ADD COLUMN dependents text[] NOT NULL DEFAULT '{}';

UPDATE resumable_steps s SET dependents = d.steps
FROM (SELECT n.run_pk, need, array_agg(n.step ORDER BY n.ord) AS steps
      FROM resumable_steps n, unnest(n.needs) AS need GROUP BY n.run_pk, need) AS d
WHERE s.run_pk = d.run_pk AND s.step = d.need;
