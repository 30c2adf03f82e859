"""preflight smoke: short, bounded, real work on the GPUs in the job's interpreter (the active test), judged by
the smoke rules; its options, their checks (root and a checkout others can change), and the rules it runs.

``check --smoke`` takes the same options (SMOKE) and the same checks (``options_from``)."""

from __future__ import annotations

import os
from typing import Any, Dict, Optional, Tuple

import click

from preflight.commands import common, pipeline
from preflight.commands.click_options import (COLORS, CONFIG, KEEP, OUTPUT, PROBE, WORKLOAD, check_options, complete,
                                              complete_files, complete_folders, declare, format_names, kept, setting,
                                              shown, warn)
from preflight.commands.options import SmokeOptions

DEADLINE = 60.0  # the active test's default deadline: a few seconds per GPU plus torch's import
FIT_BUDGET = 240.0  # with --repo the measured fit's own budget, added to the default deadline (building a real
# GELAN or YOLOv9 model and a few steps at batch 16 takes minutes on a CPU, tens of seconds on a GPU)

SMOKE = [
    click.option("--device", "smoke_device", type=click.Choice(["auto", "cuda", "cpu"]), default="auto",
                 show_default=True, help="Where the active test runs: auto takes the GPUs on a machine with an "
                 "NVIDIA driver (a failure there is a finding), else the CPU; cpu runs its logic without a GPU."),
    click.option("--gpus", "smoke_gpus", metavar="LIST", help="CUDA indices to test, e.g. 0,1 [default: every "
                 "visible GPU]."),
    click.option("--level", "smoke_level", type=click.Choice(["quick", "standard", "long"]), default="standard",
                 show_default=True, help="How deep: quick runs the memory test over a tenth of free memory, the "
                 "matrix products and the training step; standard every test over half; long every test over 90% "
                 "of free memory, each per-GPU test three times (as DCGM's r1-r3)."),
    click.option("--iterations", "smoke_iterations", type=click.IntRange(1, 100), metavar="N",
                 help="Run each per-GPU test N times and keep the worst result [default: the level's: 1, long 3]."),
    click.option("--memory-share", "smoke_memory_share", type=float, metavar="FRACTION",
                 help="Share of each GPU's free memory the memory test writes and reads back [default: the "
                      "level's: quick 0.1, standard 0.5, long 0.9]."),
    click.option("--repo", "smoke_repo", metavar="PATH", shell_complete=complete_folders,
                 help="A YOLOv9 checkout: with --workload, measure that workload's training steps there (its own "
                      "models/ and loss) beside plan's estimate. Nothing in it is changed, but its code runs, as "
                      "you: as root, a checkout with any file or folder another user could change is refused unless "
                      "--trust-repo."),
    click.option("--cfg", "smoke_cfg", metavar="PATH",
                 help="With --repo: the model definition to build, as the trainer's --cfg takes it (relative to "
                      "the checkout) [default: models/detect/WORKLOAD.yaml]."),
    click.option("--hyp", "smoke_hyp", metavar="PATH",
                 help="With --repo: the hyperparameter file the loss reads, as the trainer's --hyp takes it "
                      "[default: data/hyps/hyp.scratch-high.yaml]."),
    click.option("--data", "smoke_data", metavar="PATH",
                 help="With --repo: the dataset YAML whose nc (number of classes) the model is built with, as the "
                      "trainer's --data [default: 80 classes, COCO's]."),
    click.option("--trust-repo", "smoke_trust_repo", is_flag=True,
                 help="Run --repo's code as root even though another user could change some of it (as git's "
                      "safe.directory: whoever can change it decides what root runs)."),
]


