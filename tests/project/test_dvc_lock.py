"""The committed dvc.lock matches the code and configuration (a fast check, no stage runs): in a fresh copy
`dvc status` finds no code, configuration or parameter dependency of any stage changed since the lock."""

from tests.project.dvc_lock import describe, fresh_stale_stages, stale_entries


def test_dvc_lock_matches_the_code_and_configuration(tmp_path):
    stale = fresh_stale_stages(tmp_path)
    assert not stale, describe(stale)


def test_only_code_configuration_and_parameters_count_as_stale():
    status = {
        "pretrain": [
            {"changed deps": {
                "src/fdsml/training": "modified",
                "data/02_intermediate/fractal_codes.parquet": "deleted",  # another stage's output: the copy has no data
                "conf/base/parameters_pretrain.yml": {"pretrain": "modified"},
            }},
            {"changed outs": {"data/06_models/pretrained_model.pt": "not in cache"}},
        ],
        "report": [{"changed deps": {"data/08_reporting/report_inputs.md": "deleted"}}, {"changed outs": {"x": "deleted"}}],
        "export": "always changed",
    }  # fmt: skip
    stale = stale_entries(status, produced={"data/02_intermediate/fractal_codes.parquet", "data/08_reporting/report_inputs.md"})
    assert stale == {"pretrain": ["src/fdsml/training (modified)", "conf/base/parameters_pretrain.yml:pretrain (modified)"]}
    message = describe(stale)
    assert "stage pretrain: src/fdsml/training (modified)" in message and "dvc.lock" in message.splitlines()[-1]
