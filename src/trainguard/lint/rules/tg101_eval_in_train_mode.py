"""TG101 eval-in-train-mode: evaluation runs while the model is still in train mode.

Dropout keeps dropping and BatchNorm normalizes with batch statistics (and updates its running
statistics) unless ``model.eval()`` runs first; see
https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.eval.
Fires only when the file shows mode-dependent modules (Dropout, BatchNorm, zoo models), itself or
in the class or factory of another project file that builds the model (``trainguard.lint.project``),
and the mode before the evaluation is known to be train: a ``.train()`` call, a training loop, or
a freshly built model, with no ``.eval()`` in between. A copy of the model (``copy.deepcopy``,
``AveragedModel``: an EMA or SWA average) has a mode of its own: one made in train mode and
evaluated without its own ``eval()`` counts (:mod:`trainguard.lint.copies`).
Evaluation is a loop or function that feeds
a metric, a function named for evaluation whose forwards run under no_grad (``predict_proba``),
or a call of a model's inference method under no_grad (``model.generate(idx)``,
``net.transcribe(audio)``) outside training loops, or a call handing the model to a project
helper that runs it only with grad disabled (``embed_all(encoder, corpus)``; ipolharvard/ethos-ares#20:
no_grad does not set eval mode). A forward whose output only becomes predictions
(``model(x).argmax(1)``, ``logits = model(x)`` then ``logits.topk(5)``, through a softmax) and
never reaches a loss or a backward is inference too, wherever it is written: notebook cells or
top-level statements after training, a project helper handed the model (``predict(model, x)``
returning ``model(x).argmax(1)``).
A helper shared by training and evaluation that calls ``model.train()`` unconditionally and then
runs the model (``out, loss = process_batch(model, batch)``) undoes the ``model.eval()`` of the
evaluation that calls it (pliang279/MultiBench#26): reported at that ``train()``.
An evaluator that readies the model by freezing its parameters instead of ``eval()`` is
reported at the freeze (adapter-hub/adapters#324). An RL rollout runs the policy in train mode on
purpose while it collects experience; one that runs only after all training collects nothing
and is an evaluation (hill-a/stable-baselines#833).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trainguard.lint.astutil import dotted, parent, walk_local
from trainguard.lint.copies import train_mode_copy_forwards
from trainguard.lint.dataflow import last_assignment
from trainguard.lint.events import Event, events
from trainguard.lint.factories import factory_of
from trainguard.lint.modes import mode_before
from trainguard.lint.partial_eval import partial_eval
from trainguard.lint.phases import phase_evaluations
from trainguard.lint.regions import (INFERENCE_METHODS, eval_regions, forward_calls,
                                     inference_calls, preceding_events, rollout,
                                     training_loops)
from trainguard.lint.rules import Hit
from trainguard.lint.sampling import helper_samples, sampled_pass, samples_only
from trainguard.lint.script import Script
from trainguard.lint.untouched import never_switched
from trainguard.placement import body_statement, setup_start, stretch_apart

CODE = "TG101"
SKIP_IN_TESTS = True  # about a training run; test files are not runs


def check(script: Script) -> Iterator[Hit]:
    if not script.mode_dependent:
        return
    yield from _inference_entry_points(script)
    yield from _eval_undone_by_helper(script)
    yield from _train_for_every_phase(script)
    for region in eval_regions(script):
        body = region.node.body  # type: ignore[attr-defined]
        if any(e.kind in ("eval", "mode?") for e in events(script, body)):
            yield from _part_switched(script, region)
            continue
        if samples_only(script, region.forwards):
            continue  # Monte Carlo passes: dropout is on on purpose
        first = region.forwards[0]
        fwd = dotted(first.func) or "the model"
        if isinstance(region.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield from _function_region(script, region, first, fwd)
            continue
        mode, why = mode_before(script, first)
        where = "at the start of this block" if isinstance(region.node, (ast.If, ast.With)) \
            else "before this loop"
        undone = _train_undoing_eval(script, first) if mode == "train" else None
        chosen = _train_for_evaluation(script, [first]) if mode == "train" else None
        if undone is None and chosen is not None:
            yield _chosen_train_hit(script, chosen, region.label, fwd, first)
        elif undone is not None:  # model.eval(), then a model.train() before the evaluation
            yield Hit(undone.node, f"this {undone.key}.train() undoes the {undone.key}.eval() "
                                   f"before it with no training in between, and {region.label} "
                                   f"then runs {fwd}(...) ({script.at(first.lineno)}) in train "
                                   f"mode; Dropout and BatchNorm act as in training",
                      fix="remove this train() call from the evaluation (call model.train() "
                          "before the next training step instead)")
        elif mode == "train" and not _adapts_when_called(script, first):
            start = _region_start(script, region.node, first)
            if start is not first:
                where = "before this loop" if isinstance(start, (ast.For, ast.While)) else \
                    "before this block" if isinstance(start, ast.With) else "before this statement"
            yield Hit(start, f"{region.label} runs "
                      f"{fwd}(...) ({script.at(first.lineno)}) in train mode ({why}); Dropout "
                             f"and BatchNorm act as in training",
                      fix=f"call model.eval() {where}, and model.train() before training "
                          f"again")
        elif mode == "unknown":
            yield from _never_switched(script, region)
    yield from _train_mode_copies(script)


def _function_region(script: Script, region, first: ast.Call,  # type: ignore[no-untyped-def]
                     fwd: str) -> Iterator[Hit]:
    """An evaluation written as a function (``evaluate(model, loader)``): judged by the mode its
    calls leave the model in, reported where the fix goes (the call, a ``train()`` meant as
    ``eval()``, the loader, the freezing step, or the function's first statement)."""
    body = region.node.body
    trained, evald = [], False
    # (a call that may run several methods counts too: ``cb.on_epoch_end(self)``
    # over a trainer's callbacks runs this one for the callback of this class)
    for site in script.call_sites(region.node) or script.graph.sites(region.node) or \
            script.graph.instance_sites(region.node):
        mode, why = mode_before(script, site)
        if mode == "train" and not _in_rollout(script, site) and \
                not _adapts_when_called(script, site):
            trained.append((site, why))
        evald = evald or mode == "eval"
    if not trained:
        yield from _never_switched(script, region)
        return
    own = next((e for e in events(script, body) if e.kind == "train" and e.via is None
                and e.node.lineno < first.lineno), None)  # type: ignore[attr-defined]
    if own is not None:
        # predict() calls model.train() itself before its forward: that call is the
        # fault, whatever its callers do
        yield Hit(own.node, f"{region.label} calls {own.key}.train() before it runs "
                            f"{fwd}(...): Dropout and BatchNorm act as in training "
                            f"during the evaluation",
                  fix=f"call {own.key}.eval() here instead")
        return
    if evald or any(_caller_sets_eval(script, site) for site, _ in trained):
        # the callers manage the mode (another caller, or this one, calls eval()
        # before the evaluation): the call that runs it in train mode is the fault
        site, why = trained[0]
        yield Hit(site, f"{region.label} runs {fwd}(...) in train mode ({why}); "
                        f"Dropout and BatchNorm act as in training",
                  fix=f"call model.eval() before {region.label}, and model.train() "
                      f"before training again")
        return
    # a train() called for the evaluation, where eval() was meant
    chosen = _train_for_evaluation(script, [site for site, _ in trained])
    if chosen is not None:
        yield _chosen_train_hit(script, chosen, region.label, fwd, first)
        return
    # Every caller (one or several) leaves the model training: nothing ever hands the
    # evaluation a model in eval mode, so the function is the one place where
    # model.eval() fixes it (the line its fix changes); unless every model it is
    # handed comes straight from one loader of the file, whose return fixes each use
    loader = _loader_left_training(script, [site for site, _ in trained])
    if loader is not None:
        yield loader
        return
    lines = script.at_lines(sorted({s.lineno for s, _ in trained}))
    each = "at each of its calls" if len(trained) > 1 else "at its call"
    frozen = _frozen_for_eval(script, region.node, fwd)
    if frozen is not None:  # the evaluator's preparation: eval() belongs with it
        stmt, method = frozen
        yield Hit(stmt, f"{method.name}() freezes {fwd}'s parameters for the "
                        f"evaluation but leaves it in train mode: requires_grad=False "
                        f"stops gradients, not Dropout or BatchNorm, and "
                        f"{region.label} then runs {fwd}(...) "
                        f"({script.at(first.lineno)}) in train mode {each} ({lines}; "
                        f"{trained[0][1]})",
                  fix=f"call {fwd}.eval() here, where the model is frozen")
        return
    owner = "self" if fwd in ("self", "self.forward") else "model"  # a module's method
    yield Hit(_statement_holding(region.node, first),
              f"{region.label} runs {fwd}(...) ({script.at(first.lineno)}) in train "
              f"mode {each} ({lines}; {trained[0][1]}); Dropout and BatchNorm act as "
              f"in training",
              fix=f"call {owner}.eval() in {region.label}, before this statement, and "
                  f"model.train() before training again")


def _part_switched(script: Script, region) -> Iterator[Hit]:  # type: ignore[no-untyped-def]
    """The evaluation puts only parts of its model in eval mode (``self.model.backbone.eval()``)
    while another part holds Dropout or BatchNorm (``self.head``): reported at that ``eval()``."""
    found = partial_eval(script, region.node.body, region.forwards,
                         lambda value: _builds_mode_dependent(script, value))
    if found is None:
        return
    first = found.parts[0]
    left = ", ".join(f"{found.model}.{name}" for name in found.left)
    yield Hit(first.site,
              f"{first.key}.eval() switches only a part of {found.model} before {region.label} "
              f"runs {found.model}(...): {left} still holds Dropout or BatchNorm in train mode, "
              f"so the evaluation drops units or normalizes with batch statistics",
              fix=f"call {found.model}.eval() here, for the whole model")


def _builds_mode_dependent(script: Script, value: ast.expr) -> bool:
    """``value``, assigned to a model's attribute, builds a mode-dependent module: named in its
    own text (``nn.Sequential(nn.Linear(128, 64), nn.Dropout(0.5))``), or shown by the class or
    layer factory of this file it calls (``self.head = Head(64)``)."""
    from trainguard.lint.project import MODE_DEPENDENT

    if MODE_DEPENDENT.search(script.segment(value) or ""):
        return True
    if not isinstance(value, ast.Call):
        return False
    ref = script.graph.class_named(dotted(value.func)) if isinstance(value.func, ast.Name) \
        else None
    made = ref.node if ref is not None and ref.script is script else _layer_factory(script, value)
    return made is not None and _class_mode_dependent(script, made, set())


def _never_switched(script: Script, region) -> Iterator[Hit]:  # type: ignore[no-untyped-def]
    """The region's first forward of a model the file never switches out of train mode (a
    frozen feature network scored under no_grad: :mod:`trainguard.lint.untouched`)."""
    for call in region.forwards:
        found = never_switched(script, call)
        if found is None:
            continue
        built = found.built
        yield Hit(call, f"{region.label} runs {found.key}(...) in train mode: the network "
                        f"built at {script.at(built.lineno)} is never put in eval mode and "
                        f"never trained (modules start in train mode), so Dropout drops and "
                        f"BatchNorm normalizes with batch statistics and overwrites its "
                        f"running statistics",
                  fix=f"call {found.key}.eval() once after it is built or loaded (it is "
                      f"never trained, so it can stay in eval mode)")
        return


def _in_rollout(script: Script, site: ast.AST) -> bool:
    """``site`` lies in a function that steps an environment (an RL rollout collecting
    transitions runs the policy in train mode on purpose: CATALOG precision for TG101), unless
    that rollout runs only after all training (:func:`_after_all_training`)."""
    func = script.enclosing_function(site)
    return func is not None and rollout(script, func) and not _after_all_training(script, func)


def _after_all_training(script: Script, func: ast.AST) -> bool:
    """Every call of ``func`` is a module-level statement after the end of the file's last
    training loop, and every training loop is a module-level loop: no optimizer step follows
    the rollout, so no transition it collects can feed training; it scores the trained policy
    (facebookresearch/torchbeast#20: acting in train mode is a choice while collecting
    experience, not when evaluating)."""
    sites = script.call_sites(func)  # type: ignore[arg-type]
    loops = training_loops(script)
    if not sites or not loops or any(
            not isinstance(loop, (ast.For, ast.AsyncFor, ast.While)) or
            script.enclosing_function(loop) is not None for loop in loops):
        return False
    end = max(getattr(loop, "end_lineno", None) or loop.lineno for loop in loops)
    return all(script.enclosing_function(s) is None and s.lineno > end for s in sites)


def _train_for_evaluation(script: Script, sites: list[ast.AST]) -> Event | None:
    """The one ``model.train()`` call, made in the code's own body, that every evaluation site
    in ``sites`` runs after with no backward, step or other mode call between, when nothing
    trains after it either (its function runs no backward; at a script's top level, no later
    statement and no loop around it does): a test routine that loads a checkpoint and calls
    ``train()`` where ``eval()`` was meant. That call, not a missing ``eval()``, is the line to
    change."""
    found: list[Event] = []
    for site in sites:
        for e in reversed(preceding_events(script, site)):
            if e.kind in ("backward", "step", "eval", "mode?", "autograd"):
                return None
            if e.kind == "train":
                found.append(e)
                break
        else:
            return None
    ev = found[0] if found else None
    if ev is None or ev.via is not None or not isinstance(ev.node, ast.Call) or \
            any(e.node is not ev.node for e in found):
        return None
    scope = script.enclosing_function(ev.node)
    later = [scope] if scope is not None else [
        *script.enclosing_loops(ev.node),  # (a loop's next pass runs after it too)
        *(st for st in script.tree.body if st.lineno > ev.node.lineno)]  # type: ignore
    return None if any(script.has_backward(n) for n in later) else ev


def _chosen_train_hit(script: Script, ev: Event, label: str, fwd: str, first: ast.AST) -> Hit:
    return Hit(ev.node, f"this {ev.key}.train() puts the model in train mode and nothing trains "
                        f"after it: the evaluation below, {label}, runs {fwd}(...) "
                        f"({script.at(first.lineno)}) in train mode, so Dropout and BatchNorm "
                        f"act as in training (and BatchNorm overwrites its running statistics)",
               fix=f"call {ev.key}.eval() here instead")


def _train_undoing_eval(script: Script, first: ast.AST):  # type: ignore[no-untyped-def]
    """The last ``train()`` before ``first`` in its function when it follows an ``eval()`` with
    no backward or step in between, and none runs between it and ``first`` (MultiBench#26:
    ``model.eval()``, then ``model.train()`` inside the validation block)."""
    evs = [e for e in preceding_events(script, first) if e.via is None]
    for i in range(len(evs) - 1, -1, -1):
        e = evs[i]
        if e.kind in ("backward", "step"):
            return None
        if e.kind == "train":
            before = evs[:i]
            for b in reversed(before):
                if b.kind in ("backward", "step", "train"):
                    return None
                if b.kind == "eval":
                    return e
            return None
    return None


def _region_start(script: Script, region: ast.AST, first: ast.AST) -> ast.AST:
    """Where ``model.eval()`` goes for an evaluation region inside a function that only
    evaluates (no backward in it: ``get_test_accuracy(model, loader)``): before the statement
    of its body that holds the region (its ``with torch.no_grad():`` block); at a script's top
    level, before the top-level statement that holds it when that statement only evaluates
    (and its accumulators' set-up). Inside a scope that also trains (an epoch loop with a
    validation pass after its batches), the block that opens the evaluation apart from the
    training (its ``no_grad`` block or loop, :func:`trainguard.placement.stretch_apart`), as
    the runtime check reports it; the model call when none does (a test batch scored inside
    the training step's own iteration)."""
    func = script.enclosing_function(region)
    # at a script's top level, the top-level statement that holds the region is the scope
    scope = func if func is not None else body_statement(script.tree.body, region.lineno)
    if scope is None:
        return first
    trains = [n.lineno for n in walk_local(scope) if isinstance(n, ast.Call) and
              isinstance(n.func, ast.Attribute) and n.func.attr in ("backward", "step")]
    if not trains:
        return _statement_holding(func or script.tree, first)
    line = first.lineno  # type: ignore[attr-defined]
    avoid = max((t for t in trains if t < line), default=min(trains))
    _, stmt = stretch_apart(getattr(func or script.tree, "body", []), line, avoid)
    if stmt is None or stmt.lineno == line:
        return first  # (the forward's own statement: its column is the better place)
    return stmt


def _statement_holding(func: ast.AST, node: ast.AST) -> ast.AST:
    """The statement at the top of ``func``'s body that holds ``node`` (the loop or ``no_grad``
    block the evaluation's forward runs in), or the first of the statements right before it
    that set up what it reads (``total, correct = 0, 0``, ``src, tgt = data``): ``model.eval()``
    goes there, after the statement that binds the model the forward runs."""
    body = getattr(func, "body", ())
    stmt = body_statement(body, node.lineno)  # type: ignore[attr-defined]
    model = (dotted(node.func) or "").split(".", 1)[0] if isinstance(node, ast.Call) else ""
    return setup_start(body, stmt, models=(model,)) if stmt is not None else node


def _frozen_for_eval(script: Script, func: ast.AST,
                     fwd: str) -> tuple[ast.stmt, ast.FunctionDef] | None:
    """``(statement, method)`` for a method of the evaluation's class that freezes the model it
    runs (``for p in self.model.parameters(): p.requires_grad = False``,
    ``self.model.requires_grad_(False)``), when that class trains nothing (no ``backward``,
    no optimizer ``step``): an evaluator readying the model with a freeze instead of
    ``eval()`` (adapter-hub/adapters#324); ``eval()`` belongs beside the freeze. A trainer's
    frozen backbone is part of its training, not an evaluation's preparation."""
    cls = script.enclosing_class(func)
    if cls is None or not fwd.startswith("self.") or any(
            isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and
            n.func.attr in ("backward", "step", "zero_grad") for n in ast.walk(cls)):
        return None
    for method in cls.body:
        if not isinstance(method, ast.FunctionDef):
            continue
        for stmt in walk_local(method):
            if isinstance(stmt, ast.For) and isinstance(stmt.iter, ast.Call) and \
                    dotted(stmt.iter.func) == f"{fwd}.parameters" and \
                    isinstance(stmt.target, ast.Name) and \
                    _freezes(stmt.body, stmt.target.id):
                return stmt, method
            if isinstance(stmt, ast.Expr) and _freezes([stmt], fwd):
                return stmt, method
    return None


def _freezes(body: list[ast.stmt], name: str) -> bool:
    """``body`` sets ``name``'s ``requires_grad`` off: ``name.requires_grad = False`` or
    ``name.requires_grad_(False)``."""
    for st in body:
        if isinstance(st, ast.Assign) and len(st.targets) == 1 and \
                dotted(st.targets[0]) == f"{name}.requires_grad" and \
                isinstance(st.value, ast.Constant) and st.value.value is False:
            return True
        call = st.value if isinstance(st, ast.Expr) else None
        if isinstance(call, ast.Call) and dotted(call.func) == f"{name}.requires_grad_" and \
                len(call.args) == 1 and isinstance(call.args[0], ast.Constant) and \
                call.args[0].value is False:
            return True
    return False


def _caller_sets_eval(script: Script, site: ast.AST) -> bool:
    """The code before ``site`` in its function puts a model in eval mode: the caller manages
    the mode itself (and undid it, or set it on the wrong object), so the call is the fault."""
    return any(e.kind == "eval" for e in preceding_events(script, site))


def _train_mode_copies(script: Script) -> Iterator[Hit]:
    """A model's copy (EMA, SWA, snapshot: :mod:`trainguard.lint.copies`) made in train mode
    and evaluated without its mode ever being set: ``model.eval()`` does not reach it."""
    for c in train_mode_copy_forwards(script):
        if samples_only(script, [c.forward]):
            continue
        yield Hit(c.forward, f"{c.key} is a copy of {c.source} made at "
                             f"{script.at(c.made.lineno)} while {c.source} was in train mode "
                             f"({c.why}), and nothing sets the copy's mode since: this forward "
                             f"evaluates it in train mode, with Dropout and BatchNorm acting as "
                             f"in training",
                  fix=f"call {c.key}.eval() before evaluating the copy")


def _inference_entry_points(script: Script) -> Iterator[Hit]:
    """``model.generate(...)`` (or ``predict``, ``transcribe``, ...) under no_grad while the
    model is in train mode: an inference entry point however the code around it is named."""
    regions = [r.node for r in eval_regions(script)]
    inside: set[int] | None = None
    found: list[tuple[ast.Call, str]] = []  # (call, why its model is in train mode)
    for call in inference_calls(script):
        if inside is None:  # (the nodes of every evaluation region, read once)
            inside = {id(n) for r in regions for n in ast.walk(r)}
        if id(call) in inside:
            continue  # an evaluation region: judged below, with its mode events
        if any(t.func is r for t in script.targets(call) for r in regions):
            continue  # a call of an evaluation function: judged below, at its call sites
        if sampled_pass(script, call) or helper_samples(script, call):
            continue  # Monte Carlo passes: dropout is on on purpose
        if any(e.kind in ("eval", "mode?") for t in script.targets(call) if not t.instance
               for e in events(script, t.func.body)):
            continue  # the method sets the mode itself (``predict()`` calling ``self.eval()``)
        mode, why = mode_before(script, call)
        if mode != "train" or _mode_behaviour_changed(script, call) or \
                not _may_depend_on_mode(script, call) or _adapts_when_called(script, call):
            continue
        found.append((call, why))
    helpers = _helpers_always_trained(script, found)
    for call, why in found:
        helper = helpers.get(id(call))
        if helper is not None:
            if helper is not False:
                yield helper
            continue
        name = dotted(call.func) or "the model's inference method"
        how = "runs inference with grad disabled" if script.grad_disabled(call) else \
            "runs inference (its output only becomes predictions)"
        yield Hit(call, f"{name}(...) {how} while the model is in train mode ({why}): "
                        f"Dropout drops and BatchNorm uses batch statistics, so the output "
                        f"varies from call to call",
                  fix="call model.eval() before inference, and model.train() before training "
                      "again")


def _adapts_when_called(script: Script, call: ast.Call) -> bool:
    """The model called (or handed to the helper called) is an instance of a class of this file
    whose ``forward``, or a method it calls on ``self``, runs ``backward()``: each call trains it
    (test-time adaptation such as TENT, which updates the norm layers' affine parameters on
    every test batch, in train mode on purpose: vita-epfl/ttt-plus-plus#8), so the call is no
    inference."""
    models = [call.func.value if isinstance(call.func, ast.Attribute) else call.func]
    models += [a for a in call.args if isinstance(a, ast.Name)]
    for expr in models:
        for ref in script.graph.types(expr) or ():
            if ref.script is script and isinstance(ref.node, ast.ClassDef) and \
                    _forward_trains(ref.node):
                return True
    return False


def _forward_trains(cls: ast.ClassDef) -> bool:
    """``cls.forward``, or a method of ``cls`` it calls on ``self`` (two calls deep), calls
    ``.backward()``."""
    methods = {f.name: f for f in cls.body
               if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
    todo, seen = ["forward"], set()
    for _ in range(3):
        nxt = []
        for name in todo:
            if name in seen or name not in methods:
                continue
            seen.add(name)
            for n in ast.walk(methods[name]):
                if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)):
                    continue
                if n.func.attr == "backward":  # (not `.step()`: a diffusion sampler's too)
                    return True
                if isinstance(n.func.value, ast.Name) and n.func.value.id == "self":
                    nxt.append(n.func.attr)
        todo = nxt
    return False


