"""Plans: how every public operation is written once for the blocking and
the asyncio client.

An operation is a *plan*: a generator that yields steps and finally returns
the operation's result. A step is a list of `Call`s (run them — the asyncio
driver at once — and send back their results in order, a `DqError` a call
raised in its place; any other error a call raises is thrown into the plan,
which may catch it) or a float (sleep that many seconds, send back None). A
*stream* (DQ.SCAN, DQ.EVENTS) yields `Items` too: hand them to the
consumer, send back None; and may yield a `Merge` of streams to run side
by side. No I/O here: `dq` drives plans with a blocking client, `dq.asyncio`
with an asyncio one.

A public method is written once, in dq/_core, as a function that checks
its arguments and returns its plan, decorated with `@command` (`@stream`
for an iterator). Each flavor's base class (a `Blocking` or an `Async`)
binds the commands of every class below it: `dq.Queue.add` runs the plan
and returns its result, `dq.asyncio.Queue.add` is a coroutine function that
awaits it; both have the command's name, docstring and signature.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import (
    TYPE_CHECKING,
    Any,
    AsyncIterator,
    Callable,
    ClassVar,
    Coroutine,
    Generator,
    Generic,
    Iterator,
    List,
    Optional,
    Sequence,
    Tuple,
    TypeVar,
    Union,
    overload,
)

if TYPE_CHECKING:
    from typing_extensions import Concatenate, ParamSpec

    P = ParamSpec("P")
else:
    # Annotations are never evaluated at run time (`from __future__ import
    # annotations`); a TypeVar stands in for the ParamSpec in Generic[...],
    # which Python 3.9's typing lacks.
    P = TypeVar("P")

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True)
class Call(Generic[T]):
    """One command: its arguments, how to read its reply, rarely the
    cluster node to send it to (else redis-py routes it by its key), and
    whether it may wait on the server (a BLOCK): dq.asyncio ends such a
    call on the server when its task is cancelled."""

    args: Tuple[Any, ...]
    parse: Callable[[Any], T]
    node: Any = None
    blocking: bool = False


@dataclass(frozen=True)
class Items(Generic[T]):
    """A stream's step: values for its consumer."""

    items: List[T]


@dataclass(frozen=True)
class Merge(Generic[T]):
    """A stream's step: run these streams side by side, each at its own
    pace, so that one waiting in a blocking call holds up none of the
    others, and hand their items to the consumer as they come; send back
    None once every one has ended. An error of one ends them all and is
    raised to the consumer (after the items that came before it). dq runs
    each on a thread of its own, dq.asyncio on a task of its own (a
    ShardedQueue's event reader: one reader per shard)."""

    streams: List[Stream[T]]


Step = Union[List[Call[Any]], float]
Plan = Generator[Step, Any, T]
Stream = Generator[Union[Step, Items[T], Merge[T]], Any, None]


class Done(Generic[T]):
    """A plan that has returned, with its result."""

    __slots__ = ("value",)

    def __init__(self, value: T) -> None:
        self.value = value


def advance(plan: Generator[Any, Any, T], reply: Any = None, error: Optional[BaseException] = None) -> Any:
    """Resumes a plan with the reply to its last step (or throws into it the
    error a call raised): its next step, or Done(result) once it returned."""
    try:
        return plan.send(reply) if error is None else plan.throw(error)
    except StopIteration as stop:
        return Done(stop.value)


def one(call: Call[T]) -> Plan[T]:
    """Runs one call: its parsed reply, or its error raised."""
    (result,) = yield [call]
    if isinstance(result, BaseException):
        raise result
    return result  # type: ignore[no-any-return]


def then(plan: Plan[T], finish: Callable[[T], R]) -> Plan[R]:
    """A plan's result, passed through `finish`."""
    return finish((yield from plan))


def all_of(plans: Sequence[Plan[T]]) -> Plan[List[T]]:
    """Runs plans side by side: each round is one step with the calls of
    every plan not done yet (so they go out together, each to its node), and
    each plan gets its own replies. Returns their results in order; the
    first error, in the plans' order, is raised once every plan has had the
    replies of that round."""
    results: List[Any] = [None] * len(plans)
    steps: List[Tuple[int, Any]] = [(i, _advance(plan, None)) for i, plan in enumerate(plans)]
    while True:
        waiting: List[Tuple[int, List[Call[Any]]]] = []
        for i, step in steps:
            if isinstance(step, Done):
                results[i] = step.value
            elif isinstance(step, BaseException):
                raise step
            else:
                waiting.append((i, step))
        if not waiting:
            return results
        replies = yield [call for _, calls in waiting for call in calls]
        steps, at = [], 0
        for i, calls in waiting:
            steps.append((i, _advance(plans[i], replies[at : at + len(calls)])))
            at += len(calls)


def _advance(plan: Plan[Any], reply: Any) -> Any:
    """advance(), a plan's error returned, not raised."""
    try:
        step = advance(plan, reply)
    except Exception as e:
        return e
    if isinstance(step, float):
        raise TypeError("all_of() runs plans of calls only, not pauses")
    return step


