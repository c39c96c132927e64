"""Measures a live slurp instance from outside (bench/submit.sh runs it).

  submit_client.py throughput SOCKET N [held]   N submits pipelined on one connection
  submit_client.py latency SOCKET K             K submits on an idle instance: median
                                                ms to the start event, and to the end
                                                of the task (`true`: spawned and exited)

Raw protocol, one connection, so what is measured is the instance, not a
client library. Prints one number: tasks/s, or the median latency in ms.
"""

import json
import socket
import statistics
import sys
import threading
import time


def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    return s, s.makefile("rb")


def throughput(path, n, held):
    s, f = connect(path)
    prefix = "task gate: sleep 600\n" if held else ""
    after = " after=gate" if held else ""
    if held:
        s.sendall((json.dumps({"id": 0, "op": "submit", "text": prefix}) + "\n").encode())
        json.loads(f.readline())
    lines = b"".join(
        (json.dumps({"id": i + 1, "op": "submit", "text": f"task t{i}{after}: true"}) + "\n").encode()
        for i in range(n)
    )
    start = time.perf_counter()
    sender = threading.Thread(target=s.sendall, args=(lines,))
    sender.start()
    ok = 0
    for _ in range(n):
        reply = json.loads(f.readline())
        ok += reply["ok"] is True
    elapsed = time.perf_counter() - start
    sender.join()
    assert ok == n, f"{n - ok} submits refused"
    if held:
        s.sendall(b'{"id":-1,"op":"cancel","tasks":["gate"]}\n')
        json.loads(f.readline())
    print(f"{n / elapsed:.0f}")


def latency(path, k):
    s, f = connect(path)
    w, wf = connect(path)
    w.sendall(b'{"id":0,"op":"watch"}\n')
    json.loads(wf.readline())
    samples, ends = [], []
    for i in range(k):
        name = f"lat{i}"
        sent = time.perf_counter()
        s.sendall((json.dumps({"id": i, "op": "submit", "text": f"task {name}: true"}) + "\n").encode())
        while True:
            e = json.loads(wf.readline())
            if e.get("event") == "start" and e.get("task") == name:
                samples.append((time.perf_counter() - sent) * 1000)
                break
        json.loads(f.readline())
        # Idle again: this one ended before the next is sent.
        while True:
            e = json.loads(wf.readline())
            if e.get("task") == name and e.get("state") == "succeeded":
                ends.append((time.perf_counter() - sent) * 1000)
                break
    print(f"{statistics.median(samples):.3f} {statistics.median(ends):.3f}")


if __name__ == "__main__":
    mode, path = sys.argv[1], sys.argv[2]
    if mode == "throughput":
        throughput(path, int(sys.argv[3]), len(sys.argv) > 4 and sys.argv[4] == "held")
    else:
        latency(path, int(sys.argv[3]))
