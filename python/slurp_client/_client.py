"""A connection to a live slurp instance (docs/protocol.md).

One UNIX socket, JSON lines both ways. A reader thread matches replies to
requests by id, so any number of requests (a thousand ``wait``s) can be in
flight at once on one connection.
"""

from __future__ import annotations

import fcntl
import itertools
import json
import os
import socket
import threading
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

PROTOCOL_VERSION = 1


class SlurpError(Exception):
    """The instance refused a request.

    ``code`` is the protocol's error code (``invalid_workflow``,
    ``unknown_task``, ``closed``, ...); ``diagnostic`` the text slurp
    prints for a file with the same mistake, when there is one.
    """

    def __init__(self, code: str, message: str, diagnostic: str | None = None):
        super().__init__(diagnostic or message)
        self.code = code
        self.message = message
        self.diagnostic = diagnostic


class InstanceGone(SlurpError):
    """The connection ended: the run is over (or it does not take requests
    from this user)."""

    def __init__(self) -> None:
        super().__init__(
            "gone",
            "the instance closed the connection: its run ended, or it takes "
            "no requests from this user",
        )


@dataclass(frozen=True)
class TaskState:
    """A task as the instance reports it."""

    task: str
    state: str
    attempts: int
    #: The exit status its end stands for (``slurp wait``'s): 0 for success,
    #: the task's own, 124 for a time limit, 128+N for signal N; ``None``
    #: while it has not ended.
    exit: int | None = None

    @property
    def ok(self) -> bool:
        return self.state == "succeeded"

    @classmethod
    def _from(cls, v: dict[str, Any]) -> "TaskState":
        return cls(v["task"], v["state"], v.get("attempts", 0), v.get("exit"))


@dataclass(frozen=True)
class WaitResult:
    tasks: list[TaskState] = field(default_factory=list)
    #: 0 if every task succeeded, else the first failure's exit status.
    exit: int = 0


def _held(journal: Path) -> bool:
    """Whether a live slurp holds this journal (its lock ends with it)."""
    try:
        with open(journal, "rb") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(f, fcntl.LOCK_UN)
            return False
    except OSError:
        return False


def find_socket(run: str | os.PathLike[str] | None = None, cwd: str | None = None) -> Path:
    """The socket to talk to, as ``slurp submit`` finds it.

    ``run`` is a run directory or a run id (or unique prefix) under
    ``.slurp/runs`` of ``cwd``; without it, the instance this process runs in
    (``SLURP_SOCKET``, set for every slurp task), else the latest live run
    under ``cwd``.
    """
    base = Path(cwd or os.getcwd())
    runs = base / ".slurp" / "runs"
    if run is not None:
        path = Path(run)
        if (path / "socket").exists():
            return path / "socket"
        matches = sorted(p for p in runs.glob(f"{run}*") if p.is_dir()) if runs.is_dir() else []
        if len(matches) != 1:
            raise SlurpError(
                "unknown_run",
                f"{len(matches)} runs match `{run}` under {runs}",
            )
        if not (matches[0] / "socket").exists():
            raise SlurpError("not_live", f"run {matches[0].name} is not live: it has no socket")
        return matches[0] / "socket"
    env = os.environ.get("SLURP_SOCKET")
    if env:
        return Path(env)
    if runs.is_dir():
        for d in sorted(runs.iterdir(), reverse=True):
            if (d / "socket").exists() and _held(d / "events.jsonl"):
                return d / "socket"
    raise SlurpError(
        "no_instance",
        f"no live slurp run under {base}: start one with `slurp start`",
    )


