"""Where training and evaluation happen in a script.

- A *training loop* is a ``for``/``while`` whose body (with same-file calls followed) runs a
  ``backward`` and an optimizer ``step``.
- An *evaluation region* computes model outputs and metrics with no backward: a loop over batches
  that calls the model and feeds a metric (``.item()``, ``argmax``, ``==``, a loss, ``+=``), or a
  function named for evaluation (``evaluate``, ``validate``, ``test``, ``predict``, ``infer``,
  ``estimate_loss``) that calls the model. Framework hooks (``validation_step``) are left out:
  Lightning runs them in eval mode under ``no_grad``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass


from trainguard.lint.astutil import COMPREHENSIONS, SCOPES, dotted, parent, statement_of, walk_local
from trainguard.lint.callgraph import ClassRef, bind_arguments
from trainguard.lint.contexts import entry_events
from trainguard.lint.dataflow import last_assignment
from trainguard.datanames import eval_index, reads_eval_data
from trainguard.lint.events import Event, events
from trainguard.lint.measures import loss_number, metric_number, returns_number
from trainguard.lint.module_methods import runs_layers, submodule_call
from trainguard.lint.script import Script, is_backward

__all__ = ["EvalRegion", "training_loops", "loop_label", "inference_calls", "INFERENCE_METHODS",
           "eval_regions", "preceding_events", "forward_calls", "rollout", "EVAL_NAME",
           "disabled_here", "backpropagated"]

EVAL_NAME = re.compile(r"^_*(eval|evaluate|evaluation|validate|validation|valid|val|"
                       r"predict|prediction|inference|infer|estimate_loss|score|compute_accuracy|"
                       r"accuracy|run_eval|run_validation|do_eval)(_\w*)?$"
                       r"|^_*test(_(epoch|one_epoch|model|net|loop|step|accuracy|loss))?$", re.I)
_FRAMEWORK_HOOK = re.compile(r"^(validation|test|predict|val)_step$|_step_end$|_epoch_end$")
_DATA_ITER = re.compile(r"load|data|batch|_dl\b|\bdl\b|set\b|test|val|eval|sample|example|"
                        r"split|queue|stream|iter", re.I)
_METRIC_HINT = re.compile(r"\.item\(|argmax|\.eq\(|==|topk|accura|correct|loss|criterion|"
                          r"\+=|\.append\(|metric|score|\.max\(", re.I)


def forward_calls(script: Script, node: ast.AST) -> list[ast.Call]:
    """Calls of a model (``model(x)``, ``self.net(x)``, ``model.forward(x)``, or a method of
    the model's class that runs its layers, ``model.embed(x)``) under ``node``;
    calls of same-file functions and classes (``_set_model(...)``, ``Net()``) are not forwards."""
    out = []
    for sub in walk_local(node):
        if not isinstance(sub, ast.Call):
            continue
        if isinstance(sub.func, ast.Name) and (sub.func.id in script.classes
                                               or sub.func.id in script.functions):
            if _forward_helper(script, sub):  # compute_loss(model, batch)
                out.append(sub)
            continue
        if _forward_helper(script, sub):  # self._forward(xc, xt): a helper that runs the model
            out.append(sub)
            continue
        f = sub.func
        explicit = isinstance(f, ast.Attribute) and f.attr == "forward"
        if explicit:
            f = f.value  # self.model.forward(x): the model's forward, called by name
        k = script.key(f)
        if k and k != "self" and (explicit or script.callee(sub) is None) and (
                script.is_model(k) or isinstance(f, ast.Attribute) and _typed_module(script, f)):
            out.append(sub)
        elif isinstance(f, ast.Attribute) and script.key(f.value) not in (None, "self") and \
                script.is_model(script.key(f.value)) and runs_layers(script, sub):
            out.append(sub)  # model.embed(x): a method of the model that runs its layers
        elif submodule_call(script, sub):
            out.append(sub)  # vae.decoder(z): a submodule, in the mode the model was given
    return out


def _typed_module(script: Script, attr: ast.Attribute) -> bool:
    """``trainer.netG`` whose value the call graph types as module classes of the project only
    (a callback handed the trainer that built ``self.netG = Generator()``)."""
    root = dotted(attr)
    root = root.split(".", 1)[0] if root else None
    if root is None or root == "self" or root in script.aliases:
        return False  # (self.x is known by its key; torch.nn.functional.relu is no value)
    types = script.graph.types(attr)
    if types:
        return all(script.graph.is_module_class(t) for t in types)
    return _held_model(script, attr)


def _held_model(script: Script, attr: ast.Attribute) -> bool:
    """``trainer.model`` where ``trainer`` is typed as classes of this file (not modules) that
    each store a model under that name (``self.model = model``, handed a network): a callback
    handed the trainer reaches the trainer's model so."""
    from trainguard.lint.callgraph import self_assigned

    owners = script.graph.types(attr.value)
    if not owners or f"self.{attr.attr}" not in script.models:
        return False
    for owner in owners:
        if owner.script is not script or script.graph.is_module_class(owner):
            return False
        values = self_assigned(owner.node, attr.attr)
        if not values or not all(isinstance(v, (ast.Name, ast.Attribute)) and
                                 script.is_model(script.key(v)) for v in values):
            return False
    return True


def _forward_helper(script: Script, call: ast.Call) -> bool:
    """``self._forward(x)``: a method of the same (non-module) class whose body is a forward
    of the model it holds, with the grad mode and module mode of its caller (no
    ``no_grad``, ``eval()``/``train()`` of its own) and no training step; likewise a function
    of the file handed the model (``compute_loss(model, batch)``, shared by the training and
    the evaluation loop)."""
    f = call.func
    method = script.callee(call)
    if isinstance(f, ast.Name):
        if method is None or script.enclosing_class(method) is not None or not any(
                script.is_model(script.key(a)) for a in call.args if isinstance(a, ast.Name)):
            return False
    else:
        if not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and
                f.value.id == "self"):
            return False
        cls = script.enclosing_class(call)
        if method is None or cls is None or script.enclosing_class(method) is not cls or \
                any((script.qualname(b) or "").endswith("Module") for b in cls.bases):
            return False
    memo = script.__dict__.setdefault("_tg_forward_helpers", {})
    if id(method) not in memo:
        memo[id(method)] = False  # (a recursion: no)
        fwd = forward_calls(script, method)
        memo[id(method)] = bool(fwd) and not any(
            disabled_here(script, c, method) for c in fwd) and not any(
            isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and
            c.func.attr in ("backward", "step", "zero_grad", "eval", "train")
            for c in ast.walk(method))
    return memo[id(method)]


def training_loops(script: Script) -> list[ast.AST]:
    """Every place one training iteration repeats, as a loop whose ``body`` is the iteration:

    - a ``for``/``while`` whose body runs backward and an optimizer step (following calls);
    - a comprehension or ``map`` whose element does (``[train_step(b) for b in loader]``,
      ``sum(map(train_batch, loader))``), as a ``for`` made for it (see :func:`_comprehension`);
    - a function that does, and that no such loop runs (a step function handed to an engine
      or a callback list, ``def update(engine, batch)``): one call is one iteration. Functions
      called only outside loops of their file run once and are left out.
    """
    if not script.may_reach("backward"):
        return []
    return _cached(script, "_tg_training_loops", lambda: _find_training_loops(script))


