"""TG406 sigmoid-before-bce-with-logits: probabilities fed to ``BCEWithLogitsLoss``.

``BCEWithLogitsLoss`` applies the sigmoid itself
(https://pytorch.org/docs/stable/generated/torch.nn.BCEWithLogitsLoss.html); a sigmoid before
it squeezes predictions into (0.5, 0.73) and gradients vanish. The sigmoid is followed through
names, shape ops, ``nn.Sigmoid`` modules, ``nn.Sequential`` heads, factories and the model
class's ``forward`` (:mod:`trainguard.lint.activations`), and reported at the sigmoid (in
the loss's function, or in a model whose output a trainer feeds to its loss), or at
the loss when the sigmoid is in a helper or in the component that also picks the loss (an
output block whose ``forward`` returns probabilities and whose ``compute_loss`` uses logits):
there the probabilities are the component's contract and the loss is what to change, as it is
when the loss's input is a name other statements read too (a focal loss's ``probs``; not one
that says logits, ``y_logits``, whose author meant raw scores; nor one the sigmoid overwrote,
``x = torch.sigmoid(x)``: the logits are gone after it, so the sigmoid is reported) (unless
every call of a helper function in the file feeds such a loss: then the helper exists to feed
it, and its sigmoid is reported);
``nn.BCELoss`` after a sigmoid is the right pairing and stays silent.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trainguard.apifacts import named_as_logits
from trainguard.lint.activations import activation_of, helper_activations, module_application
from trainguard.lint.astutil import dotted, parent, statement_of, walk_local
from trainguard.lint.callgraph import bind_arguments
from trainguard.lint.dataflow import scope_of
from trainguard.lint.losses import loss_input, loss_kind
from trainguard.lint.rules import Edit, Hit
from trainguard.lint.script import Script

CODE = "TG406"


def check(script: Script) -> Iterator[Hit]:
    fed = []  # (loss call, its input, the node that applied the sigmoid)
    for call in script.calls:
        if loss_kind(script, call) != "BCEWithLogitsLoss":
            continue
        arg = loss_input(call)
        found = activation_of(script, arg) if arg is not None else None
        if found is not None and found[0] == "sigmoid":
            fed.append((call, arg, found[1]))
    helpers = helper_activations(script, [act for _, _, act in fed])
    for (call, arg, act), in_helper in zip(fed, helpers):
        if in_helper is not None:  # a helper that only feeds this loss: its sigmoid
            inner, first = in_helper
            if first:
                helper = script.segment(act.func) or "the helper"  # type: ignore[attr-defined]
                yield Hit(inner, f"this sigmoid's output, returned by {helper}(), is fed to "
                                 f"BCEWithLogitsLoss at {script.at(call.lineno)}, which applies "
                                 f"the sigmoid itself: the sigmoid is applied twice and "
                                 f"gradients vanish",
                          fix="return the logits (the loss applies the sigmoid)", safe=False)
            continue
        edits = []
        written = script.call_qualname(act) in ("torch.sigmoid", "torch.nn.functional.sigmoid") \
            or isinstance(act, ast.Call) and isinstance(act.func, ast.Attribute) \
            and act.func.attr == "sigmoid"
        if act is arg and isinstance(act, ast.Call) and written:
            inner = act.args[0] if act.args else (
                act.func.value if isinstance(act.func, ast.Attribute) else None)
            text = script.segment(inner) if inner is not None else None
            if text:
                edits = [Edit(act.lineno, act.col_offset, act.end_lineno or act.lineno,
                              act.end_col_offset or 0, text)]
        reused = isinstance(arg, ast.Name) and not named_as_logits(arg.id) and \
            _reused(script, arg, call)
        if isinstance(arg, ast.Name) and reused and written and \
                _overwrites_input(act, arg, call):
            # `x = torch.sigmoid(x)`: the loss cannot get the logits back; the sigmoid's line is
            # where they are lost, and where the probabilities need a name of their own
            yield Hit(act, f"this sigmoid replaces the logits in `{arg.id}` with "
                           f"probabilities, which BCEWithLogitsLoss at {script.at(call.lineno)} "
                           f"is fed and applies the sigmoid to again, so gradients vanish; "
                           f"other code reads the probabilities too, and after this line the "
                           f"logits are gone",
                      fix=f"bind the probabilities to a new name (`p = torch.sigmoid({arg.id})`) "
                          f"and feed `{arg.id}`, the logits, to the loss", safe=False)
            continue
        if isinstance(arg, ast.Name) and reused:
            # the probabilities serve other code too (a focal loss's p_t): the loss is the fix
            yield Hit(call, f"BCEWithLogitsLoss is fed `{arg.id}`, made by the sigmoid at "
                            f"{script.at(act.lineno)}, which the loss applies again, so "
                            f"gradients vanish; other code uses `{arg.id}` too, so this call is "
                            f"what to change",
                      fix="feed the logits (the sigmoid's input) to this loss")
            continue
        if not (isinstance(arg, ast.Name) and named_as_logits(arg.id)) \
                and _loss_to_change(script, act, call):
            yield Hit(call, f"BCEWithLogitsLoss is fed probabilities: the sigmoid at "
                            f"{script.at(act.lineno)} already made them, and the loss applies "
                            f"the sigmoid again, so gradients vanish",
                      fix="feed the logits (before the sigmoid) to this loss, or use "
                          "nn.BCELoss on the probabilities")
            continue
        gate = _gating(script, act)
        if gate is not None:  # forward needs the probabilities too: what it returns changes
            applied, name, read = gate
            yield Hit(applied, f"`{name}`, this sigmoid's output, is returned to "
                               f"BCEWithLogitsLoss at {script.at(call.lineno)}, which applies "
                               f"the sigmoid itself: the sigmoid is applied twice and gradients "
                               f"vanish; forward reads `{name}` at {script.at(read.lineno)} "
                               f"too, so the sigmoid stays",
                      fix="return the sigmoid's input (the logits) for the loss, and keep "
                          "the probabilities for forward's own use", safe=False)
            continue
        yield Hit(act, f"this sigmoid's output is fed to BCEWithLogitsLoss at "
                       f"{script.at(call.lineno)}, which applies the sigmoid itself: the "
                       f"sigmoid is applied twice and gradients vanish",
                  edits=edits, safe=False)


def _gating(script: Script, act: ast.AST) -> tuple[ast.Call, str, ast.Name] | None:
    """For ``self.sigmoid = nn.Sigmoid()`` built into a model whose ``forward`` applies it once,
    binding a name (``edge = self.sigmoid(cs)``) that forward also reads outside its ``return``
    (``torch.cat([feats, edge], 1)``, a gate): ``(the application, the name, that read)``. The
    probabilities are needed there, so the module is not what to remove (argusswift/
    YOLOv4-pytorch#89: a head's sigmoid objectness also weights its class scores)."""
    applied = module_application(script, act, "torch.nn.Sigmoid")
    bound = parent(applied) if applied is not None else None
    if not (isinstance(bound, ast.Assign) and len(bound.targets) == 1
            and isinstance(bound.targets[0], ast.Name)):
        return None
    forward = script.enclosing_function(applied)
    var = bound.targets[0].id
    stores = [n for n in walk_local(forward) if isinstance(n, ast.Name) and n.id == var
              and isinstance(n.ctx, ast.Store)]
    if len(stores) != 1:
        return None  # rebound: which value a read sees is not this one alone
    returned = {id(n) for r in walk_local(forward) if isinstance(r, ast.Return)
                for n in ast.walk(r)}
    reads = [n for n in walk_local(forward) if isinstance(n, ast.Name) and n.id == var
             and isinstance(n.ctx, ast.Load) and id(n) not in returned
             and n.lineno > bound.lineno and not _sigmoid_of(n)]
    return (applied, var, reads[0]) if reads else None


def _reused(script: Script, arg: ast.Name, loss: ast.AST) -> bool:
    """The loss input is a name that other statements of its scope read too (a focal loss's
    ``probs``, fed to the loss and used for ``p_t``): the probabilities are needed there. A
    read that treats it as logits, like the loss (:func:`_read_as_logits`: a sigmoid applied
    to it for the accuracy), needs no probabilities; nor does a read of another value the name
    held (a training loop's, before the evaluation reassigned it)."""
    stmt = statement_of(loss)
    inside = {id(n) for n in ast.walk(stmt)} if stmt is not None else set()
    scope = list(walk_local(scope_of(loss)))
    stores = [n for n in scope if isinstance(n, ast.Name) and n.id == arg.id and
              isinstance(n.ctx, ast.Store)]
    value = _binding(stores, arg)  # (reads of an earlier value of the name do not count)
    return any(isinstance(n, ast.Name) and n.id == arg.id and isinstance(n.ctx, ast.Load) and
               id(n) not in inside and not _read_as_logits(script, n, 2) and
               _binding(stores, n) is value for n in scope)


def _read_as_logits(script: Script, name: ast.Name, depth: int) -> bool:
    """``name`` is read as logits: a sigmoid applied to it (``torch.sigmoid(preds)``), a
    threshold at 0 (``preds > 0``), a ``BCEWithLogitsLoss`` fed it, or a helper function of the
    file handed it whose every read of that parameter is one of these (``binary_accuracy(preds,
    y)`` rounding ``torch.sigmoid(preds)``). A threshold at 0.5 or any other read uses the
    values as probabilities."""
    up = parent(name)
    if _sigmoid_of(name) or isinstance(up, ast.Compare) and _zero_threshold(up) or \
            isinstance(up, ast.Call) and loss_input(up) is name and \
            loss_kind(script, up) == "BCEWithLogitsLoss":
        return True
    call = up if isinstance(up, ast.Call) and up.func is not name else None
    func = script.callee(call) if call is not None else None
    if call is None or func is None or depth <= 0:
        return False
    params = [a.arg for a in func.args.posonlyargs + func.args.args]
    if script.enclosing_class(func) is not None and isinstance(call.func, ast.Attribute):
        params = params[1:]  # (a method: ``self`` is bound)
    handed = [p for p, a in bind_arguments(params, call).items() if a is name]
    uses = [n for n in walk_local(func) if isinstance(n, ast.Name) and handed and
            n.id == handed[0]]
    return len(handed) == 1 and bool(uses) and all(
        isinstance(n.ctx, ast.Load) and _read_as_logits(script, n, depth - 1) for n in uses)


def _zero_threshold(test: ast.Compare) -> bool:
    """``x > 0`` (or ``0 < x``): the sign of a logit, the class a sigmoid of 0.5 would pick."""
    return len(test.ops) == 1 and isinstance(test.ops[0], (ast.Gt, ast.GtE, ast.Lt, ast.LtE)) \
        and any(isinstance(c, ast.Constant) and c.value == 0 and not isinstance(c.value, bool)
                for c in (test.left, *test.comparators))


def _overwrites_input(act: ast.AST, arg: ast.Name, loss: ast.AST) -> bool:
    """``act`` is ``arg = torch.sigmoid(arg)`` (or ``arg.sigmoid()``) in the loss's own scope, and
    the binding the loss reads: the sigmoid overwrites the name that held the logits, so no
    later statement, the loss included, can read them."""
    stmt = parent(act)
    if not (isinstance(act, ast.Call) and isinstance(stmt, ast.Assign) and stmt.value is act
            and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
            and stmt.targets[0].id == arg.id and scope_of(act) is scope_of(loss)):
        return False
    inner = act.args[0] if act.args else (
        act.func.value if isinstance(act.func, ast.Attribute) else None)
    if not (isinstance(inner, ast.Name) and inner.id == arg.id):
        return False
    stores = [n for n in walk_local(scope_of(loss)) if isinstance(n, ast.Name) and
              n.id == arg.id and isinstance(n.ctx, ast.Store)]
    return _binding(stores, arg) is stmt.targets[0]


def _binding(stores: list[ast.Name], read: ast.Name) -> ast.Name | None:
    """The last of ``stores`` on a line above ``read``: the assignment whose value it reads."""
    above = [s for s in stores if s.lineno < read.lineno]
    return max(above, key=lambda s: (s.lineno, s.col_offset)) if above else None


def _sigmoid_of(name: ast.Name) -> bool:
    """``name`` is what a sigmoid is applied to: ``torch.sigmoid(name)``, ``F.sigmoid(name)``,
    ``name.sigmoid()``."""
    up = parent(name)
    if isinstance(up, ast.Attribute) and up.value is name and up.attr == "sigmoid":
        return isinstance(parent(up), ast.Call) and not parent(up).args  # type: ignore
    return isinstance(up, ast.Call) and up.args[:1] == [name] and \
        (dotted(up.func) or "").rsplit(".", 1)[-1] == "sigmoid"


def _loss_to_change(script: Script, act: ast.AST, loss: ast.AST) -> bool:
    """The sigmoid sits in a helper function, or in the class that also computes the loss (not
    in the loss's own function, nor in another class: a model's layer or ``forward``)."""
    where = script.enclosing_function(act)
    if where is script.enclosing_function(loss):
        return False
    cls = script.enclosing_class(act)  # a module's layer or forward
    return cls is script.enclosing_class(loss) if cls is not None else True
