"""Runs one call of a :class:`~slurp_client.SlurpExecutor` inside a slurp task.

Standalone on purpose (started as a script, before anything of the client's
package can be imported): ``python _worker.py CALL RESULT``. CALL holds the
submitter's ``sys.path``, its main script (for functions defined there) and
the pickled ``(fn, args, kwargs)``; RESULT gets
the pickled ``(True, value)`` or ``(False, exception)``. An exception that
cannot be pickled comes back as a RuntimeError with its text and traceback.
"""

import pickle
import sys
import traceback


def main() -> int:
    call_path, result_path = sys.argv[1], sys.argv[2]
    with open(call_path, "rb") as f:
        path, main_path, blob = pickle.load(f)
    # The submitter's import path, so its functions unpickle here.
    for entry in reversed(path):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    if main_path:
        # Functions of the submitter's script pickle as `__main__.f`: load
        # the script as multiprocessing's spawn does, under another name so
        # its `if __name__ == "__main__":` block does not run again.
        import runpy
        import types

        module = types.ModuleType("__mp_main__")
        module.__dict__.update(runpy.run_path(main_path, run_name="__mp_main__"))
        sys.modules["__main__"] = sys.modules["__mp_main__"] = module
    try:
        fn, args, kwargs = pickle.loads(blob)
        outcome = (True, fn(*args, **kwargs))
    except BaseException as e:  # noqa: BLE001 - every failure goes back
        outcome = (False, e)
        text = "".join(traceback.format_exception(e))
        try:
            pickle.dumps(outcome)
        except Exception:  # noqa: BLE001
            outcome = (False, RuntimeError(text))
        sys.stderr.write(text)
    data = pickle.dumps(outcome)
    tmp = result_path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    import os

    os.replace(tmp, result_path)
    return 0 if outcome[0] else 1


if __name__ == "__main__":
    sys.exit(main())
