"""Fixtures: a real slurp instance per test, started in a fresh directory.

The slurp binary is ``$SLURP`` (what ``cargo test`` passes), else the
repository's ``target/debug/slurp``, else ``slurp`` on PATH.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def slurp_binary() -> str:
    env = os.environ.get("SLURP")
    if env:
        return env
    built = Path(__file__).resolve().parents[2] / "target" / "debug" / "slurp"
    if built.is_file():
        return str(built)
    found = shutil.which("slurp")
    if found is None:
        pytest.skip("no slurp binary: set SLURP or build it (cargo build)")
    return found


class Instance:
    def __init__(self, directory: Path, cores: int) -> None:
        self.slurp = slurp_binary()
        self.dir = directory
        env = dict(os.environ)
        for key in ("SLURP_SOCKET", "SLURP_SCOPE", "SLURP_RUN_DIR", "SLURP_DEPTH"):
            env.pop(key, None)
        # Tasks that call slurp find this one.
        env["PATH"] = f"{Path(self.slurp).parent}:{env.get('PATH', '')}"
        self.env = env
        out = subprocess.run(
            [self.slurp, "start", "--cores", str(cores)],
            cwd=directory,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        self.run = out.stdout.strip()
        self.run_dir = directory / ".slurp" / "runs" / self.run

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.slurp, *args], cwd=self.dir, env=self.env, capture_output=True, text=True
        )

    def close(self) -> None:
        if (self.run_dir / "socket").exists():
            self.cli("close", "--wait", "--run", self.run)


@pytest.fixture
def instance(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    for key in ("SLURP_SOCKET", "SLURP_SCOPE"):
        monkeypatch.delenv(key, raising=False)
    inst = Instance(tmp_path, cores=2)
    monkeypatch.setenv("PATH", inst.env["PATH"])
    yield inst
    inst.close()
