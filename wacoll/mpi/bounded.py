"""A dictionary that keeps only its most recently used entries.

A communicator keeps what it derived for each call shape (the plan, this rank's
lowered program, ...), so that a loop's second call costs no planning. A loop whose
counts vary meets a new shape every time; :class:`BoundedCache` keeps the ``capacity``
shapes used last and forgets the others, so memory stays bounded however many
shapes a program meets (a forgotten shape is derived again when it comes back).

Examples
--------
>>> cache = BoundedCache(2)
>>> cache["a"], cache["b"] = 1, 2
>>> cache.get("a")
1
>>> cache["c"] = 3          # "b" is the least recently used
>>> sorted(cache)
['a', 'c']
"""

from __future__ import annotations

from collections import OrderedDict

__all__ = ["BoundedCache", "SHAPES"]

#: The call shapes (operation, count, root, family, options, buffer layout) a
#: communicator keeps its plans and lowered programs for: the ones used last. A loop
#: over more shapes derives the others again; memory stays bounded.
SHAPES = 256


class BoundedCache(OrderedDict):
    """An :class:`~collections.OrderedDict` of at most ``capacity`` entries: ``get``
    and storing mark an entry used; storing beyond ``capacity`` drops the entry used
    least recently."""

    def __init__(self, capacity: int):
        if capacity < 1:
            raise ValueError(f"a bounded cache holds at least one entry, not {capacity}")
        super().__init__()
        self.capacity = capacity

    def get(self, key, default=None):
        try:
            value = self[key]
        except KeyError:
            return default
        self.move_to_end(key)
        return value

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        self.move_to_end(key)
        if len(self) > self.capacity:
            self.popitem(last=False)
