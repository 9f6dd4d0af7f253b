"""The runner: `resumable run` executes a job as a resumable DAG of steps.

Modules, by concept. Reading a job: ``jobfile`` (a TOML job file -> Job: tables, keys, defaults),
``jobtoml`` (the TOML text -> a document), ``jobmodel`` (Step and Job), ``joblocate`` (file and
line of every problem), ``families`` (a family's parameters and their values: lists, ranges,
matrices, files), ``templates`` (``{name}`` in a step's fields, quoted for the shell),
``expand`` (families made into steps, their needs and fan-ins), ``jobgraph`` (inputs resolved,
cycles), ``jobpython`` and ``jobbuild`` (a job built in Python), ``jobflags`` (checkpoint-run's
``--step`` flags), ``jobcache`` (a parsed job file kept). Running it: ``session`` (one ``resumable
run``), ``explain`` (why a step runs or skips), ``fingerprint`` (what a step depends on),
``scheduler`` (the DAG loop), ``process`` (process groups, timeouts, reaping), ``verdict`` (the kept
re-run answer), ``freshness`` (whether a run is up to date with its job), ``display`` and
``familyview`` (what the user sees).
"""