def _helpers_always_trained(script: Script, found: list[tuple[ast.Call, str]]
                            ) -> dict[int, "Hit | bool"]:
    """A helper of this file handed the model (``extract(net, x)``) whose every call in the file
    runs it in train mode, with no caller setting ``eval()`` before it: nothing ever hands it a
    model in eval mode, so ``model.eval()`` belongs in the helper, before the statement that
    runs the model (the runtime check's place). By call: the one Hit for the helper (at its
    first call), False for its other calls; calls of other helpers are absent."""
    by_func: dict[int, list[tuple[ast.Call, str]]] = {}
    funcs: dict[int, ast.AST] = {}
    for call, why in found:
        if isinstance(call.func, ast.Attribute) and call.func.attr in INFERENCE_METHODS:
            continue
        targets = [t for t in script.targets(call) if not t.instance]
        if len(targets) != 1 or targets[0].script is not script:
            continue
        func = targets[0].func
        funcs[id(func)] = func
        by_func.setdefault(id(func), []).append((call, why))
    out: dict[int, Hit | bool] = {}
    for key, calls in by_func.items():
        func = funcs[key]
        sites = script.call_sites(func)  # type: ignore[arg-type]
        fwd = forward_calls(script, func)
        if not fwd or len(sites) != len(calls) or \
                any(_caller_sets_eval(script, c) for c, _ in calls):
            continue
        first = sorted(fwd, key=lambda f: (f.lineno, f.col_offset))[0]
        how = "with grad disabled" if script.grad_disabled(first) else "for predictions"
        lines = script.at_lines([c.lineno for c, _ in calls])
        each = "at each of its calls" if len(calls) > 1 else "at its call"
        name = getattr(func, "name", "the helper")
        loader = _loader_left_training(script, [c for c, _ in calls])
        if loader is not None:
            out[id(calls[0][0])] = loader
            out.update((id(c), False) for c, _ in calls[1:])
            continue
        out[id(calls[0][0])] = Hit(
            _statement_holding(func, first),
            f"{name}() runs {dotted(first.func) or 'the model'}(...) "
            f"({script.at(first.lineno)}) {how} and the model in train mode "
            f"{each} ({lines}; {calls[0][1]}); Dropout drops and BatchNorm uses batch statistics, "
            f"so the output varies from call to call",
            fix=f"call model.eval() in {name}(), before this statement, and model.train() before "
                f"training again")
        out.update((id(c), False) for c, _ in calls[1:])
    return out


