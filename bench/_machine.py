"""The machine block every recorded benchmark result carries (platform, cores, device,
versions, load average), in one place for the bench scripts that record a learning run."""

from __future__ import annotations

import os
import platform


def machine(packages: tuple[str, ...] = ("brainstate", "optax")) -> dict:
    """``{"platform", "cpus", "device", "versions", "load"}`` of this process.

    Examples
    --------
    >>> sorted(machine(()))  # doctest: +SKIP
    ['cpus', 'device', 'load', 'platform', 'versions']
    """
    import jax

    import etp_viz  # noqa: F401 - its version quirks loaded

    versions = {"python": platform.python_version(), "jax": jax.__version__}
    for name in packages:
        versions[name] = __import__(name).__version__
    return {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "device": str(jax.devices()[0]),
        "versions": versions,
        "load": os.getloadavg(),
    }
