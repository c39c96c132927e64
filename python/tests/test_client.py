"""The Python client against a real slurp instance."""

from __future__ import annotations

import concurrent.futures
import os
from pathlib import Path
import subprocess
import sys
import textwrap

import pytest

import helpers
from slurp_client import Client, SlurpError, SlurpExecutor, TaskFailed


def test_submit_wait_and_status(instance) -> None:
    with Client() as client:
        hello = client.hello()
        assert hello["version"] == 1 and hello["open"] is True
        assert hello["resources"]["cores_per_node"] == 2
        ids = client.submit("task a[i=1..3]: sh -c 'exit {i}'\ntask b after=a[1]: true")
        assert ids == ["a[1]", "a[2]", "a[3]", "b"]
        result = client.wait(ids)
        assert result.exit == 1
        states = {t.task: (t.state, t.exit) for t in result.tasks}
        assert states == {
            "a[1]": ("failed", 1),
            "a[2]": ("failed", 2),
            "a[3]": ("failed", 3),
            "b": ("skipped", 1),
        }
        assert [t.state for t in client.status(["b"])] == ["skipped"]


def test_a_mistake_is_slurps_diagnostic_and_adds_nothing(instance) -> None:
    with Client() as client:
        with pytest.raises(SlurpError) as raised:
            client.submit("task ok: true\ntask x after=nope: true")
        assert raised.value.code == "invalid_workflow"
        assert "no task named `nope`" in str(raised.value)
        with pytest.raises(SlurpError) as raised:
            client.wait(["ok"])
        assert raised.value.code == "unknown_task"


def test_the_executor_runs_a_thousand_futures(instance) -> None:
    with SlurpExecutor(cores=1) as ex:
        assert list(ex.map(helpers.square, range(1000))) == [x * x for x in range(1000)]


def test_a_failure_is_raised_by_its_future(instance) -> None:
    with SlurpExecutor() as ex:
        good = ex.submit(helpers.square, 7)
        bad = ex.submit(helpers.fail, "boom at 3")
        died = ex.submit(helpers.die, 5)
        command = ex.command("sh -c 'exit 4'")
        assert good.result() == 49
        with pytest.raises(ValueError, match="boom at 3"):
            bad.result()
        with pytest.raises(TaskFailed) as raised:
            died.result()
        assert raised.value.exit == 5 and raised.value.state == "failed"
        with pytest.raises(TaskFailed) as raised:
            command.result()
        assert raised.value.exit == 4
        assert isinstance(ex, concurrent.futures.Executor)


def test_calls_get_the_resources_they_ask_for(instance) -> None:
    with SlurpExecutor(cores=2) as ex:
        task, cores = ex.submit(helpers.where).result()
        assert task.startswith("py_")
        assert sorted(cores.split(",")) == ["0", "1"]


def client_script(path: Path, body: str) -> Path:
    """Writes a script that imports this checkout's client, then `body`."""
    repo = str(helpers.__file__.rsplit("/", 2)[0])
    header = f"import sys\nsys.path.insert(0, {repo!r})\n"
    path.write_text(header + textwrap.dedent(body))
    return path


def test_a_task_submits_into_its_own_instance(instance) -> None:
    # A Python task that uses the client with no arguments reaches the
    # instance it runs in (SLURP_SOCKET), from inside.
    client_script(
        instance.dir / "inner.py",
        """
        from slurp_client import Client
        with Client() as c:
            ids = c.submit("task child: sh -c 'echo child > child.out'")
            print(c.wait(ids).exit)
        """,
    )
    with Client() as client:
        ids = client.submit(f"task parent: {sys.executable} inner.py")
        assert client.wait(ids).exit == 0
        assert [t.state for t in client.status(["child"])] == ["succeeded"]
    assert (instance.dir / "child.out").read_text() == "child\n"


def test_events_and_cancel(instance) -> None:
    with Client() as client:
        events = client.events()
        client.submit("task long: sleep 60\ntask next after=long: true")
        first = next(events)
        assert first["event"] in ("state", "start")
        while True:
            e = next(events)
            if e.get("task") == "long" and e.get("event") == "start":
                break
        cancelled = client.cancel(["long"])
        assert cancelled[0]["now"] == "stopping"
        result = client.wait(["long", "next"])
        assert [(t.task, t.state) for t in result.tasks] == [
            ("long", "cancelled"),
            ("next", "skipped"),
        ]


def test_the_executor_can_start_and_close_its_own_instance(tmp_path, monkeypatch) -> None:
    from conftest import slurp_binary

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SLURP_SOCKET", raising=False)
    slurp = slurp_binary()
    with SlurpExecutor(start=True, start_args=["--cores", "2"], slurp=slurp) as ex:
        assert ex.submit(helpers.square, 12).result() == 144
        run = ex.client.hello()["run"]
    out = subprocess.run([slurp, "runs"], capture_output=True, text=True, cwd=tmp_path)
    assert run in out.stdout and "ended" in out.stdout.split(run)[1].splitlines()[0]


def test_functions_of_the_submitters_own_script_run(instance) -> None:
    # A script that defines its function and maps it, as users write them.
    script = client_script(
        instance.dir / "user_script.py",
        """
        from slurp_client import SlurpExecutor

        def triple(x):
            return 3 * x

        if __name__ == "__main__":
            with SlurpExecutor() as ex:
                print(sum(ex.map(triple, range(10))))
        """,
    )
    out = subprocess.run(
        [sys.executable, str(script)], cwd=instance.dir, capture_output=True, text=True,
        env=instance.env,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "135"


def test_a_call_slurp_refuses_raises_from_its_future(instance) -> None:
    # Submission does not wait for the reply: the refusal (a 99-core task
    # on a 2-core instance) comes back as the future's exception.
    with SlurpExecutor(cores=99) as ex:
        fut = ex.submit(helpers.square, 2)
        with pytest.raises(SlurpError) as raised:
            fut.result(timeout=30)
        assert raised.value.code == "invalid_workflow"
        assert "can never run" in str(raised.value)


def test_the_executor_example_runs(tmp_path, monkeypatch) -> None:
    from conftest import slurp_binary

    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(root / "python"), SLURP=slurp_binary())
    env.pop("SLURP_SOCKET", None)
    out = subprocess.run(
        [sys.executable, str(root / "examples" / "live" / "executor.py")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "328350"