def _find_training_loops(script: Script) -> list[ast.AST]:
    loops: list[ast.AST] = [n for n in script.nodes
                            if isinstance(n, (ast.For, ast.AsyncFor, ast.While))
                            and not _dispatch_loop(n) and _trains(script, n)]
    for node in script.nodes:
        if not isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp,
                                 ast.Call)) or not _may_step(script, node):
            continue
        made = _comprehension(node)
        if made is not None and _trains(script, made):
            loops.append(made)
    covered: set[int] = set()
    for loop in loops:
        covered.update(_functions_run(script, loop.body))  # type: ignore[attr-defined]
    steps = []
    # functions whose own body calls backward, and those holding a training loop of their own
    own_backward = {id(f) for c in script.calls if isinstance(c.func, ast.Attribute) and
                    c.func.attr == "backward" and (f := script.enclosing_function(c)) is not None}
    holds_loop = {id(f) for loop in loops
                  if isinstance(loop, (ast.For, ast.AsyncFor, ast.While)) and
                  (f := script.enclosing_function(loop)) is not None}
    for funcs in script.functions.values():
        for func in funcs:
            # cheap tests first; the function's events last
            if id(func) in covered or id(func) not in own_backward or \
                    id(func) in holds_loop or _steps_a_parameter(func) or \
                    _only_called_once(script, func) or not _trains(script, func):
                continue
            steps.append(func)
    inner: set[int] = set()
    for func in steps:
        inner.update(f for f in _functions_run(script, func.body) if f != id(func))
    return loops + [f for f in steps if id(f) not in inner]


def _dispatch_loop(loop: ast.AST) -> bool:
    """A ``for`` over handler objects whose variable is only the receiver of method calls
    (``for hook in self.hooks: hook.after_iter(self)``, ``getattr(cb, name)(self)``): it hands
    one event to each handler, it is no iteration of training (the loop around it is)."""
    if not isinstance(loop, (ast.For, ast.AsyncFor)) or not isinstance(loop.target, ast.Name):
        return False
    name, uses = loop.target.id, 0
    for node in (n for stmt in loop.body for n in ast.walk(stmt)):
        if isinstance(node, ast.Name) and node.id == name:
            p = parent(node)
            call = parent(p) if isinstance(p, ast.Attribute) else p
            if isinstance(p, ast.Attribute) and isinstance(call, ast.Call) and call.func is p:
                uses += 1  # hook.after_iter(...)
            elif isinstance(p, ast.Call) and isinstance(p.func, ast.Name) and \
                    p.func.id == "getattr" and p.args and p.args[0] is node:
                uses += 1  # getattr(hook, name)(...)
            else:
                return False
    return uses > 0


