"""A Python client for slurp's live instances.

Submit tasks to a running slurp (``slurp start``, ``slurp FILE --open``, or
the instance a task runs in), wait for them, cancel them, follow their
events — or run Python calls as slurp tasks through a
:class:`concurrent.futures.Executor`. Pure Python: it speaks slurp's
protocol (docs/protocol.md) over the run's UNIX socket.
"""

from ._client import (
    PROTOCOL_VERSION,
    Client,
    InstanceGone,
    SlurpError,
    TaskState,
    WaitResult,
    find_socket,
)
from ._executor import SlurpExecutor, TaskFailed

__all__ = [
    "PROTOCOL_VERSION",
    "Client",
    "InstanceGone",
    "SlurpError",
    "SlurpExecutor",
    "TaskFailed",
    "TaskState",
    "WaitResult",
    "find_socket",
]