def refuse_code_others_can_change(values: Dict[str, Any]) -> None:
    """Root runs --repo's Python and evaluates its model definition: only a checkout no one but root (or the
    user who ran sudo) can change, unless --trust-repo."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return
    from preflight.files import trusted_code

    read = [values.get("smoke_cfg") or "models/detect/%s.yaml" % values["workload"],
            values.get("smoke_hyp") or "data/hyps/hyp.scratch-high.yaml"] + \
        ([values["smoke_data"]] if values.get("smoke_data") else [])
    problem = trusted_code.first_untrusted(values["smoke_repo"], read)
    if problem:
        raise click.BadParameter("%s, and the checkout's code would run as root; run smoke as that user, or add "
                                 "--trust-repo if you trust whoever can change it" % problem, param_hint="--repo")


def options_from(values: Dict[str, Any], command: str) -> Optional[SmokeOptions]:
    """The active test's options from the command line's values (smoke's, or check's with --smoke), checked; None
    when the command does not run it (check without --smoke)."""
    if command != "smoke" and not values.get("smoke"):
        return None
    gpus: Tuple[int, ...] = ()
    if values.get("smoke_gpus"):
        try:
            gpus = tuple(int(part) for part in values["smoke_gpus"].split(",") if part.strip())
        except ValueError:
            raise click.BadParameter("a list of CUDA indices such as 0,1, got %r" % values["smoke_gpus"],
                                     param_hint="--gpus")
    from preflight.probes.smoke import LEVELS

    level = LEVELS[values.get("smoke_level") or "standard"]
    share = values.get("smoke_memory_share")
    share = level["memory_share"] if share is None else share
    if not 0 < share <= 0.95:
        raise click.BadParameter("must be more than 0 and at most 0.95 (the test must leave the GPU room), got %s"
                                 % share, param_hint="--memory-share")
    if values.get("smoke_repo") and not values.get("workload"):
        raise click.UsageError("--repo measures a workload: give --workload too (e.g. --workload gelan-c)")
    for name in ("cfg", "hyp", "data"):
        if values.get("smoke_" + name) and not values.get("smoke_repo"):
            raise click.UsageError("--%s is a file of the checkout the fit measures in: give --repo PATH too" % name)
    if values.get("smoke_repo") and not values.get("smoke_trust_repo"):
        refuse_code_others_can_change(values)
    if command == "smoke" and values.get("workload") and not values.get("smoke_repo"):
        raise click.UsageError("--workload is measured in a YOLOv9 checkout (its models/ and loss): give --repo "
                               "PATH, e.g. --repo ~/yolov9 (preflight plan estimates it without one)")
    return SmokeOptions(values.get("smoke_device") or "auto", gpus, share, values.get("smoke_repo"), level["tests"],
                        values.get("smoke_iterations") or level["iterations"], values.get("smoke_cfg"),
                        values.get("smoke_hyp"), values.get("smoke_data"), FIT_BUDGET,
                        DEADLINE + (FIT_BUDGET if values.get("smoke_repo") else 0.0))


def build() -> click.Command:
    @click.command("smoke")
    @click.option("--format", "output_format", type=click.Choice(format_names("report")), default="text", show_default=True,
                  help="As check: text, json (preflight.report/1), jsonl, junit, prometheus, nfd, npd.")
    @OUTPUT
    @click.option("-q", "--quiet", is_flag=True, help="Show only failures, warnings and errors.")
    @click.option("--color", type=COLORS, default="auto", show_default=True,
                  help="Colour the text report (auto: only on a terminal, never when NO_COLOR is set).")
    @declare(KEEP)
    @check_options(PROBE, WORKLOAD, SMOKE, [click.option("--strict", is_flag=True, help="Fail (exit 1) on warnings too."),
                                            setting("select", shell_complete=complete("rules")),
                                            setting("ignore", shell_complete=complete("rules")), CONFIG],
                   active_test=options_from)
    def smoke(options, output_format, output, quiet, color, report_dir, syslog) -> int:
        """Run short, bounded, real work on the GPUs in the job's interpreter and judge it: memory patterns, matrix
        products against a CPU reference (FP32, TF32, FP16, BF16), throughput against the node's other GPUs of the
        same model and NVIDIA's datasheet for the model, a training step with AMP and cuDNN, peer access and an all-reduce over the local GPUs (against their NVLink or PCIe links); with
        --workload and --repo, that workload's training steps measured in the user's YOLOv9 checkout.

        \b
        Everything runs in --python's interpreter (else this one) with its torch, in its own process group, killed
        at --timeout (60 s by default; with --repo 300 s, 240 of them the measured fit's own budget); a test that
        finishes is judged even if the deadline cuts a later one.
        --select and --ignore choose among the smoke rules, and so which tests run (--select smoke.memory runs
        only the memory test). It loads the GPUs: slurm and serve never run it by default.
        Exit codes: 0 passed, 1 a check failed, 2 bad usage.
        """
        from preflight.probes.smoke import TEST_OF_RULE, not_smoke, rules_for, tests_for

        # --select and --ignore choose among smoke's rules, and so which of its tests run.
        chosen = options.select if "select" in options.given and options.select else ("smoke",)
        others = not_smoke(chosen)
        if others:
            raise click.BadParameter("%s: smoke runs only its own rules (%s)" % (
                ", ".join(others), ", ".join(["smoke.torch"] + list(TEST_OF_RULE))), param_hint="--select")
        # The level's tests, unless --select names rules itself.
        rules = rules_for(chosen, options.ignore, options.smoke.tests if chosen == ("smoke",) else ())
        if not rules:
            raise click.BadParameter("no smoke test is left to run after --select and --ignore",
                                     param_hint="--select")
        options = options.replace(select=("smoke.torch",) + rules, given=options.given | {"select"},
                                  smoke=options.smoke._replace(tests=tests_for(rules)))
        return common.show_report(pipeline.check(options, warn), shown(output_format, output, quiet, color), warn,
                                  kept(report_dir, syslog))
    return smoke