def loop_label(script: Script, loop: ast.AST) -> str:
    """How a message names a training loop: ``the loop at line 12``, ``the comprehension at
    line 12``, ``train_step() (one iteration per call)``."""
    if isinstance(loop, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return f"{loop.name}() (one iteration per call)"
    if getattr(loop, "_tg_parent", None) is not None and \
            getattr(parent(loop), "_tg_loop", None) is loop:
        kind = "map" if isinstance(parent(loop), ast.Call) else "comprehension"
        return f"the {kind} at {script.at(loop.lineno)}"  # type: ignore[attr-defined]
    return f"the loop at {script.at(loop.lineno)}"  # type: ignore[attr-defined]


def _trains(script: Script, loop: ast.AST) -> bool:
    kinds = {e.kind for e in events(script, loop.body)}  # type: ignore[attr-defined]
    return "backward" in kinds and "step" in kinds


def _may_step(script: Script, node: ast.AST) -> bool:
    """Cheap test before a comprehension's events: its element calls a function of the file or
    project (or ``map`` names one), or calls ``backward``/``step`` itself."""
    if isinstance(node, ast.Call):
        if not (isinstance(node.func, ast.Name) and node.func.id == "map" and node.args):
            return False
        f = node.args[0]
        return isinstance(f, ast.Name) and (f.id in script.functions or
                                            f.id in script.project_imports) or \
            isinstance(f, ast.Attribute)
    methods = None
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            f = sub.func
            if isinstance(f, ast.Attribute) and f.attr in ("backward", "step"):
                return True
            if isinstance(f, ast.Name) and (f.id in script.functions or
                                            f.id in script.project_imports):
                return True
            if isinstance(f, ast.Attribute):
                if methods is None:
                    methods = script.graph.method_names()
                if f.attr in methods:
                    return True
    return False


def _functions_run(script: Script, body: list[ast.stmt]) -> set[int]:
    """ids of the functions of this file whose code the events of ``body`` come from."""
    out = set()
    for e in events(script, body):
        if e.foreign is None:
            func = script.enclosing_function(e.node)
            if func is not None:
                out.add(id(func))
    return out


def _steps_a_parameter(func: ast.AST) -> bool:
    """Every optimizer the function steps is handed to it (``def __call__(self, loss,
    optimizer)`` of a loss scaler, ``backward_and_step(loss, opt)``): a helper of the caller's
    loop, which owns the optimizer and its zeroing, not an iteration of its own."""
    params = {a.arg for a in func.args.posonlyargs + func.args.args +  # type: ignore[attr-defined]
              func.args.kwonlyargs} - {"self", "cls"}  # type: ignore[attr-defined]
    stepped = []
    for sub in walk_local(func):
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and \
                sub.func.attr == "step":
            roots = [sub.func.value] + sub.args[:1]  # opt.step(), scaler.step(optimizer)
            for i, r in enumerate(roots):
                while isinstance(r, (ast.Attribute, ast.Subscript)):
                    r = r.value
                roots[i] = r
            stepped.append(any(isinstance(r, ast.Name) and r.id in params for r in roots))
    return bool(stepped) and all(stepped)


def _only_called_once(script: Script, func: ast.AST) -> bool:
    """Every call of ``func`` in the file runs outside loops and comprehensions (a script that
    takes one step); a function the file never calls is run by others, as often as they like."""
    sites = script.call_sites(func)  # type: ignore[arg-type]
    if not sites:
        return False
    for site in sites:
        n = site
        while (n := parent(n)) is not None and not isinstance(n, SCOPES):
            if isinstance(n, (ast.For, ast.AsyncFor, ast.While, ast.comprehension,
                              ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
                return False
        if script.enclosing_function(site) is not None:
            return False  # called from another function, which may itself run in a loop
    return True


def _comprehension(node: ast.AST) -> ast.For | None:
    """A ``for`` standing for a comprehension's element or a ``map``'s calls, so that the rules
    read them like any loop: ``[step(b) for b in loader]`` is ``for b in loader: step(b)``;
    ``map(step, loader)`` is ``for _item in loader: step(_item)``. The element keeps its own
    nodes and parents (findings point into the comprehension); the made ``for`` hangs below
    the comprehension, so that what encloses the comprehension encloses it. Made once per
    node and kept on it."""
    made = getattr(node, "_tg_loop", None)
    if made is not None or getattr(node, "_tg_no_loop", False):
        return made
    elt: ast.expr | None = None
    target: ast.expr | None = None
    it: ast.expr | None = None
    if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
        elt, target, it = node.elt, node.generators[0].target, node.generators[0].iter
    elif isinstance(node, ast.DictComp):
        elt, target, it = node.value, node.generators[0].target, node.generators[0].iter
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
            node.func.id == "map" and len(node.args) == 2 and \
            isinstance(node.args[0], (ast.Name, ast.Attribute)):
        target = ast.Name(id="_item", ctx=ast.Store())
        it = node.args[1]
        elt = ast.Call(func=node.args[0], args=[ast.Name(id="_item", ctx=ast.Load())],
                       keywords=[])
    if elt is None or "(" not in ast.unparse(elt):
        node._tg_no_loop = True  # type: ignore[attr-defined]
        return None
    stmt = ast.Expr(value=elt)
    loop = ast.For(target=target, iter=it, body=[stmt], orelse=[], type_comment=None)
    for made_node in (loop, stmt, target, elt):
        if not hasattr(made_node, "lineno"):
            ast.copy_location(made_node, node)
    loop._tg_parent = node  # type: ignore[attr-defined]
    stmt._tg_parent = loop  # type: ignore[attr-defined]
    if isinstance(node, ast.Call):  # the made call and its argument belong to the loop
        elt._tg_parent = stmt  # type: ignore[attr-defined]
        for a in elt.args:  # type: ignore[attr-defined]
            ast.copy_location(a, node)
            a._tg_parent = elt  # type: ignore[attr-defined]
        target._tg_parent = loop  # type: ignore[attr-defined]
    node._tg_loop = loop  # type: ignore[attr-defined]
    return loop


def _cached(script: Script, attr: str, make):  # type: ignore[no-untyped-def]
    value = script.__dict__.get(attr)
    if value is None:
        value = make()
        script.__dict__[attr] = value
    return value


@dataclass(frozen=True, slots=True)
class EvalRegion:
    """An evaluation function or loop; ``forwards`` are its model calls; ``label`` names it in
    messages (``validate()``, ``the loop at line 40``)."""

    node: ast.AST
    forwards: list[ast.Call]
    label: str


def _region(script: Script, node: ast.AST, forwards: list[ast.Call]) -> EvalRegion:
    label = f"{node.name}()" if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
        else f"the evaluation at {script.at(node.lineno)}" if isinstance(node, (ast.If, ast.With)) \
        else f"the loop at {script.at(node.lineno)}"  # type: ignore[attr-defined]
    # in source order: the first forward of the region is where a report goes
    forwards = sorted(forwards, key=lambda f: (f.lineno, f.col_offset))
    return EvalRegion(node, forwards, label)


def eval_regions(script: Script) -> list[EvalRegion]:
    return _cached(script, "_tg_eval_regions", lambda: _find_eval_regions(script))


def _find_eval_regions(script: Script) -> list[EvalRegion]:
    regions: list[EvalRegion] = []
    covered: set[int] = set()
    for node in script.nodes:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or \
                _framework_hook(script, node):
            continue
        named = bool(EVAL_NAME.match(node.name))
        own = _inside_module_class(script, node)
        selfs = _self_inference(script, node) if named else []
        if own and not (named and (_self_calls_after_eval(node) or selfs)):
            continue
        if named or node.name not in _NOT_INFERENCE and script.mode_dependent and \
                _mentions_no_grad(script, node):
            fwd = forward_calls(script, node) + (_self_calls_after_eval(node) or selfs)
            text = script.segment(node) or ""
            # an evaluation function feeds a metric, or runs its forwards with grad disabled
            # (``predict_proba`` returning probabilities under no_grad is inference too);
            # under any name, a grad-free function only called after training is inference
            # (a tracker's ``track(frames)``, a ``serve()``)
            inference = bool(fwd) and all(disabled_here(script, f, node) for f in fwd)
            if not named and not (inference and (_holds_its_model(script, node, fwd) or
                                                 _trains_before_scoring(script, node, fwd, text))
                                  and _called_after_training(script, node)) and \
                    not (inference and _scores_between_passes(script, node, fwd)) and \
                    not (inference and _measures(script, node, fwd)):
                continue
            # (or, named for evaluation, it puts its own model in eval mode first:
            # ``self.embed.eval()`` in an estimator's ``predict``)
            if fwd and (_METRIC_HINT.search(text) or inference or
                        named and (_sets_eval_first(node, fwd) or _leave_graph(fwd) or
                                   _held_in_eval(script, node, fwd))) and \
                    not script.has_backward(node) and not rollout(script, node) and \
                    not backpropagated(script, node):
                regions.append(_region(script, node, fwd))
                covered.update(id(n) for n in walk_local(node))
    for node in script.nodes:
        if not isinstance(node, (ast.For, ast.AsyncFor, ast.While)) or id(node) in covered:
            continue
        if any(isinstance(p, (ast.For, ast.AsyncFor, ast.While)) and _is_region_loop(script, p)
               for p in _ancestors(node)):
            continue
        if _is_region_loop(script, node):
            func = script.enclosing_function(node)
            if func is not None and _framework_hook(script, func):
                continue
            regions.append(_region(script, node, forward_calls(script, node)))
            covered.update(id(n) for n in walk_local(node))
    regions.extend(_eval_blocks(script, covered))
    return regions


def _self_calls_after_eval(func: ast.AST) -> list[ast.Call]:
    """A model's own evaluation method (``def predict(self, x): self.eval(); return self(x)``)
    switches its module to eval mode and then calls it: those calls are its forwards."""
    calls = [n for n in walk_local(func) if isinstance(n, ast.Call)]
    evals = [c.lineno for c in calls if isinstance(c.func, ast.Attribute) and
             c.func.attr == "eval" and not c.args and dotted(c.func.value) == "self"]
    return [c for c in calls if evals and c.lineno > min(evals) and
            dotted(c.func) in ("self", "self.forward")]


def _self_inference(script: Script, func: ast.AST) -> list[ast.Call]:
    """A module's own evaluation method that runs the module under no_grad without switching
    it to eval mode (``def predict(self, x): with torch.no_grad(): return self(x)``, also in a
    base class that leaves ``forward`` to its subclasses): its calls of ``self``, which run in
    whatever mode its callers left the module, when every one of them has grad disabled."""
    cls = script.enclosing_class(func)
    if cls is None or not (_inside_module_class(script, func) or
                           script.graph.is_module_class(ClassRef(script, cls))):
        return []
    calls = [n for n in walk_local(func) if isinstance(n, ast.Call)]
    if any(isinstance(c.func, ast.Attribute) and c.func.attr in ("eval", "train") and
           dotted(c.func.value) == "self" for c in calls):
        return []
    selfs = [c for c in calls if dotted(c.func) in ("self", "self.forward")]
    return selfs if selfs and all(disabled_here(script, c, func) for c in selfs) else []


_DETACHING = frozenset({"detach", "numpy", "tolist"})


def _leave_graph(forwards: list[ast.Call]) -> bool:
    """A forward's output is taken out of the graph at once (``net(x).squeeze(1).detach()
    .numpy()``): the function keeps values, not the graph it recorded, so (with no backward
    in it, nor at its callers) it evaluates, whatever it computes."""
    ids = {id(f) for f in forwards}

    def leaves(call: ast.AST) -> bool:
        n = call
        while isinstance(p := parent(n), (ast.Attribute, ast.Call, ast.Subscript)):
            if isinstance(p, ast.Subscript) and n is not p.value:
                return False
            if isinstance(p, ast.Call) and n is not p.func and id(p) not in ids:
                return False  # handed on as an argument (but to another forward)
            if isinstance(p, ast.Attribute) and p.attr in _DETACHING:
                return True
            n = p
        return False
    return any(leaves(f) for f in forwards)


def _sets_eval_first(func: ast.AST, forwards: list[ast.Call]) -> bool:
    """``X.eval()`` in ``func``'s own body before its first forward."""
    first = min(f.lineno for f in forwards)
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
               and n.func.attr == "eval" and not n.args and not n.keywords
               and n.lineno < first for n in walk_local(func))


def _held_in_eval(script: Script, func: ast.AST, forwards: list[ast.Call]) -> bool:
    """Every forward runs a model the object holds (``self.model(batch)`` in a serving
    handler's ``inference``) that a method of its class switches to eval mode
    (``initialize``: ``self.model.eval()``) and that no code of the file switches back to train
    mode: it is in eval mode whenever ``func`` runs, as if ``func`` had switched it itself."""
    cls = script.enclosing_class(func)
    if cls is None:
        return False
    held = set()
    for f in forwards:
        parts = (dotted(f.func) or "").split(".")
        if len(parts) < 2 or parts[0] != "self" or parts[-1] not in (parts[1], "forward"):
            return False  # (a helper, or a method of the model that may switch modes)
        held.add(parts[1])
    evals = {(dotted(n.func.value) or "")[len("self."):] for n in ast.walk(cls)
             if _eval_call(n) and (dotted(n.func.value) or "").startswith("self.")}  # type: ignore
    # (or assigned in eval mode: ``self.model_ = model.eval().to(device)``)
    evals |= {t.attr for n in ast.walk(cls) if isinstance(n, ast.Assign) and _put_in_eval(n.value)
              for t in n.targets if isinstance(t, ast.Attribute) and dotted(t.value) == "self"}
    if not held <= evals:
        return False
    # a train() anywhere on an attribute of that name (``handler.model.train()``), or on the
    # object itself, may put the model back in train mode before ``func`` runs
    return not any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and
                   n.func.attr == "train" and
                   ((dotted(n.func.value) or "").rsplit(".", 1)[-1] in held or
                    dotted(n.func.value) == "self")
                   for n in script.nodes)


def _eval_call(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
        node.func.attr == "eval" and not node.args and not node.keywords


def _put_in_eval(value: ast.AST) -> bool:
    """``model.eval()``, ``model.eval().to(device)``: a chain of calls through ``eval()``."""
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
        if _eval_call(value):
            return True
        value = value.func.value
    return False


def _eval_blocks(script: Script, covered: set[int]) -> list[EvalRegion]:
    """An evaluation written as a block inside a training loop (``if i % 10 == 0:`` running
    the model on a batch of the test loader, ``with torch.no_grad():`` over the validation
    tensors): its forwards use evaluation data (:mod:`trainguard.datanames`) and feed a
    metric, and the block has no backward and steps no optimizer (fxia22/pointnet.pytorch#19:
    the periodic test batch ran in train mode)."""
    out = []
    for loop in training_loops(script):
        for node in walk_local(loop):
            if not isinstance(node, (ast.If, ast.With)) or id(node) in covered:
                continue
            inside = list(walk_local(node))
            if any(id(n) in covered for n in inside if isinstance(n, ast.stmt)):
                continue
            fwd = [f for f in forward_calls(script, node) if _output_used(f, node)]
            if not (reads_eval_data(node) or _selects_eval_rows(script, node, fwd)):
                continue
            if not fwd or script.has_backward(node) or rollout(script, node) or \
                    _steps_optimizer(script, node) or \
                    not _METRIC_HINT.search(script.segment(node) or ""):
                continue
            out.append(_region(script, node, fwd))
            covered.update(id(n) for n in inside)
    return out


def _selects_eval_rows(script: Script, block: ast.AST, forwards: list[ast.Call]) -> bool:
    """A grad-free forward whose input is picked out of a tensor of every split by held-out
    indices: ``net(X[val_idx])``, or ``vb = torch.from_numpy(val_idx)`` then ``net(X[vb])``
    (the index's value, one binding back, reads such a name)."""
    def held_out(node: ast.AST) -> bool:  # a name or attribute of held-out indices
        return any(isinstance(n, ast.Name) and eval_index(n.id) or
                   isinstance(n, ast.Attribute) and eval_index(n.attr) for n in ast.walk(node))

    func = script.enclosing_function(block)
    for f in forwards:
        if not disabled_here(script, f, func):
            continue
        for sub in (n for a in f.args for n in ast.walk(a) if isinstance(n, ast.Subscript)):
            if held_out(sub.slice) or any(
                    (value := last_assignment(n.id, f)) is not None and held_out(value)
                    for n in ast.walk(sub.slice) if isinstance(n, ast.Name)):
                return True
    return False


# grad-free by nature, whatever calls them: a module's own methods, data and EMA updates
_NOT_INFERENCE = frozenset({"__init__", "forward", "update", "ema_update",
                            "update_ema", "step", "collate", "collate_fn"})


def _mentions_no_grad(script: Script, func: ast.AST) -> bool:
    """A cheap first test for a grad-free function: its text names a grad-disabling context."""
    if not (script.may_reach("no_grad") or script.may_reach("inference_mode")):
        return False
    text = (script.segment(func) or "") + "".join(
        dotted(d.func if isinstance(d, ast.Call) else d) or ""
        for d in func.decorator_list)  # type: ignore[attr-defined]
    return "no_grad" in text or "inference_mode" in text


def _called_after_training(script: Script, func: ast.AST) -> bool:
    """Every call of ``func`` in the file is made outside the training loops, by code that
    does not train (module-level statements, a ``main()`` after ``fit``): not a target network,
    an EMA teacher or a pseudo-labeller that the loop runs between its steps."""
    sites = script.call_sites(func) or script.graph.instance_sites(func)  # type: ignore
    if not sites:
        return False
    loops = {id(loop) for loop in training_loops(script)}
    for site in sites:  # (a function holding a training loop reaches its backward too)
        caller = script.enclosing_function(site)
        if _inside(site, loops) or caller is not None and script.has_backward(caller):
            return False
    return True


def _holds_its_model(script: Script, func: ast.AST, forwards: list[ast.Call]) -> bool:
    """``func`` runs a model it does not take as a parameter (``self.model(frame)`` in a
    tracker's method) with plain forwards, and sets no mode itself (BatchNorm recalibration
    calls ``train()`` on purpose). A model handed in as an argument (``embed_all(encoder,
    corpus)``) and an inference method (``model.transcribe(x)``) are judged at their calls."""
    args = func.args  # type: ignore[attr-defined]
    params = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs} - {"self", "cls"}
    if any((script.key(f.func) or "").split(".", 1)[0] in params for f in forwards) or any(
            e.kind in ("train", "eval", "mode?")
            for e in events(script, func.body)):  # type: ignore[attr-defined]
        return False
    picked = set(inference_calls(script))
    return not any(f in picked for f in forwards)


def _scores_between_passes(script: Script, func: ast.AST, forwards: list[ast.Call]) -> bool:
    """``func`` reaches its model through an object handed to it (``trainer.model`` in a
    callback's ``on_epoch_end(self, trainer, epoch)``), sets no mode, returns nothing and turns
    what it computes into numbers (``.item()``): a metric, not a teacher or a pseudo-labeller,
    whose outputs go back to training. Every call of it (also through a trainer's list of
    callbacks) runs between training passes, not inside the loop that steps."""
    args = func.args  # type: ignore[attr-defined]
    params = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs} - {"self", "cls"}
    for f in forwards:
        root = (script.key(f.func) or "").split(".", 1)[0]
        if not isinstance(f.func, ast.Attribute) or root not in params or script.is_model(root):
            return False
    local = list(walk_local(func))
    if any(isinstance(n, ast.Return) and n.value is not None for n in local) or not any(
            isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and
            n.func.attr in ("item", "tolist") for n in local) or any(
            e.kind in ("train", "eval", "mode?")
            for e in events(script, func.body)):  # type: ignore[attr-defined]
        return False
    sites = script.graph.sites(func)  # type: ignore[arg-type]
    return bool(sites) and all(_between_passes(script, site) for site in sites)


