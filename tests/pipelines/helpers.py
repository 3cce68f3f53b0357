"""Write small pipeline files into a temp dir for tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HOMELAB = (ROOT / "conf" / "homelab.toml").read_text()


def homelab_copy(tmp: Path, *, replace: dict[str, str] | None = None, extra: str = "",
                 conf: str = "homelab.toml") -> Path:
    """conf/homelab.toml (or another shipped file of conf/, ``conf``) with its ledger in ``tmp``
    (and optional text replacements)."""
    base = HOMELAB if conf == "homelab.toml" else (ROOT / "conf" / conf).read_text()
    text = base.replace('source = "../data/homelab.sqlite"', f'source = "{tmp / "homelab.sqlite"}"')
    for old, new in (replace or {}).items():
        assert old in text, old
        text = text.replace(old, new)
    text = text.replace('"quality/', f'"{ROOT / "conf" / "quality"}/')
    path = tmp / "pipeline.toml"
    path.write_text(text + extra)
    return path


def generate(tmp: Path, items: int, start: int = 0) -> Path:
    out = tmp / f"dump-{start}.jsonl"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "generate_demo_data.py"), "--items", str(items),
                    "--start", str(start), str(out)], check=True, capture_output=True)
    return out
