"""One module per command: each exposes a plain function that takes an options value and returns an exit code.

``preflight.cli`` declares the click options, builds the options values
(``preflight.commands.options``) and dispatches here. Modules:

- ``check``: evaluate the rules, render the report;
- ``facts``: collect (or list) the facts;
- ``rules``: list the rules, and ``explain`` one;
- ``diagnose``: read a failed run's log;
- ``plan``: size a workload on many GPUs (the plan table is made here);
- ``exec``: check, then become the training command (a container entrypoint);
- ``slurm``: check, then drain or resume this Slurm node;
- ``serve``, ``fleet``, ``config`` (show), ``schema``, ``completion``.

``pipeline`` is the one path from options to a judged report (prepare,
observe, judge) that check, exec, slurm, serve, fleet and config show go
through; ``site`` applies the site configuration to the options; ``common``
holds what the rest share: loading rules with their warnings, and a saved
snapshot or the probes.
"""
