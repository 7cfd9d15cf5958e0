"""The lineage site on the team's S3 remote: built, published, fetched back over HTTP and drawn by a browser.

The remote is the S3-compatible server of tests/s3_remote.py (moto on loopback) behind a
DVC remote configured as the team does (endpoint committed, credentials in ``.dvc/config.local``).
"""

import json
import re
import subprocess
import sys
import urllib.error
import urllib.request

import pytest
from kedro.framework.project import pipelines
from kedro.framework.startup import bootstrap_project

from fdsml.lineage_site import DEFAULT_PREFIX

from tests.browser import CHROMIUM_FLAGS, INSTALL_HINT, lineage_graph_drawn, screenshot
from tests.dependencies import require_program
from tests.s3_remote import BUCKET, ENV, run_as_team, use_s3_remote
from tests.servers import stop_group
from tests.support import ROOT, copy_tracked

pytestmark = pytest.mark.slow


def readable_by_anyone(bucket: str, prefix: str) -> str:
    """The bucket policy of docs/lineage-site.md: anyone may read the site's objects, nothing else."""
    return json.dumps({
        "Version": "2012-10-17",
        "Statement": [{
            "Sid": "ReadTheLineageSite",
            "Effect": "Allow",
            "Principal": "*",
            "Action": "s3:GetObject",
            "Resource": f"arn:aws:s3:::{bucket}/{prefix}/*",
        }],
    })


@pytest.fixture(scope="module")
def published(s3, tmp_path_factory):
    """A copy of the project with the team's S3 remote, after ``python -m fdsml.lineage_site``; the printed address."""
    endpoint, client = s3
    client.put_bucket_policy(Bucket=BUCKET, Policy=readable_by_anyone(BUCKET, DEFAULT_PREFIX))
    project = copy_tracked(tmp_path_factory.mktemp("project"))
    run_as_team(["git", "init", "-q"], project)
    use_s3_remote(project, endpoint)
    done = subprocess.run(
        [sys.executable, "-m", "fdsml.lineage_site"], cwd=project, env=ENV | {"PYTHONPATH": str(project / "src")},
        capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return project, done.stdout.strip().splitlines()[-1]


def _get(url: str) -> tuple[str, bytes]:
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.headers["Content-Type"], response.read()


def test_the_site_is_in_the_bucket_beside_the_dvc_cache(published, s3):
    project, url = published
    _, client = s3
    listed = client.list_objects_v2(Bucket=BUCKET, Prefix=f"{DEFAULT_PREFIX}/")["Contents"]
    keys = {entry["Key"].removeprefix(f"{DEFAULT_PREFIX}/") for entry in listed}
    built = {p.relative_to(project / "build").as_posix() for p in (project / "build").rglob("*") if p.is_file()}
    assert keys == built and {"index.html", "api/main"} <= keys
    assert url == f"{s3[0]}/{BUCKET}/{DEFAULT_PREFIX}/index.html"


def test_the_dvc_cache_stays_private(published, s3):
    endpoint, client = s3
    client.put_object(Bucket=BUCKET, Key="cache/files/md5/00/probe", Body=b"cached")
    with pytest.raises(urllib.error.HTTPError, match="403"):
        _get(f"{endpoint}/{BUCKET}/cache/files/md5/00/probe")


def test_the_site_comes_back_over_http_with_every_pipeline(published):
    _, url = published
    kind, page = _get(url)
    assert kind.startswith("text/html") and b"./assets/index-" in page
    kind, listing = _get(url.replace("index.html", "api/main"))
    bootstrap_project(ROOT)
    assert kind == "application/json"
    assert set(pipelines) <= {entry["id"] for entry in json.loads(listing)["pipelines"]}


def _rendered_dom(url: str, folder) -> str:
    chromium = require_program("chromium", INSTALL_HINT)
    browser = subprocess.Popen(
        [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={folder / 'dom-profile'}", "--dump-dom", url],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True,
    )
    try:
        dom, _ = browser.communicate(timeout=120)
    finally:
        stop_group(browser)
    return dom


def drawn_labels(dom: str) -> set[str]:
    """The labels of the graph's drawn nodes (tasks, datasets, parameters) in kedro-viz's rendered page."""
    return set(re.findall(r'class="pipeline-node__text"[^>]*>([^<]+)<', dom))


def test_a_browser_draws_the_published_lineage_with_every_node_on_screen(published, tmp_path):
    _, url = published
    drawn, measured = lineage_graph_drawn(screenshot(url, tmp_path))
    assert drawn, f"the published site looks blank ({tmp_path / 'page.png'}): {measured}"
    bootstrap_project(ROOT)
    missing = {node.name for node in pipelines["__default__"].nodes} - drawn_labels(_rendered_dom(url, tmp_path))
    assert not missing, f"nodes not on the page drawn from {url}: {sorted(missing)}"