def _loader_left_training(script: Script, sites: list[ast.Call]) -> Hit | None:
    """Every model handed to the evaluation at ``sites`` comes straight from one loader of the
    file (a function or classmethod that loads weights into a module it builds and returns it:
    ``Encoder.from_pretrained(path)``) that leaves it in the train mode every new module starts
    in, with no mode change in between: ``return model.eval()`` there fixes every use
    (huggingface/transformers#21244). The Hit at that return, or None."""
    found: set[int] = set()
    loader: ast.FunctionDef | None = None
    for site in sites:
        modes = [e for e in preceding_events(script, site) if e.kind in ("train", "eval", "mode?")]
        last = modes[-1] if modes else None
        value = getattr(last.node, "value", None) if last is not None else None
        func = factory_of(script, value) if last is not None and last.kind == "train" and \
            last.via is None and isinstance(last.node, ast.Assign) else None
        if func is None or not any(isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                                   and c.func.attr == "load_state_dict" for c in ast.walk(func)):
            return None
        found.add(id(func))
        loader = func
    rets = [r for r in walk_local(loader) if isinstance(r, ast.Return)] if loader else []
    if len(found) != 1 or len(rets) != 1 or not isinstance(rets[0].value, ast.Name):
        return None
    name, title = rets[0].value.id, getattr(loader, "name", "the loader")
    lines = script.at_lines(sorted({s.lineno for s in sites}))
    return Hit(rets[0], f"{title}() loads weights into the module it builds and returns it in "
                        f"the train mode every new module starts in; its result is then "
                        f"evaluated without eval() ({lines}): Dropout drops and BatchNorm uses "
                        f"batch statistics, so the output varies from call to call",
               fix=f"return {name}.eval() (and call .train() where the loaded model is trained "
                   f"further)")


