"""Plans: how the library's operations are written once for the blocking
and the asyncio client.

Every public operation is a *plan*: a generator that yields either a list of
`Call`s (run them, send back their results in order, or the exception a call
raised) or a float (sleep that many seconds, send back None), and finally
returns the operation's result. `dq` drives plans with a blocking client,
`dq.asyncio` with an asyncio one, so the two share everything but the I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Generator, List, Tuple, Union


@dataclass(frozen=True)
class Call:
    """One command: its arguments and how to read its reply."""

    args: Tuple[Any, ...]
    parse: Callable[[Any], Any]


Plan = Generator[Union[List[Call], float], Any, Any]


def one(call: Call) -> Plan:
    results = yield [call]
    result = results[0]
    if isinstance(result, BaseException):
        raise result
    return result


def gather(calls: List[Call]) -> Plan:
    """Runs the calls (concurrently where the driver can); raises the first error."""
    results = yield calls
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return results
