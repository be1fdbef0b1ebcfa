"""Build hook: the wheel and the sdist carry the explorer's front end.

Everything else about the package is in ``pyproject.toml``. This file only makes ``build_py``
(which every wheel build runs, editable ones included) and ``sdist`` build ``js/`` with npm
into ``etp_viz/explorer/static/`` first, so the bundle is package data:

* a checkout (``js/package.json`` present): ``npm ci`` when ``js/node_modules`` is missing or
  older than the lockfile, then ``npm run build``;
* an unpacked sdist (no ``js/``, the bundle already built): nothing to do, no npm needed;
* neither npm nor a built bundle: the build fails, naming Node.js >= 18.

``ETP_VIZ_SKIP_JS=1`` skips the npm step (a bundle must then already exist).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

ROOT = Path(__file__).resolve().parent
JS = ROOT / "js"
STATIC = ROOT / "etp_viz" / "explorer" / "static"
BUNDLES = ("widget.js", "widget.standalone.js")
STATIC_PACKAGE = "etp_viz.explorer.static"
NO_NPM = (
    "etp_viz: building the explorer front end (js/) needs npm, from Node.js >= 18, and no built "
    "bundle exists in etp_viz/explorer/static/. Install Node.js >= 18 (https://nodejs.org, or "
    "`apt-get install nodejs npm`) and build again, or install from an sdist or a wheel, which "
    "carry the built bundle."
)


def bundle_present() -> bool:
    return all((STATIC / name).is_file() for name in BUNDLES)


def run_npm(*args: str) -> None:
    print("etp_viz: npm " + " ".join(args) + " (js/)", flush=True)
    subprocess.run(["npm", *args], cwd=JS, check=True)


def build_front_end() -> None:
    """Build ``js/`` into ``etp_viz/explorer/static/`` (see the module docstring)."""
    if not (JS / "package.json").is_file() or os.environ.get("ETP_VIZ_SKIP_JS") == "1":
        if not bundle_present():
            raise SystemExit(NO_NPM)
        return
    if shutil.which("npm") is None:
        if not bundle_present():
            raise SystemExit(NO_NPM)
        print("etp_viz: npm not found; shipping the front end already built in static/")
        return
    modules = JS / "node_modules"
    if not modules.is_dir() or (JS / "package-lock.json").stat().st_mtime > modules.stat().st_mtime:
        run_npm("ci", "--no-audit", "--no-fund", "--loglevel=error")
    run_npm("run", "--silent", "build")
    if not bundle_present():
        raise SystemExit(f"etp_viz: `npm run build` in js/ wrote no {BUNDLES} into {STATIC}")


class BuildPyWithFrontEnd(build_py):
    def run(self):
        build_front_end()
        # static/ holds no Python; in a clean clone it did not exist when the packages were
        # found, and setuptools warns about data in a directory missing from `packages`.
        if STATIC_PACKAGE not in self.packages:
            self.packages.append(STATIC_PACKAGE)
        super().run()


class SdistWithFrontEnd(sdist):
    def run(self):
        build_front_end()  # before the file list is made: the bundle is package data
        super().run()


setup(cmdclass={"build_py": BuildPyWithFrontEnd, "sdist": SdistWithFrontEnd})
