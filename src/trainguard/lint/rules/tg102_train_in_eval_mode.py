"""TG102 train-in-eval-mode: optimizer steps run after ``model.eval()`` without ``model.train()``.

The classic shape: ``model.train()`` once before the epoch loop, ``model.eval()`` (often inside
a ``validate()`` helper) inside it; from the second epoch on, BatchNorm stops updating its
running statistics and Dropout stops regularizing. Freezing BatchNorm on purpose
(``model.train()`` then ``bn.eval()``) is not a model-level eval and stays silent.
Reported at the ``eval()`` that is left in effect when the loop itself calls it; when a function
of this file that the loop calls runs it (a rollout's ``select_action()``, a ``snapshot()``, a
validator's ``run()``, a model's own ``generate()`` calling ``self.eval()``), where that
function returns (the mode is restored there; the loop's call is named). At the loop's call
into the helper, after which ``train()`` belongs, when the helper only switches modes, is in
another file or is a method of an ``nn.Module`` switching a part of itself. At the epoch loop
itself when it called ``train()`` once before it and evaluates between its steps' loops
(inline, or through a call), also from a loop of its own that runs no step
(``for cb in callbacks: cb.on_epoch_end(self)``): ``train()`` belongs at the top of each epoch
(MILVLG/mcan-vqa#26, ultralytics/ultralytics#20524). When the loop calls a
training function of this file that runs the steps in a loop of its own (``train(model,
loader)`` then ``test(model, loader)`` per epoch), at the start of that function, before the
statements that only set up its loop's data: ``train()`` belongs there. A loop over evaluation
data that steps in the eval mode that ended the training before it is reported at that loop
(:func:`_entered_in_eval`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trainguard.datanames import reads_eval_data
from trainguard.lint.astutil import dotted, parent, self_attr, walk_local
from trainguard.lint.events import Event, dispatches, events
from trainguard.lint.optimizers import held_modules
from trainguard.lint.regions import (backpropagated, loop_label, preceding_events,
                                     training_loops)
from trainguard.lint.rules import Hit
from trainguard.lint.script import Script
from trainguard.placement import body_statement, return_line, sets_modes_only

CODE = "TG102"
SKIP_IN_TESTS = True  # about a training run; test files are not runs


def check(script: Script) -> Iterator[Hit]:
    if not script.mode_dependent:
        return
    seen: set[int] = set()
    yield from _entered_in_eval(script)
    for loop in training_loops(script):
        evs = events(script, loop.body)  # type: ignore[attr-defined]
        first_step = next(i for i, e in enumerate(evs) if e.kind == "step")
        shared = _update_after_acting(script, loop, evs)
        if shared is not None:
            yield from _once(shared, seen)
            continue
        if any(e.kind in ("train", "mode?") and not _runs_once(script, e)
               for e in evs[:first_step]):
            continue
        modes = [e for e in evs if e.kind in ("train", "eval", "mode?")]
        if not modes or modes[-1].kind != "eval":
            continue
        last = modes[-1]
        if _trains_as_it_set(script, last):
            continue
        step = _step_reached(script, evs[first_step:], last.key)
        if not last.foreign and dispatches(script, last.via):
            yield from _callbacks(script, loop, modes, step, seen)
            continue
        # the eval() itself when the loop calls it; else the loop's call into the helper that
        # runs it (a validation function, a callback), after which train() belongs
        where = last.via or last.site
        if id(where) in seen:
            continue
        seen.add(id(where))
        yield _left_in_eval(script, loop, step, last, where)


def _left_in_eval(script: Script, loop: ast.AST, step: Event, last: Event,
                  where: ast.AST) -> Hit:
    """The finding for ``last.key``.eval() (``last``) left in effect over ``loop``'s next
    optimizer ``step``: at the training function run after it, at the loop whose train()
    ran once before it, at the end of the helper that ran it, or at ``where``."""
    fresh = _fresh_training(script, loop, step, last)
    if fresh is not None:  # train(model, loader) called after test(model, loader)
        func, stmt = fresh
        return Hit(stmt,
                   f"{func.name}() trains {last.key} in eval mode: {last.key}.eval() "
                   f"({last.place(script)}) runs in an evaluation {loop_label(script, loop)} "
                   f"calls before {func.name}(), and {func.name}() never calls "
                   f"{last.key}.train() before its optimizer step ({step.place(script)})",
                   fix=f"call {last.key}.train() here, before {func.name}() sets up its loop; "
                       f"the evaluation sets eval mode for itself")
    once = _trained_before(script, loop, step, last.via or last.site, last.key) \
        if isinstance(loop, (ast.For, ast.While)) else None
    if once is not None:  # train() belongs at the top of each pass: at this loop
        made = f"the call at {script.at(last.via.lineno)} runs" if last.via is not None \
            else "this loop's evaluation calls"
        return Hit(loop,
                   f"{last.key}.train() runs once, before this loop ({script.at(once.lineno)}"
                   f"); {made} {last.key}.eval() "
                   f"({last.place(script)}) and leaves it in effect, so the optimizer steps "
                   f"({step.place(script)}) of every later pass run in eval mode",
                   fix=f"call {last.key}.train() at the top of every pass (every epoch), as "
                       f"the first statement of this loop")
    helper = _helper(script, last) if last.via is not None else None
    if helper is not None:  # the function that ran the eval() returns leaving it in effect
        func, end = helper
        return Hit(end,
                   f"{func.name}() runs {last.key}.eval() ({last.place(script)}) and returns "
                   f"without restoring training mode; the loop calls it at "
                   f"{script.at(last.via.lineno)} and no {last.key}.train() follows before "
                   f"the next iteration's optimizer step ({step.place(script)}) in "
                   f"{loop_label(script, loop)}",
                   fix=f"call {last.key}.train() before {func.name}() returns, or right "
                       f"after the call at {script.at(last.via.lineno)}")
    if last.via is not None:
        return Hit(where,
                   f"this call runs {last.key}.eval() ({last.place(script)}) and leaves it in "
                   f"effect: no {last.key}.train() follows before the next iteration's "
                   f"optimizer step ({step.place(script)}) in {loop_label(script, loop)}",
                   fix=f"call {last.key}.train() right after this call (or at the start of "
                       f"every training epoch)")
    return Hit(where,
               f"{last.key}.eval() at {last.place(script)} is still in effect when the next "
               f"iteration's optimizer step ({step.place(script)}) runs: no "
               f"{last.key}.train() comes before it in {loop_label(script, loop)}",
               fix=f"call {last.key}.train() again before the next optimizer step: right "
                   f"after this evaluation, or at the start of every training epoch")


def _once(hit: Hit, seen: set[int]) -> Iterator[Hit]:
    """``hit``, unless a hit at the same node was given already (noted in ``seen``)."""
    if id(hit.node) not in seen:
        seen.add(id(hit.node))
        yield hit


def _entered_in_eval(script: Script) -> Iterator[Hit]:
    """A ``for`` loop over evaluation data (``test_loader``, ``batches(test_set)``, or an
    outer loop around one) entered with its model in eval mode that steps an optimizer: the
    code before it, in the same function, trained that model (an optimizer step), then called
    ``model.eval()``, and the loop steps an optimizer built before that ``eval()`` and known to
    hold the model, with no ``train()`` (of the model or of any part of it) since and none in
    the loop: an evaluation pass copied from the training loop, backward and step included.
    Reported at the loop, from which the steps go. Silent for a loop over training data
    (fine-tuning with BatchNorm statistics frozen on purpose), modes set part by part
    (``model.eval()`` then ``m.train()`` for the Dropout modules), an optimizer built after
    the ``eval()``, and a model the stepping optimizer does not hold (a target network)."""
    loops = training_loops(script)
    inside = {id(n) for loop in loops if isinstance(loop, (ast.For, ast.AsyncFor, ast.While))
              for n in ast.walk(loop) if n is not loop}
    for loop in loops:
        if not isinstance(loop, (ast.For, ast.AsyncFor)) or id(loop) in inside or \
                getattr(parent(loop), "_tg_loop", None) is loop or not any(
                    reads_eval_data(n.iter) for n in ast.walk(loop)
                    if isinstance(n, (ast.For, ast.AsyncFor)) and n in loops):
            continue  # (a comprehension's loop, or one whose steps run over training data)
        evs = events(script, loop.body)
        if any(e.kind in ("train", "eval", "mode?") for e in evs):
            continue
        before = preceding_events(script, loop)
        last = next((i for i in range(len(before) - 1, -1, -1)
                     if before[i].kind in ("train", "eval", "mode?")), None)
        if last is None or before[last].kind != "eval" or \
                not any(e.kind == "step" for e in before[:last]):
            continue
        ev = before[last]
        step = _step_reached(script, [e for e in evs if e.kind == "step"], ev.key)
        held = held_modules(script, step.key, step.node)
        if held is None or ev.key not in held or not _built_before(script, step.key, ev.line, loop):
            continue
        yield Hit(loop, f"this loop over evaluation data steps the optimizer "
                        f"({step.place(script)}) while {ev.key} is in eval mode: "
                        f"{ev.key}.eval() ({ev.place(script)}) ended the training before it, "
                        f"and no {ev.key}.train() comes before this loop or inside it, so the "
                        f"model is updated on this data with BatchNorm frozen and Dropout off",
                  fix="remove the backward and the optimizer step from this evaluation (and "
                      "run it under torch.no_grad()); if it is meant to train, call "
                      f"{ev.key}.train() before it")


def _built_before(script: Script, key: str | None, line: int, loop: ast.AST) -> bool:
    """Every binding of the optimizer ``key`` is made above ``line``: for a plain name, its
    bindings in the function of ``loop`` (none there: a parameter, built before the call)."""
    values = script.assignments.get(key or "", [])
    if key and "." not in key:
        scope = script.enclosing_function(loop)
        values = [v for v in values if script.enclosing_function(v) is scope]
    elif not values:
        return False
    return all(v.lineno < line for v in values)  # type: ignore[attr-defined]


def _update_after_acting(script: Script, loop: ast.AST, evs: list[Event]) -> Hit | None:
    """A method of a class that sets ``self.actor.eval()`` (an agent's ``select_action()``) and
    another method of that class that steps an optimizer over ``self.actor`` (its update), both
    called on one object in ``loop`` in that order, with no ``train()`` of that model between:
    the update trains the model in the mode the acting method left. Reported at the update's
    first forward of the model, where ``self.actor.train()`` goes: the class owns both modes."""
    for i, ev in enumerate(evs):
        cls = script.enclosing_class(ev.node)
        if ev.kind != "eval" or ev.foreign or ev.via is None or cls is None:
            continue
        for later in evs[i + 1:]:
            if later.key == ev.key and later.kind in ("train", "mode?"):
                break
            held = held_modules(script, later.key, later.node) if later.kind == "step" else None
            if held is None or ev.key not in held or later.via in (None, ev.via) or \
                    later.foreign:
                continue  # (a step the acting call reaches is one it skips: ``train=False``)
            func = script.enclosing_function(later.node)
            if script.enclosing_class(later.node) is not cls or func is None or \
                    _receiver(ev.via) != _receiver(later.via) or _receiver(ev.via) is None:
                break
            acting = script.enclosing_function(ev.node)
            fwd = next((n for n in walk_local(func) if isinstance(n, ast.Call) and
                        dotted(n.func) == ev.key and n.lineno < later.node.lineno), None)
            return Hit(fwd or later.node,
                       f"{func.name}() trains {ev.key} in eval mode: {acting.name}() "
                       f"sets {ev.key}.eval() ({ev.place(script)}), {loop_label(script, loop)} "
                       f"calls it at {script.at(ev.via.lineno)}, and {func.name}() then runs "
                       f"{ev.key}(...) up to its optimizer step ({later.place(script)}) with no "
                       f"{ev.key}.train() between",
                       fix=f"call {ev.key}.train() here, before the forward that trains it"
                           f"; or restore the mode before {acting.name}() returns")
    return None


def _receiver(call: ast.Call) -> str | None:
    """``agent`` in ``agent.select_action(s)``."""
    return dotted(call.func.value) if isinstance(call.func, ast.Attribute) else None


def _trains_as_it_set(script: Script, last: Event) -> bool:
    """``last`` is a ``self.eval()`` in a model's own method whose result a backward reaches
    (``loss = mse(reg.predict_train(x), y); loss.backward()``): the forward that trains runs in
    the mode the method chose for it on every call, a choice, not a mode left behind."""
    func = script.enclosing_function(last.node)
    return last.via is not None and _switches_itself(last) and \
        isinstance(func, ast.FunctionDef) and backpropagated(script, func)


def _switches_itself(ev: Event) -> bool:
    """``ev`` is a model's ``self.eval()``/``self.train()``, not a part's (``self.enc.eval()``)."""
    f = getattr(ev.node, "func", None)
    return isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and \
        f.value.id == "self"


def _step_reached(script: Script, evs: list[Event], key: str | None) -> Event:
    """The optimizer step the mode reaches: the first step of an optimizer known to hold
    ``key``'s parameters (an actor's, where the loop steps a critic first), else the first."""
    steps = [e for e in evs if e.kind == "step"]
    for ev in steps:
        held = held_modules(script, ev.key, ev.node)
        if held is not None and key in held:
            return ev
    return steps[0]


def _fresh_training(script: Script, loop: ast.AST, step: Event, last: Event
                    ) -> tuple[ast.FunctionDef, ast.stmt] | None:
    """``(function, where train() goes)`` when the step runs in a loop of its own inside a
    function of this file that ``loop`` calls (``train(model, loader)`` per epoch), and the
    ``eval()`` comes from another call of ``loop`` (``test(model, loader)``): each call of that
    training function starts in whatever mode the evaluation left, so ``train()`` belongs at
    its start, before the set-up of its loop (:func:`_before_setup`)."""
    if step.via is None or step.foreign or last.via is None or last.via is step.via:
        return None
    func = script.enclosing_function(step.node)
    if not isinstance(func, ast.FunctionDef) or func is script.enclosing_function(loop) or \
            script.enclosing_function(last.site) is func:
        return None
    stmt = body_statement(func.body, step.node.lineno)
    if not isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
        return None
    return func, _before_setup(func.body, stmt, last.key)


def _before_setup(body: list[ast.stmt], loop: ast.stmt, key: str | None) -> ast.stmt:
    """The first of the statements right before ``loop`` that leave the model ``key`` alone
    (``x, y = self.train_set``, ``perm = torch.randperm(n)``: the loop's data), else ``loop``:
    ``train()`` goes before that set-up, after whatever builds, loads or moves the model or
    hands its parameters to an optimizer (``if self.net is None: self._build()``)."""
    i = body.index(loop)
    while i > 0 and not (isinstance(body[i - 1], ast.Expr) and
                         isinstance(body[i - 1].value, ast.Constant)) and not any(
            isinstance(n, (ast.Name, ast.Attribute)) and dotted(n) == key
            for n in ast.walk(body[i - 1])):
        i -= 1
    return body[i]


def _runs_once(script: Script, ev: Event) -> bool:
    """A ``train()`` made under a lazy-initialisation guard (``if not self._initialized:
    self._initialize(n)``, whose ``_initialize`` builds ``self._net`` and calls its ``train()``):
    it runs on the first call only, so it sets no mode for later iterations (spotlight's
    ``fit()``, maciejkula/spotlight#154)."""
    if ev.foreign:
        return False
    if _init_guard(script, ev.node):
        return True
    func = script.enclosing_function(ev.node)
    sites = script.call_sites(func) if isinstance(func, ast.FunctionDef) else []
    return bool(sites) and all(_init_guard(script, site) for site in sites)


def _init_guard(script: Script, node: ast.AST) -> bool:
    """``node`` sits in the body of an ``if`` testing that a ``self`` attribute is unset
    (``if not self.x``, ``if self.x is None``, a property returning ``self._net is not None``)
    whose body, or a method of the class it calls, assigns that attribute."""
    n = node
    while n is not None and not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
        up = parent(n)
        if isinstance(up, ast.If) and n in up.body:
            tested = _self_attrs(script, up.test)
            if tested and tested & _assigned_in(script, up.body):
                return True
        n = up
    return False


def _self_attrs(script: Script, test: ast.AST) -> set[str]:
    """``self`` attributes an unset-test reads: ``not self.x``, ``self.x is None``, through one
    property of the class (``not self._initialized`` returning ``self._net is not None``)."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test = test.operand
    elif isinstance(test, ast.Compare) and len(test.ops) == 1 and \
            isinstance(test.ops[0], ast.Is) and isinstance(test.comparators[0], ast.Constant) \
            and test.comparators[0].value is None:
        test = test.left
    else:
        return set()
    attr = self_attr(test)
    if attr is None:
        return set()
    found = {attr}
    cls = script.enclosing_class(test)
    for f in cls.body if cls is not None else []:
        if isinstance(f, ast.FunctionDef) and f.name == attr and any(
                isinstance(d, ast.Name) and d.id == "property" for d in f.decorator_list):
            found |= {a for a in map(self_attr, ast.walk(f)) if a}
    return found


def _assigned_in(script: Script, body: list[ast.stmt]) -> set[str]:
    """``self`` attributes ``body`` assigns, also in the methods of the class it calls on
    ``self`` (one level)."""
    nodes = [n for stmt in body for n in ast.walk(stmt)]
    cls = script.enclosing_class(body[0]) if body else None
    methods = {f.name: f for f in (cls.body if cls is not None else [])
               if isinstance(f, ast.FunctionDef)}
    for call in [n for n in nodes if isinstance(n, ast.Call)]:
        name = self_attr(call.func)
        if name in methods:
            nodes += list(ast.walk(methods[name]))
    return {a for n in nodes if isinstance(n, (ast.Assign, ast.AnnAssign))
            for a in map(self_attr, n.targets if isinstance(n, ast.Assign) else [n.target]) if a}


def _callbacks(script: Script, loop: ast.AST, modes: list[Event], step: Event,
               seen: set[int]) -> Iterator[Hit]:
    """The loop dispatches callbacks (``for cb in self.callbacks: cb(self, it, logs)``) and
    those last to set the mode leave ``eval()`` in effect: each such ``eval()`` (after the last
    ``train()``) is reported at itself, as the runtime check does (a callback's mode is its
    own business; the loop cannot know which callback switched it)."""
    via = modes[-1].via
    for ev in reversed(modes):
        if ev.kind != "eval" or ev.via is not via:
            break
        if id(ev.node) in seen:
            continue
        seen.add(id(ev.node))
        f = getattr(ev.node, "func", None)
        own = ast.unparse(f.value) if isinstance(f, ast.Attribute) else ev.key
        yield Hit(ev.node,
                  f"{own}.eval() in a callback the loop dispatches at "
                  f"{script.at(via.lineno)} is still in effect when the next iteration's "
                  f"optimizer step ({step.place(script)}) runs: no {ev.key}.train() comes "
                  f"before it in {loop_label(script, loop)}",
                  fix=f"call {own}.train() at the end of this callback, or at the start of "
                      f"every training iteration")


def _helper(script: Script, last: Event) -> tuple[ast.FunctionDef, ast.AST] | None:
    """``(function, where it returns)`` for the function of this file that made the ``eval()``
    when it does more than switch modes and is no method of an ``nn.Module`` switching a part
    of itself (the runtime check's placement: a rollout's ``select_action()``, a
    ``snapshot()``, a model's own ``generate()`` calling ``self.eval()`` returns with the model
    in eval mode, and the mode is restored there). None: report at the loop's call."""
    if last.foreign:
        return None
    func = script.enclosing_function(last.node)
    if isinstance(func, ast.FunctionDef) and sets_modes_only(func) and last.via is not None:
        # a mode-only helper (``set_mode("eval", models)``) called by the function the loop
        # calls (``check_accuracy()``): that function returns leaving eval() in effect
        called = [t.func for t in script.targets(last.via) if not t.instance]
        func = called[0] if len(called) == 1 else func
    if not isinstance(func, ast.FunctionDef) or not func.body or sets_modes_only(func):
        return None
    cls = script.enclosing_class(func)
    ref = script.graph.class_named(cls.name) if cls is not None else None
    if not _switches_itself(last) and ref is not None and ref.node is cls and \
            script.graph.is_module_class(ref):
        return None  # a module switching a part of itself leaves it to its caller
    last_stmt = func.body[-1]
    if isinstance(last_stmt, ast.Return):
        return func, last_stmt
    return func, ast.Pass(lineno=return_line(func), col_offset=0)


def _trained_before(script: Script, loop: ast.AST, step: Event, via: ast.AST,
                    key: str | None) -> ast.Call | None:
    """The ``.train()`` call made once before an epoch loop (its steps run in a loop of their
    own: an inner loop, a ``train_epoch()`` call; the evaluation is called between those, in
    the epoch loop's own body), in the function around it: the evaluation undoes it for every
    later epoch, and ``train()`` belongs at the top of each one (reported at the epoch loop,
    as the run-time check names that ``train()`` and the loop). None otherwise."""
    around = script.enclosing_loops(via)
    if loop not in around or \
            step.via is None and script.enclosing_loops(step.node)[:1] == [loop]:
        return None  # an evaluation among the steps
    site = step.via or step.node
    if any(site in set(ast.walk(inner)) for inner in around[:around.index(loop)]):
        return None  # (a loop between, ``for cb in callbacks:``, that runs no step is fine)
    func = script.enclosing_function(loop) or script.tree
    inside = {id(n) for n in ast.walk(loop)}
    return next((n for n in walk_local(func) if isinstance(n, ast.Call) and
                 isinstance(n.func, ast.Attribute) and n.func.attr == "train" and
                 len(n.args) <= 1 and id(n) not in inside and n.lineno < loop.lineno and
                 (key is None or dotted(n.func.value) == key)), None)
