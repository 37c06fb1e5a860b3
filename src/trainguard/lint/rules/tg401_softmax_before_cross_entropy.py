"""TG401 softmax-before-cross-entropy: probabilities fed to a loss that wants logits.

``CrossEntropyLoss`` applies ``log_softmax`` itself
(https://pytorch.org/docs/stable/generated/torch.nn.CrossEntropyLoss.html); a softmax before it
squashes the logits, so the loss saturates and gradients shrink. ``NLLLoss`` wants
log-probabilities, so a plain softmax before it is wrong too. ``log_softmax`` before either is
right (harmless for CrossEntropyLoss) and stays silent. The softmax is followed through names,
``.view``/``.reshape``, ``nn.Softmax`` modules, ``nn.Sequential(..., nn.Softmax())``, factories
that return such a head, and the ``forward`` of the model's class however the model reaches the
loss (``Net().to(device)``, ``self.model`` set from a constructor argument). Reported at the
softmax when it is in the file (the line to change), else at the loss call; probabilities
returned by another method of the model (``model.predict_proba(x)``) or a helper are reported
at that call, unless every call of that function in the file feeds such a loss: then the
function exists to feed it, and its softmax is the line to change. Probabilities made by mixing one-hot label rows with softmax weights (a
matching network's ``softmax(sims) @ F.one_hot(y).float()``) are reported at the loss: there
is no final softmax to remove. The loss may be a parameter that the callers fill with a loss module, a
trainer's attribute set from its constructor, or a config's choice (:mod:`trainguard.lint.losses`);
a final layer handed to the factory as an argument counts when every call passes one.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trainguard.lint.activations import activation_of, helper_activations, module_application
from trainguard.lint.losses import loss_input, loss_kind
from trainguard.lint.rules import Edit, Hit
from trainguard.lint.script import Script

CODE = "TG401"
_FUNCS = {"torch.softmax", "torch.nn.functional.softmax"}


def check(script: Script) -> Iterator[Hit]:
    fed = []  # (loss call, its kind, its input, the node that applied the softmax)
    for call in script.calls:
        kind = loss_kind(script, call)
        if kind not in ("CrossEntropyLoss", "NLLLoss"):
            continue
        arg = loss_input(call)
        found = activation_of(script, arg) if arg is not None else None
        if found is not None and found[0] == "softmax":
            fed.append((call, kind, arg, found[1]))
    helpers = helper_activations(script, [act for _, _, _, act in fed])
    for (call, kind, arg, act), in_helper in zip(fed, helpers):
        if in_helper is not None:  # a helper that only feeds such losses: its softmax
            inner, first = in_helper
            if first:
                helper = script.segment(act.func) or "the helper"  # type: ignore[attr-defined]
                yield Hit(inner, f"this softmax's output, returned by {helper}(), is fed to "
                                 f"{kind} at {script.at(call.lineno)}, which "
                                 + ("applies log_softmax itself: softmax is applied twice and "
                                    "the loss saturates" if kind == "CrossEntropyLoss" else
                                    "expects log-probabilities"),
                          fix="return the logits (the loss applies log_softmax)"
                          if kind == "CrossEntropyLoss" else "return log_softmax instead",
                          safe=False)
            continue
        if isinstance(act, ast.BinOp) or script.call_qualname(act) in ("torch.matmul",
                                                                        "torch.bmm"):
            # softmax weights mixing one-hot labels: probabilities by design, the loss is
            # what to change
            yield Hit(call, f"{kind} is fed class probabilities: the product at "
                            f"{script.at(act.lineno)} mixes one-hot labels with softmax "
                            f"weights, and {kind} "
                            + ("applies log_softmax again, so the loss saturates"
                               if kind == "CrossEntropyLoss" else "expects log-probabilities"),
                      fix="take the log of the probabilities and use F.nll_loss "
                          "(torch.log(probs.clamp_min(1e-8)))")
            continue
        edits = []
        if act is arg and isinstance(act, ast.Call) and _written_softmax(script, act):
            inner = act.args[0] if act.args and not isinstance(act.func, ast.Attribute) or \
                (act.args and script.call_qualname(act) in _FUNCS) else (
                act.func.value if isinstance(act.func, ast.Attribute) else None)
            text = script.segment(inner) if inner is not None else None
            if text and kind == "CrossEntropyLoss":
                edits = [Edit(act.lineno, act.col_offset, act.end_lineno or act.lineno,
                              act.end_col_offset or 0, text)]
        own = not isinstance(act, ast.Call) or _written_softmax(script, act) or \
            script.call_qualname(act) == "torch.nn.Softmax" or \
            isinstance(act.func, ast.Call)  # nn.Softmax(dim=1)(x)
        what = "this softmax's output" if own else \
            f"the output of `{script.segment(act) or 'the model'}`, which ends in a softmax,"
        if kind == "CrossEntropyLoss":
            msg = (f"{what} is fed to {kind} at {script.at(call.lineno)}, which "
                   f"applies log_softmax itself: softmax is applied twice and the loss "
                   f"saturates")
            fix = "pass the raw logits to the loss"
        else:
            msg = (f"{what} is fed to NLLLoss at {script.at(call.lineno)}, which "
                   f"expects log-probabilities")
            fix = "use log_softmax before NLLLoss, or raw logits with CrossEntropyLoss"
        # reported at the softmax: the line to change (its loss is named in the message); for
        # an ``nn.Softmax`` module before CrossEntropyLoss, where forward applies it (the call
        # the fix removes; before NLLLoss, its construction becomes nn.LogSoftmax)
        at = _applied(script, act) if kind == "CrossEntropyLoss" else act
        yield Hit(at, msg, fix=fix, edits=edits, safe=False)


def _applied(script: Script, act: ast.AST) -> ast.AST:
    """For ``self.softmax = nn.Softmax(dim=1)`` in ``__init__``: the one ``self.softmax(...)``
    call in the class's ``forward`` (the statement the fix removes); else ``act``."""
    return module_application(script, act, "torch.nn.Softmax") or act


def _written_softmax(script: Script, call: ast.Call) -> bool:
    """``F.softmax(x)`` or ``x.softmax(1)`` itself, not a model whose forward ends in softmax."""
    return script.call_qualname(call) in _FUNCS or (
        isinstance(call.func, ast.Attribute) and call.func.attr == "softmax")
