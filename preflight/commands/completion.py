"""preflight completion: shell completion scripts (click's machinery) and the values they complete."""

from __future__ import annotations

from typing import List

import click

from preflight.errors import ExitCode

COMPLETE_VARIABLE = "_PREFLIGHT_COMPLETE"


def main(command, shell: str) -> int:
    from click.shell_completion import get_completion_class

    from preflight.files.output import emit

    script = get_completion_class(shell)(command, {}, "preflight", COMPLETE_VARIABLE).source()
    emit(script)
    return ExitCode.OK


def values(kind: str, incomplete: str) -> List:
    """Completions of one kind: "rules" (ids and their dotted prefixes), "explain" (rules and known failures),
    "workloads", "gpus" (catalog ids). A broken rule file completes nothing rather than failing the shell."""
    from click.shell_completion import CompletionItem

    try:
        from preflight.engine import loader

        ruleset = loader.load(capacity=kind in ("workloads", "gpus"), failures=kind == "explain")
    except Exception:  # completion must never print a traceback into the user's shell
        return []
    if kind in ("rules", "explain"):
        names = set(ruleset.rules)
        names |= {rule.rsplit(".", 1)[0] for rule in ruleset.rules if "." in rule}  # prefixes select groups
        if kind == "explain":
            names |= set(getattr(ruleset, "failures", {}) or {})
        helps = {rule.id: rule.title for rule in ruleset.rules.values()}
    elif kind == "workloads":
        names, helps = set(ruleset.workloads), {w.id: w.title for w in ruleset.workloads.values()}
    else:
        names, helps = set(ruleset.gpus), {g.id: g.name for g in ruleset.gpus.values()}
    return [CompletionItem(name, help=helps.get(name)) for name in sorted(names) if name.startswith(incomplete)]


# --- the command line ----------------------------------------------------------------------------------------

def build() -> click.Command:
    @click.command("completion")
    @click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
    def completion(shell) -> int:
        """Print a shell completion script: commands, options, rule ids (--select, --ignore, explain), workloads and
        catalog GPUs. bash: eval "$(preflight completion bash)" in ~/.bashrc; zsh: in ~/.zshrc; fish:
        preflight completion fish > ~/.config/fish/completions/preflight.fish"""
        return main(click.get_current_context().find_root().command, shell)
    return completion
