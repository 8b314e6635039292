"""The identity of a prompt source (:class:`mambaicl.members.PromptSource`): two sources are the same, and share
their draws, exactly when they are of the same class and their ``key`` is equal.

:class:`KeyedSource` is the one definition of that identity, used by every source of the package
(:class:`mambaicl.members.SyntheticData`, :class:`mambaicl.members.SampledData`,
:class:`mambaicl.data.poisoning.SST2Source`); a source sets ``key`` (hashable) in its constructor.
"""
from __future__ import annotations

__all__ = ["KeyedSource"]


class KeyedSource:
    """Equality and hash by ``key``, within one class."""

    key: object

    def __eq__(self, other) -> bool:
        return isinstance(other, type(self)) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)
