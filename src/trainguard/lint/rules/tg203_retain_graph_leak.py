"""TG203 retain-graph-leak: ``retain_graph=True`` on an iteration's last backward.

``retain_graph=True`` keeps the graph's saved tensors after backward so that a second backward
can run through it (https://pytorch.org/docs/stable/generated/torch.Tensor.backward.html). With
no second backward in the same iteration, those buffers outlive the step; a common cargo-cult
fix for "Trying to backward through the graph a second time" that hides a missing ``detach()``.
Silent when another backward or ``torch.autograd.grad`` follows before the next optimizer step
(the retained one is not the step's last: a WGAN-GP critic's ``pen.backward(retain_graph=True)``
then ``loss_d.backward()``, sdv-dev/CTGAN#37), or follows later in the same iteration and may
pass through the graph (GAN discriminator/generator steps, GradNorm's gradient norms).
When every later backward in the same function is built from values whose (uncut) history
shares no intermediate with this one's (a CycleGAN's discriminator losses on ``fake.detach()``
after the generator's last ``retain_graph=True``), none of them needs the graph: reported.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trainguard.lint.astutil import is_true, kwarg, parent
from trainguard.lint.cuts import CUT_ATTRS
from trainguard.lint.dataflow import last_assignment, stored_items, tuple_assignments
from trainguard.lint.events import Event, events
from trainguard.lint.regions import loop_label, training_loops
from trainguard.lint.rules import Edit, Hit
from trainguard.lint.script import Script

CODE = "TG203"
SKIP_IN_TESTS = True  # about a training run; test files are not runs


def check(script: Script) -> Iterator[Hit]:
    for loop in training_loops(script):
        evs = [e for e in events(script, loop.body)  # type: ignore[attr-defined]
               if e.kind in ("backward", "autograd", "step")]
        for i, e in enumerate(evs):
            call = e.node
            assert isinstance(call, ast.Call)
            if e.kind != "backward" or not is_true(kwarg(call, "retain_graph")):
                continue
            later = [b for b in evs[i + 1:] if b.kind != "step"]
            step = next((j for j in range(i + 1, len(evs)) if evs[j].kind == "step"), len(evs))
            if any(b.kind != "step" for b in evs[i + 1:step]):
                # not the step's last backward: a later one feeds the same optimizer step (a
                # WGAN-GP critic's penalty, then its loss: CTGAN's pen.backward(retain_graph=True))
                continue
            if later and not _passes_none(script, e, later):
                continue  # a later backward or autograd.grad may pass through the graph again
            edits = []
            if len(call.keywords) == 1 and not call.args:
                f = call.func
                edits = [Edit(f.end_lineno or f.lineno, (f.end_col_offset or 0) + 1,
                              call.end_lineno or call.lineno, (call.end_col_offset or 1) - 1, "")]
            yield Hit(call,
                      f"backward(retain_graph=True) at {script.at(call.lineno)} is the last "
                      f"backward of the iteration ({loop_label(script, loop)}): the graph's "
                      f"saved tensors stay alive after the step",
                      fix="drop retain_graph=True; if PyTorch then says 'Trying to backward "
                          "through the graph a second time', detach the state carried between "
                          "steps (e.g. hidden = hidden.detach())",
                      edits=edits, safe=False)


def _passes_none(script: Script, retained: Event, later: list[Event]) -> bool:
    """No later backward can pass through the retained one's graph: all are ``.backward()``
    calls in the same function, and the intermediate values each is built from share no name
    with those of the retained loss (a value that cannot be followed counts as shared)."""
    func = script.enclosing_function(retained.node)
    mine = _history(script, retained.node)
    if mine is None:
        return False
    for e in later:
        if e.kind != "backward" or script.enclosing_function(e.node) is not func:
            return False
        theirs = _history(script, e.node)
        if theirs is None or theirs & mine:
            return False
    return True


def _history(script: Script, call: ast.AST) -> set[tuple[str, int]] | None:
    """(name, line of its assignment) for every value with grad history (a model or a
    parameter in its making) that ``x`` in ``x.backward()`` is built from in its function,
    through names, stopping at cuts (``.detach()``, ``.item()``) and values computed under
    no_grad; inputs that no model touched are not part of a graph. None when part of it
    cannot be followed (an attribute of ``self`` read as a value, a name bound elsewhere than
    by a plain assignment of the function)."""
    f = call.func if isinstance(call, ast.Call) else None  # type: ignore[attr-defined]
    if not isinstance(f, ast.Attribute):
        return None
    func = script.enclosing_function(call)
    deps: dict[tuple[str, int], set[tuple[str, int]]] = {}
    made: set[tuple[str, int]] = set()  # a model or parameter is called or read in its value
    root = ("", 0)
    deps[root] = set()
    todo: list[tuple[ast.AST, ast.AST, tuple[str, int]]] = [(f.value, call, root)]
    while todo:
        expr, at, owner = todo.pop()
        if len(deps) > 200:
            return None
        if isinstance(expr, ast.Call):
            g = expr.func
            if isinstance(g, ast.Attribute) and g.attr in CUT_ATTRS:
                continue
            k = script.key(g)
            if k and k != "self" and script.is_model(k) or \
                    isinstance(g, ast.Attribute) and g.attr in ("parameters", "requires_grad_"):
                made.add(owner)
            todo.extend((a, at, owner) for a in [*expr.args, *(kw.value for kw in expr.keywords)])
            if isinstance(g, ast.Attribute):
                todo.append((g.value, at, owner))  # x.mean(): x
            continue
        if isinstance(expr, ast.Attribute):
            if isinstance(expr.value, ast.Name) and expr.value.id == "self":
                return None
            if expr.attr in ("weight", "bias"):
                made.add(owner)
            if expr.attr != "data":
                todo.append((expr.value, at, owner))
            continue
        if isinstance(expr, ast.Name):
            if expr.id in script.aliases or not isinstance(expr.ctx, ast.Load):
                continue
            value = last_assignment(expr.id, at)
            name = expr.id
            if value is None:
                value = _unpacked_from(expr.id, at, func)
                name = "*"  # the parts of one unpacked value share its history
            if value is None:
                if _bound_elsewhere(expr.id, func):
                    return None
                continue  # a parameter or global: no history made in this iteration
            key = (name, getattr(value, "lineno", 0))
            deps[owner].add(key)
            if key in deps:
                continue
            deps[key] = set()
            if not script.grad_disabled(value):
                todo.append((value, value, key))
                # preds = [] ... preds.append(u): what is appended
                todo.extend((item, item, key) for item in stored_items(expr.id, value))
            continue
        todo.extend((c, at, owner) for c in ast.iter_child_nodes(expr) if isinstance(c, ast.expr))
    carries = set(made)  # values with grad history: made here, or built from one that has it
    changed = True
    while changed:
        changed = False
        for key, ds in deps.items():
            if key not in carries and ds & carries:
                carries.add(key)
                changed = True
    return carries - {root}


def _unpacked_from(name: str, at: ast.AST, func: ast.AST | None) -> ast.expr | None:
    """The whole value a tuple assignment above ``at`` unpacks into ``name`` (``i, video =
    make_batch(...)``), or the iterable of the loop that binds it: its history stands for the
    name's (an over-approximation)."""
    if func is None:
        return None
    n = parent(at)
    while n is not None and n is not func:
        if isinstance(n, (ast.For, ast.AsyncFor)) and any(
                isinstance(t, ast.Name) and t.id == name for t in ast.walk(n.target)):
            return n.iter
        n = parent(n)
    found = [(line, value) for line, _, value in tuple_assignments(func).get(name, ())
             if line < at.lineno]  # type: ignore[attr-defined]
    return max(found, key=lambda f: f[0])[1] if found else None


def _bound_elsewhere(name: str, func: ast.AST | None) -> bool:
    """``name`` is bound in ``func`` by something other than a plain assignment (a loop
    target, a tuple unpacking of a call, a ``with ... as``, an augmented assignment)."""
    if func is None:
        return True
    for n in ast.walk(func):
        if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store):
            p = parent(n)
            if not (isinstance(p, ast.Assign) and n in p.targets):
                return True
    return False
