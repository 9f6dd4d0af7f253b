-- resumable's PostgreSQL store, schema version 1.
--
-- A run is a row of resumable_runs plus its history in resumable_events (one row per event, a
-- gap-free sequence per run, the source of truth, as the journal is in a runs directory); the
-- document is rebuilt from the latest resumable_snapshots row and the events after it. Every
-- write holds the run's row lock (SELECT ... FOR UPDATE) while it appends its events.
--
-- resumable_steps is the work queue of a submitted job: one row per step, claimed by workers with
-- FOR UPDATE SKIP LOCKED and held under a lease (lease_expires, in the server's clock) whose epoch
-- is the fencing token of the claim. resumable_attempts keeps every attempt a worker made,
-- including the stale ones whose completion was refused, with its log.

CREATE TABLE resumable_runs (
    pk          bigserial PRIMARY KEY,
    id          text        NOT NULL,
    seq         bigint      NOT NULL DEFAULT 0,   -- the last event's sequence number
    status      text,                              -- the document's status (listings, claims)
    updated_at  text,                              -- the document's updatedAt (listings)
    created_at  timestamptz NOT NULL DEFAULT now(),
    changed_at  timestamptz NOT NULL DEFAULT now(),
    archived_at timestamptz,                       -- set by gc and by init over a finished run
    snap_seq    bigint      NOT NULL DEFAULT 0,
    snap_bytes  bigint      NOT NULL DEFAULT 0,
    tail_bytes  bigint      NOT NULL DEFAULT 0,    -- bytes of events after the snapshot
    job         jsonb,                             -- a submitted job's run options
    stopping    boolean     NOT NULL DEFAULT false, -- a step failed for good: claim nothing more
    open_steps  integer     NOT NULL DEFAULT 0      -- steps pending or running: 0 = the run is over
);
CREATE UNIQUE INDEX resumable_runs_live_id ON resumable_runs (id) WHERE archived_at IS NULL;

CREATE TABLE resumable_events (
    run_pk bigint NOT NULL REFERENCES resumable_runs (pk) ON DELETE CASCADE,
    seq    bigint NOT NULL,
    tx     text,                                   -- the writing transaction (ambiguous commits)
    body   text   NOT NULL,                        -- the event as compact JSON, key order kept
    PRIMARY KEY (run_pk, seq)
);

CREATE TABLE resumable_snapshots (
    run_pk bigint PRIMARY KEY REFERENCES resumable_runs (pk) ON DELETE CASCADE,
    seq    bigint NOT NULL,
    doc    text   NOT NULL
);

CREATE TABLE resumable_blobs (
    run_pk bigint NOT NULL REFERENCES resumable_runs (pk) ON DELETE CASCADE,
    ref    text   NOT NULL,
    data   bytea  NOT NULL,
    PRIMARY KEY (run_pk, ref)
);

CREATE TABLE resumable_steps (
    run_pk        bigint  NOT NULL REFERENCES resumable_runs (pk) ON DELETE CASCADE,
    step          text    NOT NULL,
    ord           integer NOT NULL,               -- the job's own order: claims follow it
    spec          jsonb   NOT NULL,               -- how to run it (command, cwd, env, timeouts...)
    needs         text[]  NOT NULL,
    remaining     integer NOT NULL,               -- needs not yet done or skipped
    state         text    NOT NULL,               -- pending running done skipped failed timeout dep_blocked
    tries         integer NOT NULL DEFAULT 0,     -- attempts made since the job was submitted
    failures      integer NOT NULL DEFAULT 0,     -- failed attempts since then (retries)
    not_before    timestamptz,                    -- a retry's backoff
    attempt       integer NOT NULL DEFAULT 0,     -- the last attempt's number
    epoch         bigint  NOT NULL DEFAULT 0,     -- the fencing token: bumped by every claim and expiry
    worker        text,
    lease_expires timestamptz,
    PRIMARY KEY (run_pk, step)
);
CREATE INDEX resumable_steps_ready ON resumable_steps (run_pk, ord) WHERE state = 'pending' AND remaining = 0;
CREATE INDEX resumable_steps_leased ON resumable_steps (run_pk, lease_expires) WHERE state = 'running';
CREATE INDEX resumable_steps_needs ON resumable_steps USING gin (needs);

CREATE TABLE resumable_attempts (
    run_pk      bigint      NOT NULL REFERENCES resumable_runs (pk) ON DELETE CASCADE,
    step        text        NOT NULL,
    n           integer     NOT NULL,
    epoch       bigint      NOT NULL,
    worker      text        NOT NULL,
    host        text        NOT NULL,
    pid         integer     NOT NULL,
    started_at  timestamptz NOT NULL,
    finished_at timestamptz,
    status      text        NOT NULL,             -- running done failed timeout interrupted expired
    exit_code   integer,
    reason      text,
    stale       jsonb,                             -- a completion refused by the fence: what it said
    log_path    text,
    log         bytea,
    PRIMARY KEY (run_pk, step, n)
);

CREATE TABLE resumable_workers (
    id         text        PRIMARY KEY,
    host       text        NOT NULL,
    pid        integer     NOT NULL,
    started_at timestamptz NOT NULL DEFAULT now(),
    seen_at    timestamptz NOT NULL DEFAULT now(),
    stopped_at timestamptz
);

CREATE TABLE resumable_runner_leases (
    run_id     text PRIMARY KEY,
    pid        integer NOT NULL,
    host       text    NOT NULL,
    started_at text    NOT NULL
);
