"""PyTorch's intra-op threads for a block of work: the party processes' ``train.threads`` in a process of their own.

Why it matters: torch's default is one thread per core, and its OpenMP threads spin while they wait for each other.
On a busy machine (the parties of a pilot, other jobs) a spinning thread holds a core that the thread it waits for
needs, so small matrix products run many times slower; measured in the pilot's pooled baseline on 2 cores, 27 times
slower at a load of 5 with the default threads, against 1.1 times for the party processes, which run one thread.

Example:
    >>> import torch
    >>> before = torch.get_num_threads()
    >>> with torch_threads(1):
    ...     torch.get_num_threads()
    1
    >>> torch.get_num_threads() == before
    True
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


@contextlib.contextmanager
def torch_threads(threads: int) -> Iterator[None]:
    """Run the block with ``threads`` torch intra-op threads (at least 1), then restore the previous number."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(max(1, threads))
    try:
        yield
    finally:
        torch.set_num_threads(before)
