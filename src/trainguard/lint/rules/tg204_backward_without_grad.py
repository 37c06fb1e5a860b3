"""TG204 backward-without-grad: the loss is built from a tensor rebuilt out of graph values.

``torch.tensor(log_probs)``, ``torch.as_tensor``, ``torch.Tensor(...)`` or a NumPy round trip
(``torch.from_numpy(np.array(outs))``) on a list whose elements a model computed copies their
numbers into a new leaf: the copy has no ``grad_fn``
(https://pytorch.org/docs/stable/generated/torch.tensor.html: "torch.tensor() always copies
data"), so a loss built from it alone fails with "element 0 of tensors does not require grad
and does not have a grad_fn". ``torch.stack``/``torch.cat`` keep the graph. Fires at the rebuild
when it reaches the tensor ``backward()`` runs on (through helpers and method calls) and nothing
else there carries a graph; silent when another term of the loss does (a rebuilt target is a
stop-gradient), or when part of the loss cannot be followed.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trainguard.lint.astutil import dotted
from trainguard.lint.rebuilds import REBUILD, loss_sources
from trainguard.lint.rules import Hit
from trainguard.lint.script import Script, is_backward

CODE = "TG204"
SKIP_IN_TESTS = True  # about a training run; test files are not runs


def check(script: Script) -> Iterator[Hit]:
    if "backward" not in script.source or not any(
            (script.call_qualname(c) or "") in REBUILD and c.args and
            not isinstance(c.args[0], ast.Constant) for c in script.calls):
        return
    done: set[int] = set()
    for call in script.calls:
        if not is_backward(call) or not isinstance(call.func, ast.Attribute):
            continue
        target = call.func.value
        if isinstance(target, ast.Call) and target.args and \
                (dotted(target.func) or "").endswith("scale"):
            target = target.args[0]
        found = loss_sources(script, target)
        if found.graph or found.unknown:
            continue
        for rebuild, box in found.rebuilds:
            if id(rebuild) in done:
                continue
            done.add(id(rebuild))
            how = script.call_qualname(rebuild) or "torch.tensor"
            yield Hit(rebuild, f"{how}(...) copies the values in {box} into a "
                               f"new tensor with no grad_fn, and the loss that backward() runs "
                               f"on at {script.at(call.lineno)} is built from it: backward "
                               f"raises 'element 0 of tensors does not require grad'",
                      fix=f"keep the graph: torch.stack({box}) (or torch.cat) instead of "
                          f"rebuilding a tensor from the values")
