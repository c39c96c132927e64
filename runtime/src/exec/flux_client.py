# slurp's one Flux client for a run inside a Flux instance (runtime/src/exec/flux_jobs.rs).
#
# Run as `flux python THIS`. JSON lines on stdin:
#   {"id": N, "spec": JOBSPEC}   submit, then follow the job's eventlog
#   {"cancel": N}                cancel request N's job (now, or once it has an id)
#   {"close": true}              end (slurp's run is over)
# and on stdout, per request:
#   {"id": N, "jobid": "f..."} | {"id": N, "error": "..."}      submitted, or refused
#   {"id": N, "start": true}                                    its shells started
#   {"id": N, "exception": TYPE, "note": "...", "severity": S}   an exception was raised
#   {"id": N, "status": WAITSTATUS}                             it finished
#   {"id": N, "end": true}                                      its eventlog is complete
# At the end of stdin (slurp ended, however it ended) the jobs still running
# are cancelled, so nothing of slurp's outlives it in the instance.
import json
import os
import sys

import flux
import flux.constants
import flux.job

h = flux.Flux()
jobs = {}  # request id -> job id
cancel_wanted = set()
live = set()  # request ids whose eventlog has not ended
buf = b""


def reply(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def on_event(future, rid):
    event = future.get_event()
    if event is None:
        live.discard(rid)
        reply({"id": rid, "end": True})
        return
    name, ctx = event.name, event.context
    if name == "start":
        reply({"id": rid, "start": True})
    elif name == "exception":
        reply(
            {
                "id": rid,
                "exception": ctx.get("type", ""),
                "note": ctx.get("note", ""),
                "severity": ctx.get("severity", 0),
            }
        )
    elif name == "finish":
        reply({"id": rid, "status": ctx.get("status", 0)})
    elif name == "clean":
        live.discard(rid)
        reply({"id": rid, "end": True})
        try:
            future.cancel(stop=True)
        except (OSError, TypeError):
            pass


def on_submit(future, rid):
    try:
        jobid = future.get_id()
    except OSError as e:
        live.discard(rid)
        reply({"id": rid, "error": str(e)})
        return
    jobs[rid] = jobid
    reply({"id": rid, "jobid": str(jobid.f58)})
    flux.job.event_watch_async(h, jobid).then(on_event, rid)
    if rid in cancel_wanted:
        flux.job.cancel_async(h, jobid, "cancelled by slurp")


def cancel(rid):
    if rid in jobs:
        flux.job.cancel_async(h, jobs[rid], "cancelled by slurp")
    else:
        cancel_wanted.add(rid)


def on_stdin(_handle, _watcher, _fd, _revents, _args):
    global buf
    data = os.read(0, 1 << 16)
    if not data:
        for rid in list(live):
            if rid in jobs:
                try:
                    flux.job.cancel(h, jobs[rid], "slurp ended")
                except OSError:
                    pass
        h.reactor_stop()
        return
    buf += data
    while b"\n" in buf:
        line, buf = buf.split(b"\n", 1)
        req = json.loads(line)
        if "spec" in req:
            rid = req["id"]
            live.add(rid)
            flux.job.submit_async(h, json.dumps(req["spec"])).then(
                on_submit, rid
            )
        elif "cancel" in req:
            cancel(req["cancel"])
        elif "close" in req:
            h.reactor_stop()
            return


watcher = h.fd_watcher_create(0, on_stdin, events=flux.constants.FLUX_POLLIN)
watcher.start()
reply({"ready": True})
h.reactor_run()