def _may_depend_on_mode(script: Script, call: ast.Call) -> bool:
    """False when the model called is built only from a class of this file whose code (and that
    of the same-file classes it builds) shows no mode-dependent module (an ``EmbeddingBag`` and a
    ``Linear``): train mode changes nothing for it, whatever else the file holds."""
    f = call.func.value if isinstance(call.func, ast.Attribute) and \
        call.func.attr in ("forward", "__call__") else call.func
    if isinstance(f, ast.Name) and _modeless(last_assignment(f.id, call)):
        return False  # probe = nn.Linear(32, 5), or a Sequential of such layers
    refs = script.graph.types(f)
    if not refs or any(r.script is not script for r in refs):
        return True
    return any(_class_mode_dependent(script, r.node, set()) for r in refs)


# torch.nn layers that compute the same in both modes (no dropout, no running statistics)
_MODELESS_LAYERS = frozenset({
    "Linear", "Bilinear", "LazyLinear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d",
    "ConvTranspose2d", "ConvTranspose3d", "Embedding", "EmbeddingBag", "LayerNorm", "GroupNorm",
    "RMSNorm", "Identity", "Flatten", "Unflatten", "ReLU", "ReLU6", "LeakyReLU", "PReLU", "ELU",
    "SELU", "CELU", "GELU", "SiLU", "Mish", "Tanh", "Sigmoid", "Softplus", "Softmax",
    "LogSoftmax", "MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d",
    "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "AdaptiveMaxPool1d",
    "AdaptiveMaxPool2d", "AdaptiveMaxPool3d"})
