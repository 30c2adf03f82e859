"""One module per command: each exposes a plain function that takes an options value and returns an exit code.

``preflight.cli`` declares the click options, builds the options values
(``preflight.commands.options``) and dispatches here. Modules:

- ``check``: evaluate the rules, render the report;
- ``facts``: collect (or list) the facts;
- ``rules``: list the rules, and ``explain`` one;
- ``diagnose``: read a failed run's log;
- ``plan``: size a workload on many GPUs;
- ``exec``: check, then become the training command (a container entrypoint);
- ``slurm``: check, then drain or resume this Slurm node.

``common`` holds what several of them share: loading rules, loading a saved
snapshot or probing, attaching a workload.
"""
