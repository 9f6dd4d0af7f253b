"""The recurring-run guard (``resumable guard``): runs one pass of a recurring job (cron, a systemd
timer, a loop) under the OmniNode cron-closeout protocol, fixed: a kernel lock so passes never
overlap, a pass counter with an optional cap, a circuit breaker after consecutive failures, a
per-pass log, and a state file OmniNode's cron-closeout shell readers still understand.

Modules: ``outcome`` (exit status / output word -> outcome, pure), ``state`` (the state file),
``lock`` (flock + lock info), ``history`` (the event log), ``passrun`` (running the command, signal
forwarding), ``protocol`` (one invocation, reset), ``status`` (``guard status``), ``cli``.
"""