# calls that return the module they are called on
_SAME_MODULE = frozenset({"to", "cuda", "cpu", "float", "double", "half", "bfloat16"})


def _modeless(built: ast.AST | None) -> bool:
    """``built`` makes a torch.nn module that computes the same in train and eval mode: a layer
    of :data:`_MODELESS_LAYERS`, or an ``nn.Sequential`` of such layers written out in the call
    (``nn.Sequential(nn.Linear(30, 32), nn.ReLU(), nn.Linear(32, 2)).to(device)``). A starred or
    computed argument may hold anything: not modeless."""
    while isinstance(built, ast.Call) and isinstance(built.func, ast.Attribute) \
            and built.func.attr in _SAME_MODULE:
        built = built.func.value
    if not isinstance(built, ast.Call):
        return False
    made = dotted(built.func) or ""
    if not made.startswith(("nn.", "torch.nn.")):
        return False
    kind = made.rsplit(".", 1)[-1]
    if kind == "Sequential":
        return bool(built.args) and not built.keywords and all(map(_modeless, built.args))
    return kind in _MODELESS_LAYERS


def _class_mode_dependent(script: Script, cls: ast.AST, seen: set[int]) -> bool:
    """``cls`` (a class of this file, or a function of it that builds layers for one) shows
    a mode-dependent module, itself or in the same-file classes and layer factories it calls
    (``self.enc = conv_bn(3, 8)`` returning a ``Sequential`` with a ``BatchNorm2d``)."""
    from trainguard.lint.project import MODE_DEPENDENT

    if id(cls) in seen:
        return False
    seen.add(id(cls))
    # a class of this file named like a layer (`FrozenBatchNorm2d`) is judged by its code below
    plain = script.plain_classes
    words = " ".join(w for w in (n.attr if isinstance(n, ast.Attribute) else n.id
                                 for n in ast.walk(cls) if isinstance(n, (ast.Attribute, ast.Name)))
                     if w not in plain)
    if MODE_DEPENDENT.search(script.segment(cls) or "") and MODE_DEPENDENT.search(words):
        return True
    for n in ast.walk(cls):
        if isinstance(n, ast.Call):
            q = script.call_qualname(n) or dotted(n.func) or ""
            ref = script.graph.class_named(dotted(n.func)) if isinstance(n.func, ast.Name) \
                else None
            if ref is not None:
                if ref.script is not script or _class_mode_dependent(script, ref.node, seen):
                    return True
            elif (made := _layer_factory(script, n)) is not None:
                if _class_mode_dependent(script, made, seen):
                    return True
            elif q and q[0].isupper() and not q.startswith("torch."):
                return True  # a module class from elsewhere: it may hold Dropout
    return False


