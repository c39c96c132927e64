"""Functions the executor's tests run in slurp tasks (importable there
through the submitter's sys.path)."""

import os


def square(x: int) -> int:
    return x * x


def fail(message: str) -> None:
    raise ValueError(message)


def die(code: int) -> None:
    os._exit(code)


def where() -> tuple[str, str]:
    return os.environ["SLURP_TASK_ID"], os.environ["SLURP_CORES"]
