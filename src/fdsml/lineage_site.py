"""The project's lineage as a static kedro-viz site on the team's S3-protocol DVC remote.

``python -m fdsml.lineage_site`` runs ``kedro viz build`` (the site in ``build/``) and copies it
beside the DVC cache in the remote's bucket, under ``lineage/``, with the remote's endpoint and
credentials as DVC reads them (``.dvc/config`` and ``.dvc/config.local``): whoever can
``dvc push`` can publish, and a colleague opens the printed address without the project.

The site is built from configuration without secrets: from ``conf/base`` (or ``--env``'s environment
over it), never ``conf/local``, where a team keeps its credentials; and every file of its graph
passes through :func:`fdsml.credentials.masked`, so a URL's password in any environment reaches no page.
"""

from __future__ import annotations

import argparse
import json
import logging
import mimetypes
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from fdsml.config import ConfigError
from fdsml.credentials import masked

logger = logging.getLogger(__name__)

SITE_FOLDER = "build"  # where `kedro viz build` writes
BASE_ENV = "base"  # the configuration the site shows by default: conf/base alone
LOCAL_ENV = "local"  # each person's own settings and credentials: never on a page
DEFAULT_PREFIX = "lineage"


def build_site(project: Path, env: str = BASE_ENV) -> Path:
    """Run ``kedro viz build`` in ``project`` on environment ``env`` (never ``conf/local``), credentials masked in
    every file; returns the site's folder."""
    if env == LOCAL_ENV:
        raise ConfigError("--env local: conf/local holds each person's credentials and is never published; choose another environment")
    kedro = shutil.which("kedro", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    environment = os.environ | {"KEDRO_ENV": env}  # `kedro viz build` has no --env; without one Kedro adds conf/local
    subprocess.run([kedro or "kedro", "viz", "build"], cwd=project, check=True, stdout=subprocess.DEVNULL, env=environment)
    site = project / SITE_FOLDER
    if not (site / "index.html").is_file():
        raise RuntimeError(f"`kedro viz build` wrote no {site / 'index.html'}")
    for path in (path for path in (site / "api").rglob("*") if path.is_file()):
        graph = json.loads(path.read_text(encoding="utf-8"))
        if _masked_strings(graph) != graph:
            path.write_text(json.dumps(_masked_strings(graph)), encoding="utf-8")
    return site


def _masked_strings(value: Any) -> Any:
    """A JSON value with every string in it masked (:func:`fdsml.credentials.masked`), its structure kept."""
    if isinstance(value, str):
        return masked(value)
    if isinstance(value, dict):
        return {key: _masked_strings(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_masked_strings(item) for item in value]
    return value


def remote_settings(project: Path, remote: str | None) -> dict:
    """The DVC remote ``remote`` (default: the project's default remote) as DVC configures it, local settings included."""
    from dvc.repo import Repo

    with Repo(str(project)) as repo:
        config = repo.config
        name = remote or config["core"].get("remote")
        if not name:
            raise ConfigError("no DVC remote given and none is the default: pass --remote NAME or `dvc remote default NAME`")
        if name not in config["remote"]:
            raise ConfigError(f"--remote {name}: no such DVC remote; `dvc remote list` shows the configured ones")
        settings = dict(config["remote"][name])
    if urlsplit(settings["url"]).scheme != "s3":
        raise ConfigError(f"DVC remote {name!r} ({settings['url']}) is not an S3-protocol remote (s3://bucket/path)")
    return settings


def content_type(path: Path) -> str:
    """The Content-Type a browser needs; kedro-viz's API responses are JSON files without a suffix."""
    guessed, _ = mimetypes.guess_type(path.name)
    return guessed or "application/json"


def site_url(settings: dict, prefix: str) -> str:
    """The address of the published ``index.html``: path-style under the remote's endpoint, or AWS's own."""
    bucket = urlsplit(settings["url"]).netloc
    endpoint = settings.get("endpointurl")
    if endpoint:
        return f"{endpoint.rstrip('/')}/{bucket}/{prefix}/index.html"
    return f"https://{bucket}.s3.amazonaws.com/{prefix}/index.html"


def publish(site: Path, settings: dict, prefix: str = DEFAULT_PREFIX) -> str:
    """Copy every file of ``site`` to ``s3://<remote's bucket>/<prefix>/``; returns the site's address.

    Files go one by one, index.html last, so a reader never gets a new index over old assets.
    """
    import s3fs

    fs = s3fs.S3FileSystem(
        key=settings.get("access_key_id"),
        secret=settings.get("secret_access_key"),
        endpoint_url=settings.get("endpointurl"),
        client_kwargs={"region_name": settings["region"]} if settings.get("region") else {},
    )
    bucket = urlsplit(settings["url"]).netloc
    files = sorted((p for p in site.rglob("*") if p.is_file()), key=lambda p: p.relative_to(site) == Path("index.html"))
    for path in files:
        fs.put_file(str(path), f"{bucket}/{prefix}/{path.relative_to(site).as_posix()}", ContentType=content_type(path))
    return site_url(settings, prefix)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--remote", help="DVC remote to publish to (default: the project's default remote)")
    parser.add_argument("--prefix", default=DEFAULT_PREFIX, help=f"folder in the remote's bucket (default: {DEFAULT_PREFIX})")
    parser.add_argument("--project", type=Path, default=Path.cwd(), help="the Kedro project (default: here)")
    parser.add_argument("--env", default=BASE_ENV, help=f"the configuration environment shown (default: {BASE_ENV}; never conf/local)")
    args = parser.parse_args(argv)
    settings = remote_settings(args.project, args.remote)
    url = publish(build_site(args.project, args.env), settings, args.prefix)
    print(url)


if __name__ == "__main__":
    main()
