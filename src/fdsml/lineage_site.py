"""The project's lineage as a static kedro-viz site on the team's S3-protocol DVC remote.

``python -m fdsml.lineage_site`` runs ``kedro viz build`` (the site in ``build/``) and copies it
beside the DVC cache in the remote's bucket, under ``lineage/``, with the remote's endpoint and
credentials as DVC reads them (``.dvc/config`` and ``.dvc/config.local``): whoever can
``dvc push`` can publish, and a colleague opens the printed address without the project.
"""

from __future__ import annotations

import argparse
import logging
import mimetypes
import os
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

from fdsml.config import ConfigError

logger = logging.getLogger(__name__)

SITE_FOLDER = "build"  # where `kedro viz build` writes
DEFAULT_PREFIX = "lineage"


def build_site(project: Path) -> Path:
    """Run ``kedro viz build`` in ``project``; returns the site's folder."""
    kedro = shutil.which("kedro", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    subprocess.run([kedro or "kedro", "viz", "build"], cwd=project, check=True, stdout=subprocess.DEVNULL)
    site = project / SITE_FOLDER
    if not (site / "index.html").is_file():
        raise RuntimeError(f"`kedro viz build` wrote no {site / 'index.html'}")
    return site


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
    args = parser.parse_args(argv)
    settings = remote_settings(args.project, args.remote)
    url = publish(build_site(args.project), settings, args.prefix)
    print(url)


if __name__ == "__main__":
    main()
