"""The commands of the command line, one module each, and the table that names them.

Each module holds what its command does (a plain function that takes the values it needs and returns an exit code)
and, in ``build()``, its click declaration: its own options, their checks, and the call. Options several commands
share are declared once in ``click_options``, which also turns them into one ``CheckOptions`` value
(``options``). ``preflight.cli`` assembles the group from COMMANDS and turns what a command raises into exit codes.

Modules: ``check``, ``smoke`` (the active test), ``facts``, ``rules`` (and ``explain``), ``diagnose``, ``plan``,
``fix``, ``exec``, ``slurm``, ``serve``, ``fleet``, ``config``, ``schema``, ``completion``. Beside them:
``pipeline`` is the one path from options to a judged report (prepare, observe, judge) that check, exec, fix, slurm,
serve, fleet and config show go through; ``site`` applies the site configuration to the options; ``options`` holds
the options values; ``common`` what the rest share (loading rules with their warnings, a saved snapshot or the
probes, keeping reports).
"""

from __future__ import annotations

from typing import Dict, NamedTuple, Optional, Tuple


class Command(NamedTuple):
    """One command: the module that declares it (``build`` there, or ``builder``; imported only when the command
    runs or a listing needs it), its one-line summary, the two or three examples that end its --help (a test parses
    each with the real parser), and, for a command that checks, its built-in --profile and --expect-gpus (the
    defaults ``config show --command`` reports)."""

    module: str
    summary: str
    examples: Tuple[str, ...]
    builder: str = "build"
    profile: Optional[str] = None
    expect_gpus: Optional[str] = None


# Every command, once: help, completion, the command list and each checking command's defaults come from here. slurm
# admits nodes and serve watches one, so both check the node profile; check, exec and fix check a job's environment.
COMMANDS: Dict[str, Command] = {
    "check": Command("check", "Check this machine and environment; a fix for every problem.", (
        "preflight check",
        "preflight check --profile node --format json --output report.json",
        "preflight check --python ~/envs/yolov9/bin/python --workload yolov9-c --batch 16"),
        profile="train", expect_gpus=None),
    "completion": Command("completion", "Print a shell completion script (bash, zsh, fish).", (
        "preflight completion bash",
        "preflight completion fish")),
    "config": Command("config", "Show or validate the site configuration; where each setting comes from.", (
        "preflight config show", "preflight config show --host gpu01 --gpu 'NVIDIA H100 80GB HBM3'",
        "preflight config validate /etc/preflight/config.toml")),
    "diagnose": Command("diagnose", "Name what went wrong in a failed run's log, and how to fix it.", (
        "preflight diagnose train.log", "preflight diagnose --format json runs/exp/train.log")),
    "exec": Command("exec", "Check, then run a command in preflight's place (container entrypoints).", (
        "preflight exec -- python train_dual.py --batch-size 16 --data data/coco.yaml",
        "preflight exec --retry-timeout 5m -- true"),
        profile="train", expect_gpus=None),
    "explain": Command("rules", "Show one rule or known failure in full: what, why, source, fix.", (
        "preflight explain gpu.health", "preflight explain cuda.oom"), builder="build_explain"),
    "facts": Command("facts", "Print what the probes see (JSON), or a block for bug reports.", (
        "preflight facts --output facts.json", "preflight facts --format text")),
    "fix": Command("fix", "Check, run the plan's pip steps in the job's interpreter, check again.", (
        "preflight fix --dry-run",
        "preflight fix --python ~/envs/yolov9/bin/python --requirements requirements.txt --yes"),
        profile="train", expect_gpus=None),
    "fleet": Command("fleet", "Many nodes' reports and snapshots at once: who fails, why, drift.", (
        "preflight fleet /shared/preflight/ --profile node",
        "preflight fleet reports/ --format html --output fleet.html",
        "preflight fleet http://gpu01:10480 http://gpu02:10480 --baseline gpu01")),
    "plan": Command("plan", "Will a workload fit, and on which GPU.", (
        "preflight plan --workload yolov9-e --batch 64 --gpus 8 --gpu h100",
        "preflight plan --workload gelan-c --labels datasets/mine/labels --gpu-memory 6GiB",
        "preflight plan --slurm-comment 'preflight: workload=gelan-c batch=64' --slurm-gres gpu:h200:1")),
    "rules": Command("rules", "List the rules (the defaults plus any --rules).", (
        "preflight rules --profile node", "preflight rules --format markdown")),
    "schema": Command("schema", "Print the JSON Schema of a document preflight writes or reads.", (
        "preflight schema", "preflight schema report --output report.schema.json")),
    "serve": Command("serve", "Check every interval; serve /healthz, /metrics, /report.", (
        "preflight serve --listen 0.0.0.0:10480 --profile node --interval 5m",
        "preflight serve --profile node --nfd-output /etc/kubernetes/node-feature-discovery/features.d/preflight"),
        profile="node", expect_gpus=None),
    "smoke": Command("smoke", "Run short real work on the GPUs and judge it: the active test.", (
        "preflight smoke --python /opt/conda/envs/yolov9/bin/python",
        "preflight smoke --device cpu --timeout 120",
        "preflight smoke --workload gelan-c --batch 16 --img 640 --repo ~/yolov9")),
    "slurm": Command("slurm", "Slurm health check and prolog: drain a failing node, resume it.", (
        "preflight slurm --report-dir /shared/preflight --syslog", "preflight slurm --dry-run --node gpu01",
        "preflight slurm --prolog"),
        profile="node", expect_gpus="auto"),
}

# The commands that check, whose built-in defaults config show can report.
CHECKING_COMMANDS = [name for name, entry in COMMANDS.items() if entry.profile is not None]
