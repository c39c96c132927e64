"""The Python client's executor: calls as slurp tasks, on an instance it
starts and closes itself.

    pip install ./python        # once, from the repository
    python3 examples/live/executor.py
"""

from slurp_client import SlurpExecutor


def simulate(x: int) -> int:
    return x * x


if __name__ == "__main__":
    with SlurpExecutor(start=True, start_args=["--cores", "2"]) as ex:
        print(sum(ex.map(simulate, range(100))))  # 328350