def _measures(script: Script, func: ast.AST, forwards: list[ast.Call]) -> bool:
    """``func`` hands back its model's loss on labelled data as a plain number and sets no
    mode (:mod:`trainguard.lint.measures`): an evaluation wherever it is called, a training
    step included (a teacher rewarded by the student's loss: kekmodel/MPL-pytorch#9). A
    function handing back other numbers computed from its forwards (an accuracy) measures
    too when every call runs between training passes, not inside a step."""
    if any(e.kind in ("train", "eval", "mode?")
           for e in events(script, func.body)):  # type: ignore[attr-defined]
        return False
    if loss_number(script, func, forwards):
        return True
    sites = script.call_sites(func)  # type: ignore[arg-type]
    return bool(sites) and metric_number(func, forwards) and \
        all(_between_passes(script, site) for site in sites)


def _between_passes(script: Script, site: ast.AST) -> bool:
    """No training loop around ``site`` steps in the iteration that holds it: its backward and
    step run in an inner loop that does not hold ``site`` (``for epoch: for batch: ...step()``,
    then the epoch's callbacks), or in a helper that loops over the batches itself."""
    around = {id(a) for a in _ancestors(site)}
    for loop in training_loops(script):
        if id(loop) not in around:
            continue
        for e in events(script, loop.body):  # type: ignore[attr-defined]
            if e.kind not in ("backward", "step"):
                continue
            if e.via is not None and _nearest_loop(e.node) is not None:
                continue  # a helper's own loop over the batches: a whole pass
            near = _nearest_loop(e.via if e.via is not None else e.node)
            if near is None or id(near) in around:
                return False
    return True


