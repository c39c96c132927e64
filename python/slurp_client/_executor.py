"""A :class:`concurrent.futures.Executor` whose calls run as slurp tasks."""

from __future__ import annotations

import os
import pickle
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import Executor, Future
from pathlib import Path
from typing import Any, Callable, TypeVar

from ._client import Client, SlurpError, WaitResult

T = TypeVar("T")

_WORKER = Path(__file__).with_name("_worker.py")


def _dumps(obj: Any) -> bytes:
    """Pickles a call: with cloudpickle where it is installed (lambdas and
    closures then travel too), else with pickle (module-level functions,
    the submitter's own script's included)."""
    try:
        import cloudpickle  # type: ignore[import-not-found]
    except ImportError:
        return pickle.dumps(obj)
    return cloudpickle.dumps(obj)


class TaskFailed(Exception):
    """A task ended without a result: it failed outside the function (it
    was killed, ran out of time or memory, or the process exited), or was
    cancelled or skipped."""

    def __init__(self, task: str, state: str, exit: int | None, attempts: int = 0):
        super().__init__(f"task {task} ended {state} (exit status {exit})")
        self.task = task
        self.state = state
        self.exit = exit
        self.attempts = attempts


def _resources(cores: int, gpus: int, mem: str | None, time: str | None, retries: int) -> str:
    words = [f"cores={int(cores)}"]
    if gpus:
        words.append(f"gpus={int(gpus)}")
    if mem:
        words.append(f"mem={mem}")
    if time:
        words.append(f"time={time}")
    if retries:
        words.append(f"retries={int(retries)}")
    return " ".join(words)


