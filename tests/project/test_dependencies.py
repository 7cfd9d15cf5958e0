"""A missing package or server skips its test on a developer's machine and fails it in CI (``CI=true``)."""

import pytest

from tests.dependencies import missing, require_file, require_module, require_program


@pytest.mark.parametrize("ci, outcome", [("true", pytest.fail.Exception), ("", pytest.skip.Exception), ("false", pytest.skip.Exception)])
def test_a_missing_dependency_skips_except_in_ci(monkeypatch, ci, outcome):
    monkeypatch.setenv("CI", ci)
    with pytest.raises(outcome, match="apt-get install nothing-here"):
        missing("apt-get install nothing-here")


def test_a_present_program_or_file_is_returned_and_an_absent_one_is_missing(monkeypatch, tmp_path):
    monkeypatch.setenv("CI", "true")
    (tmp_path / "tool").write_text("#!/bin/sh\n")
    (tmp_path / "tool").chmod(0o755)
    assert require_program("tool", "hint", folder=tmp_path) == str(tmp_path / "tool")
    assert require_file(tmp_path / "tool", "hint") == tmp_path / "tool"
    with pytest.raises(pytest.fail.Exception, match="no-such-tool: apt-get"):
        require_program("no-such-tool", "no-such-tool: apt-get install it", folder=tmp_path)
    with pytest.raises(pytest.fail.Exception, match="absent"):
        require_file(tmp_path / "absent", "absent")
    assert require_module("json", "hint").__name__ == "json"
    with pytest.raises(pytest.fail.Exception, match="pip install"):
        require_module("no_such_module_here", "pip install it")