def _trains_before_scoring(script: Script, func: ast.AST, forwards: list[ast.Call],
                           text: str) -> bool:
    """``func`` calls ``model.train()`` itself and then runs that model with grad disabled, and
    keeps what it computes (no forward is a bare statement; the text scores it: a metric, an
    ``.item()``): an evaluation that switched the wrong way (``model.train()`` where
    ``model.eval()`` was meant). BatchNorm recalibration (``update_bn``) discards its outputs
    and stays out."""
    keys = {script.key(f.func) for f in forwards}
    if len(keys) != 1 or None in keys or any(isinstance(parent(f), ast.Expr) for f in forwards) \
            or not _METRIC_HINT.search(text):
        return False
    first = min(f.lineno for f in forwards)
    own = [e for e in events(script, func.body)  # type: ignore[attr-defined]
           if e.via is None and e.kind in ("train", "eval", "mode?")]
    return bool(own) and all(e.kind == "train" and e.key in keys and
                             e.node.lineno < first for e in own)  # type: ignore[attr-defined]


def backpropagated(script: Script, func: ast.AST) -> bool:
    """The function's result reaches a backward at one of its call sites (``loss =
    self.predict(b, True); loss.backward()``): a shared step that training also runs, whose
    mode and grad are its caller's choice, not an evaluation."""
    if not script.may_reach("backward") or returns_number(func):
        return False  # (a plain number carries no graph, whatever is computed from it)
    for site in script.call_sites(func):  # type: ignore[arg-type]
        if any(is_backward(p) for p in _ancestors(site)):
            return True
        stmt = statement_of(site)
        if not isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            continue
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        names = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        scope = script.enclosing_function(site) or script.tree
        rebound = [n.lineno for n in walk_local(scope) if isinstance(n, ast.Name) and
                   isinstance(n.ctx, ast.Store) and n.id in names and n.lineno > stmt.lineno]
        end = min(rebound, default=None)
        # and what is computed from it before then (``out = f(x); loss = crit(out, y)``)
        for a in sorted((n for n in walk_local(scope) if isinstance(n, ast.Assign) and
                         n.lineno > stmt.lineno and (end is None or n.lineno < end)),
                        key=lambda n: n.lineno):
            if any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(a.value)):
                names |= {n.id for t in a.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        # a backward after the call that reads the name before it is bound again
        if names and any(is_backward(c) and c.lineno >= stmt.lineno and
                         (end is None or c.lineno < end) and
                         any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(c))
                         for c in walk_local(scope)):
            return True
    return False


def _framework_hook(script: Script, func: ast.AST) -> bool:
    """A method named as a framework's hook (``validation_step``) that the file does not drive:
    no function of the file calls it except other hooks (``test_step`` returning
    ``self.validation_step(...)``). A ``validation_step`` that the file's own ``fit`` loop calls
    (an sklearn-style wrapper, a hand-written trainer) runs as the file says, in whatever grad
    and train mode its caller left."""
    if not _FRAMEWORK_HOOK.match(func.name):  # type: ignore[attr-defined]
        return False
    # (also a call that may run several methods: ``cb.on_epoch_end(self)`` over a trainer's
    # callbacks of several classes)
    for site in script.graph.sites(func):  # type: ignore[arg-type]
        caller = script.enclosing_function(site)
        if caller is None or not _FRAMEWORK_HOOK.match(caller.name):
            return False
    return True


def disabled_here(script: Script, node: ast.AST, func: ast.AST) -> bool:
    """``node`` runs with grad disabled by a ``with`` block or a decorator of ``func`` itself."""
    n = node
    while (p := parent(n)) is not None:
        if isinstance(p, (ast.With, ast.AsyncWith)) and n in p.body and any(
                script.grad_context(i.context_expr) is True for i in p.items):
            return True
        if p is func:
            return any(script.grad_context(d) is True
                       for d in func.decorator_list)  # type: ignore[attr-defined]
        n = p
    return False


INFERENCE_METHODS = frozenset({
    "generate", "predict", "predict_proba", "infer", "inference", "transcribe", "translate",
    "sample", "beam_search", "greedy_decode", "caption", "detect"})


def inference_calls(script: Script) -> list[ast.Call]:
    """Calls of a model's inference method (``model.generate(idx)``, ``net.predict(x)``) made
    with grad disabled, outside training loops: inference entry points, whatever the function
    around them is called."""
    def find() -> list[ast.Call]:
        candidates = [c for c in script.calls if isinstance(c.func, ast.Attribute) and
                      (c.func.attr in INFERENCE_METHODS or _layer_method_output(script, c))]
        # a helper handed the model only matters where grad is disabled somewhere, or where
        # something takes predictions (argmax, topk)
        helpers = [c for c in script.calls if c not in candidates and any(
            (k := script.key(a)) and k != "self" and script.is_model(k) for a in c.args)] \
            if any(script.may_reach(w) for w in ("no_grad", "inference_mode", "argmax",
                                                 "topk")) else []
        predictions = _prediction_forwards(script)
        if not candidates and not helpers and not predictions:
            return []
        loops = {id(loop) for loop in training_loops(script)}
        out = []
        for call in candidates:
            f = call.func
            k = script.key(f.value)  # type: ignore[attr-defined]
            if not k or k == "self" or not script.is_model(k) or _inside(call, loops):
                continue
            if not (script.grad_disabled(call) or any(
                    any(script.grad_context(d) is True for d in t.func.decorator_list)
                    for t in script.targets(call))):
                continue
            func = script.enclosing_function(call)
            if func is not None and (rollout(script, func) or script.has_backward(func)):
                continue
            out.append(call)
        for call in helpers:
            if _inside(call, loops) or not _runs_model_without_grad(script, call):
                continue
            func = script.enclosing_function(call)
            if func is not None and (rollout(script, func) or
                                     _backward_after(script, func, call)):
                continue
            out.append(call)
        for call in predictions:
            if _inside(call, loops) or any(call is c for c in out):
                continue
            func = script.enclosing_function(call)
            if func is not None and (rollout(script, func) or
                                     _backward_after(script, func, call) or
                                     _inside_module_class(script, func) or
                                     _acts_in_rollout(script, func)):
                continue
            out.append(call)
        return out
    return _cached(script, "_tg_inference_calls", find)