class Client:
    """One connection to a live slurp instance.

    >>> c = Client()                      # the instance this task runs in
    >>> ids = c.submit("task sim[i=1..3]: ./sim {i}")
    >>> c.wait(ids).exit
    0

    Thread-safe: calls from many threads share the connection.
    """

    def __init__(
        self,
        run: str | os.PathLike[str] | None = None,
        *,
        socket_path: str | os.PathLike[str] | None = None,
        cwd: str | None = None,
    ) -> None:
        path = Path(socket_path) if socket_path else find_socket(run, cwd)
        # A deep run directory's socket is a link to a short path.
        target = os.path.realpath(path)
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._sock.connect(target)
        except OSError as e:
            self._sock.close()
            raise SlurpError("unreachable", f"cannot reach the instance at {path}: {e}") from e
        self.socket_path = path
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._pending: dict[int, Future[dict[str, Any]]] = {}
        self._events: list[Any] = []
        self._closed = False
        self._reader = threading.Thread(target=self._read, name="slurp-client", daemon=True)
        self._reader.start()

    # The wire.

    def _read(self) -> None:
        f = self._sock.makefile("rb")
        try:
            for line in f:
                message = json.loads(line)
                if "event" in message:
                    for sink in list(self._events):
                        sink(message)
                    continue
                with self._lock:
                    future = self._pending.pop(message.get("id"), None)
                if future is not None:
                    future.set_result(message)
        except (OSError, ValueError):
            pass
        finally:
            with self._lock:
                self._closed = True
                pending, self._pending = self._pending, {}
            for future in pending.values():
                future.set_exception(InstanceGone())
            for sink in list(self._events):
                sink(None)

    def request_async(self, op: str, **fields: Any) -> "Future[dict[str, Any]]":
        """Sends a request; the future holds its reply (an error reply as
        :class:`SlurpError`)."""
        raw: Future[dict[str, Any]] = Future()
        with self._lock:
            if self._closed:
                raise InstanceGone()
            rid = next(self._ids)
            self._pending[rid] = raw
            line = json.dumps({"v": PROTOCOL_VERSION, "id": rid, "op": op, **fields}) + "\n"
            try:
                self._sock.sendall(line.encode())
            except OSError:
                self._pending.pop(rid, None)
                raise InstanceGone() from None
        out: Future[dict[str, Any]] = Future()

        def done(f: "Future[dict[str, Any]]") -> None:
            error = f.exception()
            if error is not None:
                out.set_exception(error)
                return
            reply = f.result()
            if reply.get("ok"):
                out.set_result(reply)
            else:
                e = reply.get("error", {})
                out.set_exception(
                    SlurpError(e.get("code", "error"), e.get("message", ""), e.get("diagnostic"))
                )

        raw.add_done_callback(done)
        return out

    def request(self, op: str, **fields: Any) -> dict[str, Any]:
        return self.request_async(op, **fields).result()

    # The operations.

    def hello(self) -> dict[str, Any]:
        """Version, run id and directory, resources, whether it is open."""
        return self.request("hello")

    def submit(
        self,
        text: str,
        *,
        scope: str | None = None,
        cwd: str | os.PathLike[str] | None = None,
        source: str | None = None,
    ) -> list[str]:
        """Adds the tasks of ``text`` (lines of the slurp language) and
        returns their ids. ``scope`` is the instance to add them to (a
        nested entry's path, ``sub/``; by default this task's own,
        ``SLURP_SCOPE``, else the top level); they run in ``cwd`` (default:
        this process's). A mistake raises :class:`SlurpError` with slurp's
        diagnostic, and nothing is added."""
        if scope is None:
            scope = os.environ.get("SLURP_SCOPE", "")
        fields: dict[str, Any] = {
            "text": text,
            "scope": scope,
            "cwd": str(cwd if cwd is not None else os.getcwd()),
        }
        if source is not None:
            fields["source"] = source
        return list(self.request("submit", **fields)["tasks"])

    def wait_async(self, tasks: Sequence[str] | str) -> "Future[WaitResult]":
        """A future that completes when every task named has ended."""
        names = [tasks] if isinstance(tasks, str) else list(tasks)
        raw = self.request_async("wait", tasks=names)
        out: Future[WaitResult] = Future()

        def done(f: "Future[dict[str, Any]]") -> None:
            error = f.exception()
            if error is not None:
                out.set_exception(error)
            else:
                reply = f.result()
                out.set_result(
                    WaitResult([TaskState._from(t) for t in reply["tasks"]], reply["exit"])
                )

        raw.add_done_callback(done)
        return out

    def wait(self, tasks: Sequence[str] | str, timeout: float | None = None) -> WaitResult:
        """Blocks until every task named has ended."""
        return self.wait_async(tasks).result(timeout)

    def cancel(self, tasks: Sequence[str] | str) -> list[dict[str, Any]]:
        """Cancels tasks: those not started end ``cancelled``, running ones
        are stopped."""
        names = [tasks] if isinstance(tasks, str) else list(tasks)
        return list(self.request("cancel", tasks=names)["tasks"])

    def status(self, tasks: Iterable[str] | None = None, *, scope: str = "") -> list[TaskState]:
        """The state of the tasks named, or of every task of ``scope``."""
        fields: dict[str, Any] = {"scope": scope}
        if tasks is not None:
            fields["tasks"] = list(tasks)
        return [TaskState._from(t) for t in self.request("status", **fields)["tasks"]]

    def events(self) -> Iterator[dict[str, Any]]:
        """Every event from this call on (``{"event": "state", "task",
        "state", ...}``, ``{"event": "start", ...}``) until the run ends.
        The subscription is made here, not at the first ``next()``: nothing
        that happens in between is missed."""
        import queue

        q: "queue.Queue[Any]" = queue.Queue()
        self._events.append(q.put)
        try:
            self.request("watch")
        except BaseException:
            self._events.remove(q.put)
            raise

        def stream() -> Iterator[dict[str, Any]]:
            try:
                while True:
                    event = q.get()
                    if event is None:
                        return
                    yield event
            finally:
                if q.put in self._events:
                    self._events.remove(q.put)

        return stream()

    def close_instance(self) -> None:
        """Closes the instance: it takes no more tasks and ends when its
        tasks have (``slurp close``)."""
        self.request("close")

    def close(self) -> None:
        """Closes this connection (not the instance)."""
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
