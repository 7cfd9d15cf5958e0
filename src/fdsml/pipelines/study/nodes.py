"""The node of the ``study`` pipeline: run the named study file's units (reusing complete ones), then its page, results and figure."""

from __future__ import annotations

from typing import Any

from matplotlib.figure import Figure

from fdsml.errors import UserFixableError
from fdsml.config import env_parameters
from fdsml.tuning.study_runner import parse_study_settings, run_study, study_path, study_report
from fdsml.tuning.study_figure import draw_figure
from fdsml.tuning.study_trend import draw_trend, trend_results
from fdsml.tuning.study_file import read_study


class StudyUnitsFailed(UserFixableError, RuntimeError):
    """Some units of a study raised: their trials are FAIL, and the next run of the study runs them again."""


def run_study_file(study_params: dict[str, Any]) -> tuple[str, dict, Figure]:
    """Run every unit of ``params:study``'s study file not yet complete (none with ``study.draw_only``); its page
    (Markdown), results (JSON) and figure (the trend's when it has one; one without axes, written as no file, when
    the file has neither), drawn from the complete units."""
    settings = parse_study_settings(study_params)
    study = read_study(study_path(settings))
    results, failed, missing = run_study(study, settings, env_parameters(settings.conf_source, study.env))
    if failed:
        raise StudyUnitsFailed(f"study {settings.name}: unit(s) {', '.join(failed)} failed (their errors are logged above); run the same command again to rerun them")
    if not results:
        raise StudyUnitsFailed(f"study {settings.name}: no unit is complete in its storage, so there is nothing to draw; run it without study.draw_only")
    page, found = study_report(study, settings, results, missing)
    figure = draw_trend(trend_results(results, study), study) if study.trend else draw_figure(study, found["rows"])
    return page, found, figure