def _layer_method_output(script: Script, call: ast.Call) -> bool:
    """``vae.decode(z)``: a model's own method (not ``forward``) that runs its layers and whose
    output the caller keeps: a forward pass under another name (:mod:`module_methods`), an
    inference entry point when made with grad disabled. A method that also writes the module's
    attributes (``self.codebook = ...``, a running estimate) is an update, not inference."""
    f = call.func
    k = script.key(f.value) if isinstance(f, ast.Attribute) else None
    if not k or k == "self" or not script.is_model(k) or isinstance(parent(call), ast.Expr) or \
            not runs_layers(script, call):
        return False
    method = next(t.func for t in script.targets(call) if t.script is script and not t.instance)
    return not any(isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and
                   t.value.id == "self" for n in ast.walk(method)
                   if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign))
                   for t in (n.targets if isinstance(n, ast.Assign) else [n.target]))


_PREDICT = {"argmax", "topk", "argsort"}


def _acts_in_rollout(script: Script, func: ast.AST) -> bool:
    """``func`` picks actions for an RL rollout: a caller of it steps an environment
    (``a = self.act(s)`` then ``step(s, a)``); its greedy choice is the policy, not a score."""
    return any((f := script.enclosing_function(site)) is not None and rollout(script, f)
               for site in script.call_sites(func))  # type: ignore[arg-type]


def _prediction_forwards(script: Script) -> list[ast.Call]:
    """Forwards of a model (``model(x)``) whose output is turned into predictions
    (``.argmax(1)``, ``.topk(k)``, ``torch.argmax(out, 1)``, ``out.max(1)``; through a softmax,
    ``.detach()`` and a name first; through a slice, a comprehension over the output's rows and
    the parameter of a helper called once, ``[decode(o) for o in outputs]``) and never reaches
    a loss nor a backward in its scope:
    inference written as plain statements (a notebook cell after training) or in any function.
    Found from the prediction ops back to the forward, so files without them cost nothing."""
    out: list[ast.Call] = []
    seen: set[int] = set()
    for source in _prediction_sinks(script):
        hops = 0  # through a slice, a helper's parameter or a comprehension's target
        for _ in range(6):  # peel softmax, detach, a name
            if isinstance(source, ast.Subscript) and isinstance(source.slice, ast.Slice):
                source, hops = source.value, hops + 1  # vec[i * n:(i + 1) * n]
            elif isinstance(source, ast.Subscript):
                source = source.value  # probs[0], probs[:, 1]: a part of the same output
            elif isinstance(source, ast.Name) and (hop := _handed_in(script, source)) is not None:
                source, hops = hop, hops + 1
            elif isinstance(source, ast.Call) and _torch_function(script, source):
                if not source.args or \
                        (dotted(source.func) or "").rsplit(".", 1)[-1] not in _PEEL:
                    break
                source = source.args[0]  # torch.softmax(logits, 1)
            elif isinstance(source, ast.Call) and isinstance(source.func, ast.Attribute) and \
                    source.func.attr in _PEEL:
                source = source.func.value  # logits.softmax(1), out.detach()
            elif isinstance(source, ast.Name):
                value = last_assignment_of(source)
                if value is None:
                    break
                source = value
            else:
                break
        if not isinstance(source, ast.Call) or id(source) in seen:
            continue
        k = script.key(source.func)
        if not k or k == "self" or not script.is_model(k) or \
                _is_parameter(script, source.func):
            continue  # a model handed to a helper: judged at the helper's call
        seen.add(id(source))
        if _predicted(script, source, 3) if not hops else _never_trained_on(script, source):
            out.append(source)
    return out


def _prediction_sinks(script: Script) -> Iterator[ast.AST]:
    """What prediction ops take: ``out`` of ``out.argmax(1)``, ``torch.argmax(out, 1)``,
    ``out.max(1)``; ``probs`` of a probability threshold (``probs > 0.5``: a binary decision,
    a segmentation mask)."""
    for sink in script.calls:
        f = sink.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) \
            else None
        if name not in _PREDICT and name not in ("max", "amax"):
            continue
        if _torch_function(script, sink):
            if sink.args:
                yield sink.args[0]  # torch.argmax(out, 1)
        elif isinstance(f, ast.Attribute):
            yield f.value  # out.argmax(1)
    for node in script.nodes:
        if isinstance(node, ast.Compare) and _threshold(node):
            yield node.left


def _threshold(cmp: ast.Compare) -> bool:
    """``probs > 0.5``, ``p >= 0.3``: one order comparison with a constant strictly between 0
    and 1 (a probability cut-off)."""
    if len(cmp.ops) != 1 or not isinstance(cmp.ops[0], (ast.Gt, ast.GtE, ast.Lt, ast.LtE)):
        return False
    c = cmp.comparators[0]
    return isinstance(c, ast.Constant) and isinstance(c.value, float) and 0 < c.value < 1


def _handed_in(script: Script, name: ast.Name) -> ast.expr | None:
    """What a name holds when it is a comprehension's target (``o`` in ``[decode(o) for o in
    outputs]``: ``outputs``) or the parameter of a function with one call site in the file (its
    argument there); None otherwise."""
    for up in _ancestors(name):
        if isinstance(up, COMPREHENSIONS):
            for gen in up.generators:
                if isinstance(gen.target, ast.Name) and gen.target.id == name.id:
                    return gen.iter
        if isinstance(up, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            break
    func = script.enclosing_function(name)
    if func is None or not _is_parameter(script, name) or last_assignment_of(name) is not None:
        return None
    sites = script.call_sites(func)
    if len(sites) != 1:
        return None
    a = func.args  # type: ignore[attr-defined]
    names = [x.arg for x in [*a.posonlyargs, *a.args]]
    return bind_arguments(names, sites[0]).get(name.id)


def _never_trained_on(script: Script, forward: ast.Call) -> bool:
    """The name a forward is assigned to (or the forward itself) never reaches a loss or a
    backward in its scope."""
    p = parent(forward)
    if not (isinstance(p, ast.Assign) and len(p.targets) == 1 and
            isinstance(p.targets[0], ast.Name)):
        return False
    name = p.targets[0].id
    scope = script.enclosing_function(p) or script.tree
    for n in walk_local(scope):
        if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load):
            up = parent(n)
            if isinstance(up, ast.Call) and (is_backward(up) or _loss_like(script, up)):
                return False
    return True


def _torch_function(script: Script, call: ast.Call) -> bool:
    """``torch.softmax(x, 1)``, not a method called on what a torch function returned
    (``torch.softmax(x, 1).argmax(1)``)."""
    q = script.call_qualname(call) or ""
    return q.startswith("torch.") and "()" not in q and "[]" not in q


_PEEL = {"softmax", "sigmoid", "log_softmax", "detach", "cpu", "float", "squeeze"}


def last_assignment_of(name: ast.Name) -> ast.expr | None:
    from trainguard.lint.dataflow import last_assignment

    return last_assignment(name.id, name)


def _backward_after(script: Script, func: ast.AST, call: ast.AST) -> bool:
    """A backward runs in ``func`` at or after ``call`` (the call feeds a training step), or
    the call sits in a loop of ``func`` that runs one; training done before it does not
    count (``main()`` trains, then predicts)."""
    if not script.has_backward(func):
        return False
    line = call.lineno  # type: ignore[attr-defined]
    for loop in script.enclosing_loops(call):
        if script.has_backward(loop):
            return True
    for stmt in walk_local(func):
        if isinstance(stmt, ast.stmt) and stmt.lineno >= line and script.has_backward(stmt):
            return True
    return False


