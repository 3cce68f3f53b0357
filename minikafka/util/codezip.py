"""Python packages zipped for Spark's Python workers (``--py-files``, or an engine's artifacts)."""

from __future__ import annotations

import importlib.util
import zipfile
from collections.abc import Iterable
from pathlib import Path


def zip_packages(names: Iterable[str], target: Path) -> list[str]:
    """Write the ``.py`` sources of the top-level packages (or modules) ``names`` into the zip
    ``target``; return the names that cannot be found (nothing is written for them)."""
    missing = []
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in sorted(set(names)):
            spec = importlib.util.find_spec(name)
            if spec is None:
                missing.append(name)
            elif spec.submodule_search_locations:
                root = Path(list(spec.submodule_search_locations)[0])
                for file in sorted(root.rglob("*.py")):
                    zf.write(file, str(Path(name) / file.relative_to(root)))
            elif spec.origin and spec.origin.endswith(".py"):
                zf.write(spec.origin, f"{name}.py")
    return missing