# --- public methods, written once ---------------------------------------------------------------


class Command(Generic[P, T]):
    """A public method written once: `plan(self, ...)` checks the arguments
    and returns the plan. A flavor binds it: dq's method returns the plan's
    result, dq.asyncio's is a coroutine function."""

    def __init__(self, plan: Callable[Concatenate[Any, P], Plan[T]]) -> None:
        self.plan = plan
        self.__doc__ = plan.__doc__

    @overload
    def __get__(self, obj: None, owner: Any) -> Command[P, T]: ...

    @overload
    def __get__(self, obj: Blocking, owner: Any) -> Callable[P, T]: ...

    @overload
    def __get__(self, obj: Async, owner: Any) -> Callable[P, Coroutine[Any, Any, T]]: ...

    def __get__(self, obj: Any, owner: Any) -> Any:
        if obj is None:
            return self
        raise TypeError(f"{owner.__name__}.{self.plan.__name__}: the class binds no client flavor")


class StreamCommand(Generic[P, T]):
    """A public method that returns an iterator, written once: `stream(self,
    ...)` checks the arguments and returns the stream. dq's method returns
    an iterator, dq.asyncio's an async iterator."""

    def __init__(self, stream: Callable[Concatenate[Any, P], Stream[T]]) -> None:
        self.stream = stream
        self.__doc__ = stream.__doc__

    @overload
    def __get__(self, obj: None, owner: Any) -> StreamCommand[P, T]: ...

    @overload
    def __get__(self, obj: Blocking, owner: Any) -> Callable[P, Iterator[T]]: ...

    @overload
    def __get__(self, obj: Async, owner: Any) -> Callable[P, AsyncIterator[T]]: ...

    def __get__(self, obj: Any, owner: Any) -> Any:
        if obj is None:
            return self
        raise TypeError(f"{owner.__name__}.{self.stream.__name__}: the class binds no client flavor")


def command(plan: Callable[Concatenate[Any, P], Plan[T]]) -> Command[P, T]:
    """Makes `plan` a public method of both flavors."""
    return Command(plan)


def stream(stream: Callable[Concatenate[Any, P], Stream[T]]) -> StreamCommand[P, T]:
    """Makes `stream` a public method of both flavors that returns an iterator."""
    return StreamCommand(stream)


class Binding:
    """The base of a flavor's classes: every class below it gets, for each
    command it has, a real function made by the flavor (`_method`,
    `_iterator`) that carries the command's name, docstring and signature,
    its return annotation what the flavor returns."""

    # How the flavor's iterator method's return annotation reads ("{}": the stream's item type).
    _iterator_returns: ClassVar[str]

    @staticmethod
    def _method(plan: Callable[..., Plan[Any]]) -> Callable[..., Any]:
        raise NotImplementedError

    @staticmethod
    def _iterator(stream: Callable[..., Stream[Any]]) -> Callable[..., Any]:
        raise NotImplementedError

    @staticmethod
    def _check_client(client: Any) -> None:
        raise NotImplementedError

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in dir(cls):
            attr = inspect.getattr_static(cls, name)
            if isinstance(attr, Command):
                method = _adopt(cls._method(attr.plan), attr.plan, cls, name, "{}")
                method.plan = attr.plan  # type: ignore[attr-defined] # as on the Command: Queue.add.plan(queue, ...)
                setattr(cls, name, method)
            elif isinstance(attr, StreamCommand):
                method = _adopt(cls._iterator(attr.stream), attr.stream, cls, name, cls._iterator_returns)
                method.stream = attr.stream  # type: ignore[attr-defined]
                setattr(cls, name, method)


class Blocking(Binding):
    """The blocking flavor (dq): a command returns its result."""

    _iterator_returns = "Iterator[{}]"


class Async(Binding):
    """The asyncio flavor (dq.asyncio): a command is a coroutine function."""

    _iterator_returns = "AsyncIterator[{}]"


def _adopt(
    method: Callable[..., Any], written: Callable[..., Any], cls: type, name: str, returns: str
) -> Callable[..., Any]:
    """Gives a flavor's method the name, docstring and signature of the
    command it runs; its return annotation is the plan's result type
    ("Plan[X]" -> X) in `returns`."""
    annotations = dict(written.__annotations__)
    declared = annotations.get("return")
    if isinstance(declared, str) and declared.endswith("]"):
        annotations["return"] = returns.format(declared[declared.index("[") + 1 : -1])
    method.__name__ = name
    method.__qualname__ = f"{cls.__qualname__}.{name}"
    method.__module__ = cls.__module__
    method.__doc__ = written.__doc__
    method.__annotations__ = annotations
    # typing.get_type_hints() evaluates the annotations in the module of __wrapped__.
    method.__wrapped__ = written  # type: ignore[attr-defined]
    method.__signature__ = inspect.signature(written).replace(  # type: ignore[attr-defined]
        return_annotation=annotations.get("return", inspect.Signature.empty)
    )
    return method