def _is_parameter(script: Script, expr: ast.AST) -> bool:
    func = script.enclosing_function(expr)
    if func is None or not isinstance(expr, ast.Name):
        return False
    a = func.args
    return expr.id in {x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs]}


def _predicted(script: Script, value: ast.AST, depth: int, prob: bool = False) -> bool:
    """``value`` (a forward or a name holding it) is used only for predictions in its scope.
    ``prob``: it already went through a softmax or a sigmoid, so its maximum (``.max()``, no
    dimension) is a confidence or an anomaly score, a prediction too."""
    p = parent(value)
    if isinstance(p, ast.Attribute) and p.attr in _PREDICT:
        return True
    if isinstance(p, ast.Compare) and p.left is value and prob and _threshold(p):
        return True  # probs > 0.5: a decision taken on a sigmoid's (or softmax's) output
    if isinstance(p, ast.Attribute) and p.attr in ("max", "amax") and \
            isinstance(parent(p), ast.Call) and (prob or p.attr == "max" and
                                                 _with_dim(parent(p), 0)):
        return True  # out.max(1) -> (values, indices); probs.max(): a score
    if isinstance(p, ast.Subscript) and p.value is value and depth > 0:
        return _predicted(script, p, depth, prob)  # probs[:, 1]: a part of the same output
    if isinstance(p, ast.Attribute) and p.attr in ("detach", "cpu", "float", "squeeze") and \
            depth > 0 and isinstance(parent(p), ast.Call):  # out.detach().argmax(1)
        return _predicted(script, parent(p), depth - 1, prob)  # type: ignore[arg-type]
    if isinstance(p, ast.Attribute) and p.attr in ("softmax", "sigmoid", "log_softmax") and \
            depth > 0 and isinstance(parent(p), ast.Call):
        return _predicted(script, parent(p), depth - 1, True)  # type: ignore[arg-type]
    if isinstance(p, ast.Call) and value in p.args:
        q = (script.call_qualname(p) or "").rsplit(".", 1)[-1]
        if q in _PREDICT or q == "max" and (script.call_qualname(p) or "").startswith(
                "torch.") and _with_dim(p, 1):  # _, pred = torch.max(out, 1)
            return True
        if q in ("softmax", "sigmoid", "log_softmax") and depth > 0:
            return _predicted(script, p, depth - 1, True)
        return False
    if isinstance(p, ast.Assign) and len(p.targets) == 1 and \
            isinstance(p.targets[0], ast.Name) and depth > 0:
        name = p.targets[0].id
        scope = script.enclosing_function(p) or script.tree
        uses = [n for n in walk_local(scope) if isinstance(n, ast.Name) and n.id == name and
                isinstance(n.ctx, ast.Load) and n.lineno >= p.lineno]  # type: ignore[attr-defined]
        if not uses:
            return False
        predicted = False
        for use in uses:
            up = parent(use)
            if isinstance(up, ast.Call) and (is_backward(up) or _loss_like(script, up)):
                return False
            if _predicted(script, use, depth - 1, prob):
                predicted = True
        return predicted
    return False


def _with_dim(call: ast.AST, first: int) -> bool:
    """A ``max`` call given a dimension (``out.max(1)``, ``torch.max(out, dim=1)``): it
    returns indices, not only a value."""
    return isinstance(call, ast.Call) and (len(call.args) > first or
                                           any(k.arg == "dim" for k in call.keywords))


def _loss_like(script: Script, call: ast.Call) -> bool:
    from trainguard.lint.dataflow import is_loss_call

    return is_loss_call(script, call)


def _runs_model_without_grad(script: Script, call: ast.Call) -> bool:
    """``call`` hands a model to a project function (``build_index(encoder, docs)``,
    ``helpers.latent_scores(netg, loader)``) that calls it only with grad disabled and never
    runs backward nor steps: inference, whatever the helper is called."""
    from trainguard.lint.callgraph import forwards_of, model_parameters

    found = model_parameters(script, call)
    if found is None or not found[1]:
        return False
    t, models = found
    func = t.func
    for sub in walk_local(func):
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute):
            if sub.func.attr in ("backward", "step"):
                return False
            if sub.func.attr in ("eval", "train") and isinstance(sub.func.value, ast.Name) \
                    and sub.func.value.id in models:
                return False  # the helper sets the mode itself (BatchNorm recalibration)
    if _sets_mode(t.script, func, models):
        return False  # through a helper of its own (enable_mc_dropout(model))
    forwards = forwards_of(func, models)
    return bool(forwards) and (all(t.script.grad_disabled(f) for f in forwards) or
                               all(_predicted(t.script, f, 3) for f in forwards)) and \
        not rollout(t.script, func)


def _sets_mode(script: Script, func: ast.AST, models: set[str]) -> bool:
    """``func`` (its calls followed) switches the mode of one of ``models``, its parameters,
    or of a module under another name: the mode its forwards run in is its own business."""
    return any(e.kind in ("eval", "train", "mode?") and e.key and
               e.key.split(".", 1)[0] in models
               for e in events(script, func.body))  # type: ignore[attr-defined]


def _inside(node: ast.AST, loops: set[int]) -> bool:
    """``node`` lies in one of the training loops (a made comprehension loop counts through
    its comprehension)."""
    n = node
    while (n := parent(n)) is not None:
        if id(n) in loops or id(getattr(n, "_tg_loop", None)) in loops:
            return True
    return False


def _ancestors(node: ast.AST):  # type: ignore[no-untyped-def]
    n = parent(node)
    while n is not None and not isinstance(n, SCOPES):
        yield n
        n = parent(n)


def _inside_module_class(script: Script, node: ast.AST) -> bool:
    """Methods of a class that defines ``forward`` are the model's own code, not evaluation."""
    cls = script.enclosing_class(node) if not isinstance(node, ast.ClassDef) else node
    return cls is not None and any(isinstance(b, ast.FunctionDef) and b.name == "forward"
                                   for b in cls.body)


def _is_region_loop(script: Script, loop: ast.AST) -> bool:
    memo = script.__dict__.setdefault("_tg_region_loops", {})
    if id(loop) not in memo:
        memo[id(loop)] = _region_loop(script, loop)
    return memo[id(loop)]


def _region_loop(script: Script, loop: ast.AST) -> bool:
    """A loop over batches (its iterable is named like data: ``loader``, ``val_dl``,
    ``enumerate(test_loader)``) that calls the model and feeds a metric, with no backward."""
    if isinstance(loop, ast.While):
        return False
    if _inside_module_class(script, loop):
        return False
    forwards = [f for f in forward_calls(script, loop) if _output_used(f, loop)]
    if not forwards or script.has_backward(loop) or rollout(script, loop):
        return False
    if not _DATA_ITER.search(script.segment(loop.iter) or "") and \
            not _fed_by_target(loop, forwards):  # type: ignore[arg-type]
        return False
    if _touches_optimizer(script, loop):
        return False  # a training loop whose backward happens in a helper (loss_scaler(...))
    if _backward_follows_in_iteration(script, loop) or _backward_follows_in_function(
            script, loop) or _returned_to_backward(script, loop):
        return False  # micro-batches of one step: their outputs reach the step's backward
    text = script.segment(loop) or ""
    # last (it reads the loop's events): a backward run by what the loop calls (a runner's
    # hooks dispatched by name, ``getattr(h, name)(self)``) makes it a training loop
    return bool(_METRIC_HINT.search(text)) and \
        not any(e.kind == "backward" for e in events(script, loop.body))  # type: ignore