def _layer_factory(script: Script, call: ast.Call) -> ast.AST | None:
    """The function of this file that ``call`` runs for a value (``conv_bn(3, 8)``): what it
    builds becomes part of the module. A call made for its effect (``init_weights(self)``) is
    not followed."""
    if isinstance(parent(call), ast.Expr):
        return None
    return script.callee(call)


# Module attributes whose change makes a layer act the same in both modes (Dropout with p=0,
# BatchNorm without running statistics: test-time adaptation on purpose) or sets it by hand.
_MODE_ATTRS = {"p", "track_running_stats", "training", "running_mean", "running_var",
               "momentum"}


def _mode_behaviour_changed(script: Script, call: ast.Call) -> bool:
    """Before ``call``, the program rewrites mode-dependent attributes of the modules of the
    model it runs (``for m in model.modules(): m.p = 0.0``): what train mode does to it is no
    longer known."""
    keys = {script.key(call.func.value if isinstance(call.func, ast.Attribute) and
                       call.func.attr in INFERENCE_METHODS else call.func)}
    keys |= {script.key(a) for a in call.args}
    keys.discard(None)
    for node in script.nodes:
        if not isinstance(node, ast.For) or node.lineno >= call.lineno:
            continue
        it = node.iter
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and
                it.func.attr in ("modules", "children", "named_modules", "named_children") and
                script.key(it.func.value) in keys):
            continue
        var = node.target.elts[-1] if isinstance(node.target, ast.Tuple) else node.target
        if not isinstance(var, ast.Name):
            continue
        for sub in ast.walk(node):
            if isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Store) and \
                    isinstance(sub.value, ast.Name) and sub.value.id == var.id and \
                    sub.attr in _MODE_ATTRS:
                return True
    return False


