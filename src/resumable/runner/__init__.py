"""The runner: `resumable run` executes a job as a resumable DAG of steps.

Modules, by concept: ``jobfile`` (job file and checkpoint-run flags -> Job), ``fingerprint`` (what a step
depends on, artifact checks), ``retry`` (pure backoff policy), ``process`` (process groups, timeouts,
reaping), ``ownership`` (one live runner per run), ``explain`` (why a step runs or skips),
``scheduler`` (the DAG loop), ``display`` (what the user sees) and ``cli`` (the click command).
"""