class SlurpExecutor(Executor):
    """Runs each call as a task of a live slurp instance, packed on its
    cores like any other task.

    >>> with SlurpExecutor(cores=1) as ex:           # the instance it runs in
    ...     squares = list(ex.map(pow, range(100), [2] * 100))

    ``client`` (or ``run``) names the instance; by default the one this
    process runs in, else the latest live run here. ``start=True`` starts a
    fresh instance (``slurp start``, with ``start_args`` such as
    ``["--cores", "8"]``) and closes it at shutdown. Each call's task asks for
    ``cores``, ``gpus``, ``mem`` and ``time`` (slurp's units, ``"2G"``,
    ``"10m"``) and gets ``retries`` extra attempts. The function, its
    arguments and its result travel by pickle (a function of a module, or
    of the submitter's own script; lambdas and closures where
    ``cloudpickle`` is installed); an exception it raises is
    raised by ``Future.result()``; a task that ends without a result raises
    :class:`TaskFailed`.
    """

    def __init__(
        self,
        client: Client | None = None,
        *,
        run: str | None = None,
        cores: int = 1,
        gpus: int = 0,
        mem: str | None = None,
        time: str | None = None,
        retries: int = 0,
        scope: str | None = None,
        python: str = sys.executable,
        start: bool = False,
        start_args: list[str] | None = None,
        slurp: str | None = None,
    ) -> None:
        self._started: str | None = None
        self._slurp = slurp or os.environ.get("SLURP") or shutil.which("slurp") or "slurp"
        if start:
            out = subprocess.run(
                [self._slurp, "start", *(start_args or [])],
                check=True,
                capture_output=True,
                text=True,
            )
            self._started = out.stdout.strip()
            run = str(Path.cwd() / ".slurp" / "runs" / self._started)
        self._client = client or Client(run)
        self._own_client = client is None
        self._resources = _resources(cores, gpus, mem, time, retries)
        self._scope = scope
        self._python = python
        # Beside the run's journal when there is one (a shared file system
        # on a cluster, where tasks may run on other nodes), else /tmp.
        try:
            base = Path.cwd() / ".slurp" / "py"
            base.mkdir(parents=True, exist_ok=True, mode=0o700)
            self._dir = Path(tempfile.mkdtemp(prefix="calls-", dir=base))
        except OSError:
            self._dir = Path(tempfile.mkdtemp(prefix="slurp-py-"))
        self._token = os.urandom(4).hex()
        self._count = 0
        self._lock = threading.Lock()
        self._futures: dict[str, Future[Any]] = {}
        self._shutdown = False

    @property
    def client(self) -> Client:
        return self._client

    def _name(self) -> str:
        with self._lock:
            if self._shutdown:
                raise RuntimeError("cannot schedule new futures after shutdown")
            self._count += 1
            return f"py_{self._token}_{self._count}"

    def _track(
        self,
        name: str,
        line: str,
        fut: Future[Any],
        finish: Callable[[WaitResult], None],
    ) -> None:
        """Submits ``line`` without waiting for the reply (a thousand calls
        go out at the rate of the socket, not of round trips), then waits
        for the task; ``finish`` completes ``fut`` from how it ended. A
        refused submission is ``fut``'s exception."""
        with self._lock:
            self._futures[name] = fut

        def done(error: BaseException | None) -> None:
            with self._lock:
                self._futures.pop(name, None)
            if error is not None and not fut.done():
                fut.set_exception(error)

        def ended(w: Future[WaitResult]) -> None:
            error = w.exception()
            if error is None:
                try:
                    finish(w.result())
                except BaseException as e:  # noqa: BLE001
                    error = e
            done(error)

        def submitted(s: Future[dict[str, Any]]) -> None:
            error = s.exception()
            if error is not None:
                done(error)
                return
            try:
                self._client.wait_async([name]).add_done_callback(ended)
            except SlurpError as e:
                done(e)

        scope = self._scope if self._scope is not None else os.environ.get("SLURP_SCOPE", "")
        self._client.request_async(
            "submit", text=line, scope=scope, cwd=os.getcwd()
        ).add_done_callback(submitted)

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        name = self._name()
        call = self._dir / f"{name}.call"
        result = self._dir / f"{name}.result"
        main = sys.modules.get("__main__")
        main_path = getattr(main, "__file__", None) if main is not None else None
        with open(call, "wb") as f:
            pickle.dump((list(sys.path), main_path, _dumps((fn, args, kwargs))), f)
        command = " ".join(
            shlex.quote(str(w)) for w in (self._python, _WORKER, call, result)
        )
        fut: Future[T] = Future()
        fut.set_running_or_notify_cancel()

        def finish(w: WaitResult) -> None:
            task = w.tasks[0]
            try:
                with open(result, "rb") as f:
                    ok, value = pickle.load(f)
            except OSError:
                fut.set_exception(TaskFailed(task.task, task.state, task.exit, task.attempts))
                return
            finally:
                call.unlink(missing_ok=True)
            result.unlink(missing_ok=True)
            if ok:
                fut.set_result(value)
            else:
                fut.set_exception(value)

        self._track(name, f"task {name} {self._resources}: {command}", fut, finish)
        return fut

    def command(
        self,
        command: str,
        *,
        cores: int | None = None,
        gpus: int = 0,
        mem: str | None = None,
        time: str | None = None,
        retries: int = 0,
    ) -> Future[int]:
        """Runs a command line (the slurp language's rules: argv, or
        ``/bin/sh -c`` when it has shell syntax) as a task; the future holds
        0, or raises :class:`TaskFailed` with its exit status."""
        name = self._name()
        resources = (
            self._resources
            if cores is None
            else _resources(cores, gpus, mem, time, retries)
        )
        fut: Future[int] = Future()
        fut.set_running_or_notify_cancel()

        def finish(w: WaitResult) -> None:
            task = w.tasks[0]
            if task.ok:
                fut.set_result(0)
            else:
                fut.set_exception(TaskFailed(task.task, task.state, task.exit, task.attempts))

        self._track(name, f"task {name} {resources}: {command}", fut, finish)
        return fut

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._shutdown = True
            pending = list(self._futures)
        if cancel_futures and pending:
            try:
                self._client.cancel(pending)
            except SlurpError:
                pass
        if wait:
            for fut in list(self._futures.values()):
                try:
                    fut.exception()
                except BaseException:  # noqa: BLE001
                    pass
        if self._started is not None:
            try:
                self._client.close_instance()
            except SlurpError:
                pass
        if self._own_client:
            self._client.close()
        shutil.rmtree(self._dir, ignore_errors=True)
