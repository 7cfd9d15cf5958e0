"""Does dvc.lock still describe the code and configuration? `dvc status` in a fresh copy, read stage by stage.

A fresh copy holds the files git tracks and no data, so every output reads as missing and every
dependency produced by another stage as deleted: those say nothing about the lock. What is left,
a code or configuration file (or a parameter key) whose hash or value differs from the one the
lock recorded, means the committed dvc.lock no longer belongs to the code: outputs pulled from
the remote were made by other code.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import yaml

from tests.fresh_clone import ENV, fresh_clone

REFRESH = "`make lock` (dvc.yaml's code entries written, then dvc repro of the embedded default, about 10 minutes on 2 cores), then commit dvc.yaml and dvc.lock"


def stage_outputs(folder: Path) -> set[str]:
    """Every path a stage of dvc.yaml writes (outs, metrics, plots)."""
    stages = yaml.safe_load((folder / "dvc.yaml").read_text())["stages"]
    return {
        entry if isinstance(entry, str) else next(iter(entry))
        for stage in stages.values()
        for kind in ("outs", "metrics", "plots")
        for entry in stage.get(kind, [])
    }


def stale_entries(status: dict, produced: set[str]) -> dict[str, list[str]]:
    """Per stage, the code and configuration dependencies (``path``) and parameters (``file:key``) that
    ``dvc status --json`` finds changed, leaving out outputs and dependencies other stages produce."""
    stale = {}
    for stage, reports in status.items():
        entries = []
        for report in reports if isinstance(reports, list) else []:
            for path, state in (report.get("changed deps", {}) if isinstance(report, dict) else {}).items():
                if isinstance(state, dict):  # a parameters file: key -> state
                    entries += [f"{path}:{key} ({how})" for key, how in state.items()]
                elif path not in produced:
                    entries.append(f"{path} ({state})")
        if entries:
            stale[stage] = entries
    return stale


def stale_stages(folder: Path) -> dict[str, list[str]]:
    """:func:`stale_entries` of ``dvc status --json`` run in ``folder`` (a git repository with dvc.yaml and dvc.lock)."""
    result = subprocess.run(["dvc", "status", "--json"], cwd=folder, env=ENV, capture_output=True, text=True)
    if result.returncode:
        raise RuntimeError(f"dvc status failed in {folder}:\n{result.stdout}\n{result.stderr}")
    return stale_entries(json.loads(result.stdout or "{}"), stage_outputs(folder))


def fresh_stale_stages(folder: Path) -> dict[str, list[str]]:
    """:func:`stale_stages` in a fresh copy of the repository made in ``folder``."""
    fresh_clone(folder)
    subprocess.run(["git", "init", "-q"], cwd=folder, check=True)
    return stale_stages(folder)


def describe(stale: dict[str, list[str]]) -> str:
    """The message a failing check prints: each stale stage and what changed, then the command that refreshes the lock."""
    lines = [f"stage {stage}: {', '.join(entries)}" for stage, entries in stale.items()]
    return "dvc.lock no longer matches the code and configuration:\n" + "\n".join(lines) + f"\nRefresh it: {REFRESH}"