def _backward_follows_in_iteration(script: Script, loop: ast.AST) -> bool:
    """An enclosing loop calls backward after ``loop`` in the same iteration, outside any other
    inner loop (``for chunk in batch.split(8): ...`` gathering terms, then ``loss.backward()``);
    an evaluation pass between two training passes has its backward inside a sibling loop."""
    end = getattr(loop, "end_lineno", loop.lineno)  # type: ignore[attr-defined]
    for outer in _ancestors(loop):
        if not isinstance(outer, (ast.For, ast.AsyncFor, ast.While)):
            continue
        for call in walk_local(outer):
            if is_backward(call) and call.lineno > end and _nearest_loop(call) is outer:
                return True
    return False


def _backward_follows_in_function(script: Script, loop: ast.AST) -> bool:
    """The function (or module) around ``loop`` calls backward after it, outside any loop
    that does not hold ``loop`` too (per-item losses gathered, then one backward); a
    backward in a later sibling loop (a training pass after an evaluation pass) does not
    count."""
    end = getattr(loop, "end_lineno", loop.lineno)  # type: ignore[attr-defined]
    scope = script.enclosing_function(loop) or script.tree
    around = {id(a) for a in _ancestors(loop)}
    for call in walk_local(scope):
        if is_backward(call) and call.lineno > end:
            near = _nearest_loop(call)
            if near is None or id(near) in around:
                return True
    return False


def _returned_to_backward(script: Script, loop: ast.AST) -> bool:
    """``loop`` is in a helper that returns a value, and a caller runs backward on what the
    call returned (``losses = per_item_losses(model, batch)`` then
    ``torch.stack(losses).mean().backward()``), followed through three assignments."""
    func = script.enclosing_function(loop)
    if func is None or not any(isinstance(r, ast.Return) and r.value is not None
                               for r in walk_local(func)):
        return False
    for site in script.call_sites(func)[:6]:
        outer = script.enclosing_function(site) or script.tree
        for call in walk_local(outer):
            if not is_backward(call) or not isinstance(call.func, ast.Attribute):
                continue
            if _flows_from(call.func.value, site, call, 4):
                return True
    return False


def _flows_from(expr: ast.AST, site: ast.Call, at: ast.AST, depth: int) -> bool:
    """``expr`` is computed from the value of the call ``site`` (through names assigned in
    the same scope, ``depth`` steps)."""
    for n in ast.walk(expr):
        if n is site:
            return True
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and depth > 0:
            value = last_assignment(n.id, at)
            if value is not None and _flows_from(value, site, value, depth - 1):
                return True
    return False


def _nearest_loop(node: ast.AST) -> ast.AST | None:
    return next((p for p in _ancestors(node)
                 if isinstance(p, (ast.For, ast.AsyncFor, ast.While))), None)


def _output_used(call: ast.Call, region: ast.AST) -> bool:
    """The forward's output is read: not a bare statement (``model(x)`` run only so that
    BatchNorm updates its statistics) nor a name nothing reads (``out = model(x)``)."""
    p = parent(call)
    if isinstance(p, ast.Expr):
        return False
    if isinstance(p, ast.Assign) and all(isinstance(t, ast.Name) for t in p.targets):
        names = {t.id for t in p.targets} - {"_"}  # type: ignore[attr-defined]
        return any(isinstance(n, ast.Name) and n.id in names and isinstance(n.ctx, ast.Load)
                   for n in walk_local(region))
    return True


def _fed_by_target(loop: ast.For | ast.AsyncFor, forwards: list[ast.Call]) -> bool:
    """The model is called on what the loop yields (``for x, adj, y in graphs: net(x, adj)``):
    a pass over data, whatever the iterable is called."""
    it = loop.iter
    if isinstance(it, ast.Call) and dotted(it.func) == "enumerate" and it.args:
        it = it.args[0]
    if isinstance(it, ast.Call) and dotted(it.func) == "range":
        return False  # indices, not data
    bound = {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)} - {"_"}
    return any(isinstance(n, ast.Name) and n.id in bound
               for f in forwards for a in [*f.args, *(k.value for k in f.keywords)]
               for n in ast.walk(a))


def rollout(script: Script, node: ast.AST) -> bool:
    """RL rollouts and BatchNorm recalibration run the model on purpose without backward."""
    for sub in walk_local(node):
        if isinstance(sub, ast.Call):
            q = script.call_qualname(sub) or ""
            if q.endswith(("env.step", ".reset", "update_bn")) or \
                    (isinstance(sub.func, ast.Attribute) and sub.func.attr == "step"
                     and not script.is_optimizer(script.key(sub.func.value))
                     and not script.is_scheduler(script.key(sub.func.value))) or \
                    (isinstance(sub.func, ast.Name) and sub.func.id in ("step", "env_step")
                     and len(sub.args) >= 2):  # a grid world's own ``step(state, action)``
                return True
    return False


def preceding_events(script: Script, node: ast.AST, *, again: bool = False) -> list[Event]:
    """Events of the statements that run before ``node`` in its function (or module), in order:
    the earlier statements of every enclosing block, outermost first. With ``again``, the view
    from the next pass of the innermost loop around ``node``: that loop's whole body has run
    once more before the earlier statements (state carried between iterations)."""
    blocks: list[tuple[ast.AST, list[ast.stmt]]] = []
    n = node
    while (p := parent(n)) is not None and not isinstance(p, (ast.Lambda, ast.ClassDef)):
        for field in ("body", "orelse", "finalbody", "handlers"):
            block = getattr(p, field, None)
            if isinstance(block, list) and n in block:
                blocks.append((p, block[:block.index(n)]))
                break
        if isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef)):
            break
        n = p
    out: list[Event] = []
    loop_at = next((i for i, (owner, _) in enumerate(blocks)
                    if isinstance(owner, (ast.For, ast.AsyncFor, ast.While))), None)
    for i in range(len(blocks) - 1, -1, -1):
        owner, before = blocks[i]
        if again and i == loop_at:
            out.extend(events(script, owner.body))  # type: ignore[attr-defined]
        if isinstance(owner, (ast.With, ast.AsyncWith)):
            for item in owner.items:  # with eval_mode(model): what entering it does
                out.extend(entry_events(script, item.context_expr))
        out.extend(events(script, before))
    receiver = _receiver_stmt(script, node)
    if receiver is not None:
        out.extend(events(script, [receiver]))
    return out


def _receiver_stmt(script: Script, node: ast.AST) -> ast.stmt | None:
    """``Tracker(model, box).track(frames)``: the receiver of a method call runs before it (the
    constructor's ``self.model.eval()``), as a statement of its own (kept, so that the events'
    memo never meets a reused id)."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and
            any(isinstance(n, ast.Call) for n in ast.walk(node.func.value))):
        return None
    kept = script.__dict__.setdefault("_tg_receivers", {})
    if id(node) not in kept:
        stmt = ast.Expr(value=node.func.value)
        ast.copy_location(stmt, node)
        kept[id(node)] = stmt
    return kept[id(node)]


def _steps_optimizer(script: Script, node: ast.AST) -> bool:
    return any(isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and
               c.func.attr in ("step", "zero_grad") and
               script.is_optimizer(script.key(c.func.value)) for c in walk_local(node))


def _touches_optimizer(script: Script, node: ast.AST) -> bool:
    for sub in walk_local(node):
        if isinstance(sub, (ast.Name, ast.Attribute)) and script.is_optimizer(script.key(sub)):
            return True
    return False
