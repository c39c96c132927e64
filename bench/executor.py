"""The Python client's executor against a fresh slurp instance (issue 19):
N command futures submitted, then all awaited.

  python3 bench/executor.py [N] [SLURP]     (defaults: 5000, target/release/slurp)
"""

import os
import sys
import tempfile
import time
from pathlib import Path

repo = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(repo / "python"))
from slurp_client import SlurpExecutor  # noqa: E402

n = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
slurp = sys.argv[2] if len(sys.argv) > 2 else str(repo / "target" / "release" / "slurp")
os.chdir(tempfile.mkdtemp())
with SlurpExecutor(start=True, start_args=["--cores", "2", "--output", "none"], slurp=slurp) as ex:
    t = time.perf_counter()
    futures = [ex.command("true") for _ in range(n)]
    submitted = time.perf_counter() - t
    assert all(f.result() == 0 for f in futures)
    done = time.perf_counter() - t
print(f"{n} command futures: submitted in {submitted:.2f} s ({n / submitted:.0f}/s), all ended in {done:.2f} s")
