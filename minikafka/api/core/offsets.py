"""What an append returns: the stored row's offset, without breaking minikafka's return values.

minikafka's ``append`` returns the validated model and ``extend`` the number of rows
written; code written for it keeps working. ``append`` now returns that model as an
instance of a subclass of the topic's model that also carries ``.offset`` (an ``Offset``:
the row's id and partition); it compares equal to the plain model and ``isinstance``
holds. ``offset_of(result)`` reads it too (for models with a field named ``offset``).
``extend`` returns an ``Extended``: an int (the count) with ``.first`` (the first stored
id, None when nothing was written) and ``.count``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from pydantic import BaseModel, PrivateAttr

__all__ = ["Extended", "Offset", "offset_of", "with_offset"]


class Offset(NamedTuple):
    """A stored row's position: ``id`` (the offset in its topic) and ``partition``."""

    id: int
    partition: int


class Extended(int):
    """The number of rows ``extend`` wrote (an int, as before), with ``first``: the first stored id."""

    first: int | None

    def __new__(cls, count: int, first: int | None) -> Extended:
        obj = super().__new__(cls, count)
        obj.first = first if count else None
        return obj

    @property
    def count(self) -> int:  # type: ignore[override]
        return int(self)

    def __repr__(self) -> str:
        return f"Extended(count={int(self)}, first={self.first})"


_subclasses: dict[type, type] = {}


def _appended_class(model_cls: type[BaseModel]) -> type[BaseModel]:
    cls = _subclasses.get(model_cls)
    if cls is not None:
        return cls
    namespace: dict[str, Any] = {
        "__module__": model_cls.__module__,
        "__qualname__": model_cls.__qualname__,
        "__annotations__": {"_mk_offset": Offset | None},
        "_mk_offset": PrivateAttr(default=None),
        "__eq__": _eq,
        "__reduce_ex__": _reduce_ex,
        "__hash__": model_cls.__hash__,
    }
    if "offset" not in model_cls.model_fields and not hasattr(model_cls, "offset"):
        namespace["offset"] = property(lambda self: self._mk_offset,
                                       doc="The stored row's Offset(id, partition).")
    cls = type(model_cls.__name__, (model_cls,), namespace)
    _subclasses[model_cls] = cls
    return cls


def _eq(self: BaseModel, other: Any) -> bool:
    if not isinstance(other, BaseModel):
        return NotImplemented
    base = type(self).__mro__[1]
    if not isinstance(other, base) and not isinstance(self, type(other)):
        return False
    return (self.__dict__ == other.__dict__
            and self.__pydantic_extra__ == other.__pydantic_extra__)


def plain_model(cls: type[BaseModel], values: dict, fields_set: set) -> BaseModel:
    """Rebuild a pickled append result as the plain model."""
    return cls.model_construct(fields_set, **values)


def _reduce_ex(self: BaseModel, protocol: Any) -> Any:
    """Pickled as the plain model (the subclass is made at run time and cannot be imported)."""
    return plain_model, (type(self).__mro__[1], dict(self.__dict__), set(self.__pydantic_fields_set__))


def with_offset(model: BaseModel, offset: Offset) -> BaseModel:
    """``model`` as an instance of its appended subclass carrying ``offset`` (the fields are shared, not copied)."""
    cls = _appended_class(type(model))
    out = cls.__new__(cls)
    object.__setattr__(out, "__dict__", model.__dict__)
    object.__setattr__(out, "__pydantic_fields_set__", model.__pydantic_fields_set__)
    object.__setattr__(out, "__pydantic_extra__", model.__pydantic_extra__)
    private = dict(model.__pydantic_private__ or {})
    private["_mk_offset"] = offset
    object.__setattr__(out, "__pydantic_private__", private)
    return out


def offset_of(appended: Any) -> Offset | None:
    """The ``Offset`` an ``append`` result carries (None for anything else)."""
    private = getattr(appended, "__pydantic_private__", None) or {}
    return private.get("_mk_offset")
