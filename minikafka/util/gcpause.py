"""Pause Python's cyclic garbage collector around bulk work.

Validating a million rows creates millions of short-lived objects with no reference
cycles; each allocation burst triggers collector passes over everything alive, which
on this project's reference machine costs more than the validation itself. Bulk
paths pause the collector and restore its previous state afterwards.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
