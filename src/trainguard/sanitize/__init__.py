"""The runtime sanitizer: ``trainguard run script.py`` and ``with trainguard.watch():``.

The watcher installs PyTorch's global hooks (module forward, optimizer step) and a few narrow
wrappers (``torch.autograd.backward``, ``zero_grad``, ``torch.save``/``load``, functional losses and
dropout), feeds the events to the checks in ``checks/`` and reports findings in the catalogue's
shape. See ``docs/sanitizer.md``.
"""

from trainguard.sanitize.watcher import Watcher, watch

__all__ = ["Watcher", "watch"]
