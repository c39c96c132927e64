"""Flux's side of bench/submit.sh, through its own Python API in a running
instance (run under `flux start`):

  flux_submit.py throughput N    N jobspecs of `true`, submitted asynchronously, held
  flux_submit.py latency K       K submits, one at a time: median ms to the
                                 job's `start` event and to its `finish`
"""

import statistics
import subprocess
import sys
import time

import flux
import flux.job
from flux.job import JobspecV1


def main():
    mode, n = sys.argv[1], int(sys.argv[2])
    h = flux.Flux()
    spec = JobspecV1.from_command(["true"])
    if mode == "throughput":
        # Held (urgency 0), as slurp's are held behind a dependency: only
        # submission is timed. At most 256 in flight: more exhausts the
        # reactor's descriptors here.
        start = time.perf_counter()
        window = []
        for _ in range(n):
            window.append(flux.job.submit_async(h, spec, urgency=0))
            if len(window) >= 256:
                window.pop(0).get_id()
        for f in window:
            f.get_id()
        elapsed = time.perf_counter() - start
        print(f"{n / elapsed:.0f}")
        subprocess.run(["flux", "cancel", "--all", "--quiet"], check=False, capture_output=True)
    else:
        samples, ends = [], []
        for _ in range(n):
            sent = time.perf_counter()
            jobid = flux.job.submit(h, spec)
            flux.job.event_wait(h, jobid, "start")
            samples.append((time.perf_counter() - sent) * 1000)
            flux.job.event_wait(h, jobid, "finish")
            ends.append((time.perf_counter() - sent) * 1000)
            flux.job.result(h, jobid)
        print(f"{statistics.median(samples):.3f} {statistics.median(ends):.3f}")


main()