def _eval_undone_by_helper(script: Script) -> Iterator[Hit]:
    """In a function (or the module), after ``model.eval()``, a call of a same-file helper
    whose ``model.train()`` runs whatever its caller wants, followed by a forward of the model
    in that helper: the evaluation that uses the call's result runs in train mode. Smaller
    scopes first, so the message names the evaluation itself."""
    scopes = _callers(script, [f for fs in script.functions.values() for f in fs
                               if _sets_train(f)])
    scopes.sort(key=lambda f: (getattr(f, "end_lineno", 0) or 0) - getattr(f, "lineno", 0)
                if f is not script.tree else 1 << 30)
    seen: set[int] = set()
    for scope in scopes:
        mode: dict[str | None, Event] = {}
        for e in events(script, scope.body):  # type: ignore[attr-defined]
            prev = mode.get(e.key)
            if e.kind in ("train", "eval", "mode?"):
                mode[e.key] = e
            if e.kind != "train" or prev is None or prev.kind != "eval" or \
                    id(e.node) in seen or not _undoes_eval(script, e):
                continue
            seen.add(id(e.node))
            helper = script.enclosing_function(e.node)
            where = script.enclosing_function(e.via)  # type: ignore[arg-type]
            label = f"{where.name}()" if where is not None else "the evaluation"
            yield Hit(e.node, f"{helper.name}() calls {e.key}.train() whatever its caller "  # type: ignore[union-attr]
                              f"wants, so {label} runs the model in train mode after its "
                              f"{prev.key}.eval() at {prev.place(script)} (the call at "
                              f"{script.at(e.via.lineno)}): Dropout and BatchNorm act as in "  # type: ignore[union-attr]
                              f"training",
                      fix=f"let the caller choose the mode ({e.key}.train(training)), or call "
                          f"train() only where training starts")


