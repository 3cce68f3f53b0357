"""What the modes may use of a Source and of a Topic: the two faces, as types.

The modes (pipes, queues, groups, streaming, ...) sit below the face (``Source``,
``Topic``, ``Stream``), so they cannot import it, not even for type hints. They take these
protocols instead: the public surface of the face they call, plus ``Topic.rows`` (the
``TopicRows`` every row operation goes through). ``Source`` and ``Topic`` satisfy them;
nothing else needs to.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel

if TYPE_CHECKING:
    from ...ledger.connection import Ledger
    from ...ledger.layout import TopicLayout
    from ...ledger.watcher import Watcher
    from .rows import TopicRows


class TopicHandle(Protocol):
    """A topic as the modes see it (``minikafka.Topic`` and ``minikafka.Stream`` are ones)."""

    @property
    def source(self) -> SourceHandle: ...
    @property
    def rows(self) -> TopicRows: ...
    @property
    def name(self) -> str: ...
    @property
    def model(self) -> type[BaseModel]: ...
    @property
    def layout(self) -> TopicLayout: ...
    @property
    def dedup(self) -> tuple[str, ...]: ...

    def count(self, status: str | None = None, *, consumer: str | None = None) -> int: ...
    def high_watermark(self) -> int: ...
    def consumers(self) -> list[str]: ...
    def consumer(self, name: str) -> str: ...


class SourceHandle(Protocol):
    """A Source as the modes see it (``minikafka.Source`` is one)."""

    path: str

    @property
    def ledger(self) -> Ledger: ...
    @property
    def watcher(self) -> Watcher: ...

    def transaction(self) -> AbstractContextManager[Any]: ...  # yields a core.transaction.Transaction
    def topic(self, name: str, model: type[BaseModel], dedup: Sequence[str] | str | None = ...,
              partitions: int | None = None, key: Sequence[str] | str | None = None) -> Any: ...
    def stream(self, name: str, max_age: Any = None) -> Any: ...
    def opened(self, name: str) -> TopicHandle | None: ...
    def model_of(self, name: str) -> type[BaseModel]: ...
    def layout(self, name: str) -> TopicLayout: ...
    def topics(self) -> list[str]: ...
    def close(self) -> None: ...
    def __enter__(self) -> SourceHandle: ...
    def __exit__(self, *exc: Any) -> None: ...


SourceOpener = Callable[[str], SourceHandle]  # a Source class, or anything that opens a path