def _train_for_every_phase(script: Script) -> Iterator[Hit]:
    """A loop shared by training and evaluation (``_shared_loop(bags, "val")``) that calls
    ``model.train()`` whatever phase its caller asks for: the calls whose phase skips every
    backward and step evaluate in train mode (:mod:`trainguard.lint.phases`)."""
    for found in phase_evaluations(script):
        if samples_only(script, [found.forward]) or \
                not _may_depend_on_mode(script, found.forward):
            continue
        name, key = found.func.name, found.key
        lines = sorted({s.lineno for s in found.sites})
        many = len(lines) > 1
        calls = f"the call{'s' if many else ''} at {script.at_lines(lines)} " \
                f"run{'' if many else 's'}"
        yield Hit(found.switch,
                  f"{name}() calls {key}.train() for every phase, also when its caller asks "
                  f"for no training: {calls} no backward and no optimizer step, so "
                  f"{'they evaluate' if many else 'it evaluates'} {key}(...) "
                  f"({script.at(found.forward.lineno)}) in train mode; Dropout and BatchNorm "
                  f"act as in training",
                  fix=f"set the mode from the phase: {key}.train() when training, "
                      f"{key}.eval() otherwise")


def _undoes_eval(script: Script, e: Event) -> bool:
    """``e`` (a ``train()``) comes from a helper the evaluation calls for its result
    (``out, loss = step(model, batch)``): it runs on every call of the helper, the helper then
    runs the model and no backward, and no backward or step follows the call in its loop."""
    call, node = e.via, e.node
    if call is None or e.foreign is not None or not isinstance(node, ast.Call) or \
            isinstance(parent(call), ast.Expr):
        return False
    helper = script.enclosing_function(node)
    if helper is None or script.has_backward(helper) or \
            any(r.node is helper for r in eval_regions(script)):
        return False  # an evaluation function of its own: judged at its call sites
    n = parent(node)
    while n is not None and n is not helper:  # unconditional in the helper
        if isinstance(n, (ast.If, ast.IfExp, ast.For, ast.AsyncFor, ast.While, ast.Try,
                          ast.Match, ast.BoolOp)):
            return False
        n = parent(n)
    key = script.key(node.func.value)  # type: ignore[attr-defined]
    after = [f for f in walk_local(helper) if isinstance(f, ast.Call) and
             f.lineno >= node.lineno and key is not None and  # type: ignore[attr-defined]
             script.key(f.func.value if isinstance(f.func, ast.Attribute) and
                        f.func.attr == "forward" else f.func) == key]
    if not after or samples_only(script, after):
        return False
    return not any(x.kind in ("backward", "step") for x in events(script, _after_call(call)))


def _after_call(call: ast.Call) -> list[ast.stmt]:
    """What runs with the call's result: the body of the loop around it, else the rest of the
    block from its statement on (a comprehension's element is one statement)."""
    n: ast.AST | None = call
    comprehension = False
    while n is not None and not isinstance(n, ast.stmt):
        comprehension |= isinstance(n, (ast.ListComp, ast.SetComp, ast.GeneratorExp,
                                        ast.DictComp))
        n = parent(n)
    stmt = n
    loops = Script.enclosing_loops(call)
    if loops and not comprehension:
        return loops[0].body  # type: ignore[attr-defined]
    block = parent(stmt) if stmt is not None else None
    body = next((b for f in ("body", "orelse", "finalbody", "handlers")
                 if isinstance(b := getattr(block, f, None), list) and stmt in b), None)
    return body[body.index(stmt):] if body else [stmt]  # type: ignore[list-item]


def _sets_train(func: ast.AST) -> bool:
    """Cheap test: ``func`` itself calls ``.train()`` with no argument."""
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and
               n.func.attr == "train" and not n.args and not n.keywords
               for n in ast.walk(func))


def _callers(script: Script, funcs: list[ast.AST], depth: int = 2) -> list[ast.AST]:
    """The functions (or the module) that call ``funcs``, ``depth`` levels up."""
    out: dict[int, ast.AST] = {}
    frontier = funcs
    for _ in range(depth):
        nxt = []
        for f in frontier:
            for site in script.call_sites(f):  # type: ignore[arg-type]
                scope = script.enclosing_function(site) or script.tree
                if id(scope) not in out:
                    out[id(scope)] = scope
                    if scope is not script.tree:
                        nxt.append(scope)
        frontier = nxt
    return list(out.values())
