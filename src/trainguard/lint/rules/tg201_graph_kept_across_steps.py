"""TG201 graph-kept-across-steps: a tensor with a ``grad_fn`` is accumulated across iterations.

``total_loss += loss`` keeps every iteration's graph alive through ``total_loss``
(PyTorch FAQ, "My model reports cuda runtime error(2): out of memory":
https://pytorch.org/docs/stable/notes/faq.html). Fires only when the accumulator is created
before the loop (so it outlives the iteration) and never reaches a backward; a list of losses
built and backpropagated in the same iteration stays silent. A running average
(``ema = 0.98 * ema + 0.02 * loss``, ``self.stats[k] = beta * old + (1 - beta) * value``)
keeps the previous value, so it accumulates as a sum does.

Fix: ``.item()`` is safe when the accumulator is only used as a number (printed, logged,
compared, divided); otherwise ``.detach()`` is offered as an unsafe fix.

A module that caches on ``self`` a tensor computed with grad from its own learnable parameter
and reuses it in later forwards (:mod:`trainguard.lint.caches`) keeps the graph of the forward
that built it alive across steps: reported at the store
(https://github.com/lucidrains/rotary-embedding-torch/issues/18).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trainguard.lint.astutil import (COMPREHENSIONS, comprehension_holds, dotted,
                                     ifs_between, iterated_parts, parent, statement_of,
                                     walk_local)
from trainguard.lint.bounded import bounded_container
from trainguard.lint.caches import cached_graphs
from trainguard.lint.callgraph import Target, bind_arguments
from trainguard.lint.dataflow import (_ABSENT, CUTS, _is_cut, carries_graph, dict_entry,
                                      graph_names, is_loss_call, last_assignment, numeric_only,
                                      reaching_values, scope_of)
from trainguard.lint.events import events
from trainguard.lint.regions import training_loops
from trainguard.lint.rules import Edit, Hit
from trainguard.lint.script import Script, is_backward

CODE = "TG201"
SKIP_IN_TESTS = True  # about a training run; test files are not runs


def check(script: Script) -> Iterator[Hit]:
    seen: set[int] = set()
    for loop in training_loops(script):
        for hit in _carried_state(script, loop):
            if id(hit.node) not in seen:
                seen.add(id(hit.node))
                yield hit
        names = graph_names(script, loop)
        yield from _kept_in(script, loop, names, seen)
        # a step function the loop calls that keeps its graph on the object
        # (``self.loss_history.append(task_loss)``): the object outlives every iteration
        handed = _graph_params(script, loop, names)
        direct = set(handed)
        for func in script.reachable(loop)[1:]:
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            inner = graph_names(script, func)
            if handed.get(id(func)) and (id(func) not in direct or not any(
                    _kept_attr(func, p) for p in handed[id(func)])):
                # self._log(losses): the parameter holds the graph (a meter's own update that
                # the loop calls is reported at its call instead; one that a logger's method
                # calls, at the line that keeps it)
                inner = graph_names(script, func, seed=handed[id(func)])
            if inner:  # what this function hands on (step() -> self._record(terms))
                for k, params in _graph_params(script, func, inner).items():
                    handed.setdefault(k, set()).update(params)
            for node in walk_local(func):
                found = _accumulation(script, node, inner)
                if found is None and id(node) not in seen and \
                        (hit := _helper_meter_update(script, loop, func, node, inner)):
                    seen.add(id(node))
                    yield hit
                if found is None or id(node) in seen:
                    continue
                acc, value, verb = found
                mine = acc.startswith("self.")
                if not mine and not _handed_across(script, loop, func, acc, node):
                    continue  # (a local of the helper, or an object made per call)
                if script.grad_disabled(node) or (_self_reaches_backward(script, node, acc)
                                                  if mine else
                                                  _reaches_backward(acc, func) if "." not in acc
                                                  else
                                                  _object_reaches_backward(script, node, acc)):
                    continue
                seen.add(id(node))
                yield _hit(script, node, acc, value, verb,
                           _is_scalar_loss(script, value, inner), inner)
    for loop in _gradient_loops(script):
        yield from _kept_in(script, loop, graph_names(script, loop), seen)
    if script.may_reach("backward") and "self." in script.source:
        for c in cached_graphs(script):
            if id(c.store) not in seen:
                seen.add(id(c.store))
                yield _cache_hit(c)


def _kept_in(script: Script, loop: ast.AST, names: set[str], seen: set[int]) -> Iterator[Hit]:
    """What the iterations of ``loop`` keep of their graphs past the iteration."""
    for node in walk_local(loop):
        found = _accumulation(script, node, names)
        if found is None:
            found = _meter_update(script, node, names)
            if found is not None and id(node) not in seen:
                seen.add(id(node))
                yield found
            continue
        acc, value, verb = found
        if script.grad_disabled(node) or id(node) in seen:
            continue
        if acc.startswith("self."):
            if _self_reaches_backward(script, node, acc):
                continue
        elif "." in acc:  # state.metrics: a list on an object the loop did not make
            if not _lives_across(script, acc.split(".", 1)[0], loop) or \
                    _object_reaches_backward(script, node, acc):
                continue
        elif not _outlives(acc, loop) or _reaches_backward(acc, scope_of(loop)):
            continue
        seen.add(id(node))
        yield _hit(script, node, acc, value, verb, _is_scalar_loss(script, value, names),
                   names)


def _gradient_loops(script: Script) -> list[ast.AST]:
    """Loops outside training whose every iteration takes gradients with
    ``torch.autograd.grad`` (forces as -dE/dx in a simulation, a saliency or attack loop): each
    iteration builds a graph, and what of it the loop keeps outlives the iteration. Loops
    inside or around a training loop are the training loop's."""
    if "autograd" not in script.source:
        return []
    trains = training_loops(script)
    starts = {id(lp) for lp in trains}
    # loops only: the parser shares one ``Load()`` context object among all names of a tree
    inside = {id(n) for lp in trains for n in ast.walk(lp) if isinstance(n, (ast.For, ast.While))}
    out = []
    for loop in script.nodes:
        if not isinstance(loop, (ast.For, ast.While)) or id(loop) in inside or \
                any(id(n) in starts for n in ast.walk(loop)):
            continue
        kinds = {e.kind for e in events(script, loop.body)}
        if "autograd" in kinds and not kinds & {"backward", "step"}:
            out.append(loop)
    return out


def _graph_params(script: Script, loop: ast.AST, names: set[str]) -> dict[int, set[str]]:
    """id(function) -> its parameters that a call in ``loop`` hands a graph tensor (or a dict
    of them): ``self._accumulate(losses)`` with ``losses = {"kl": kl, ...}``, or one entry of
    such a dict (``record(history, losses["total"])``)."""
    out: dict[int, set[str]] = {}

    def held(arg: ast.expr) -> bool:
        if isinstance(arg, ast.Subscript):
            arg = arg.value
        return isinstance(arg, ast.Name) and arg.id in names

    for call in walk_local(loop):
        if not isinstance(call, ast.Call) or not any(
                held(a) for a in [*call.args, *(k.value for k in call.keywords)]):
            continue  # only names known to hold a graph are followed (cheap)
        for target in script.targets(call)[:2]:
            if target.script is not script:
                continue
            func = target.func
            params = [a.arg for a in func.args.posonlyargs + func.args.args]
            if target.bound and params:
                params = params[1:]
            named = set(params) | {a.arg for a in func.args.kwonlyargs}
            extra = func.args.kwarg.arg if func.args.kwarg is not None else None
            for param, arg in bind_arguments(params, call).items():
                if param not in named:  # log(recon=recon) into def log(self, **values)
                    if extra is None:
                        continue
                    param = extra
                if held(arg):
                    out.setdefault(id(func), set()).add(param)
    return out


def _carried_state(script: Script, loop: ast.AST) -> Iterator[Hit]:
    """``outputs, states = model(inputs, states)`` in a training loop, with ``states`` made
    before the loop and never detached in it: the next iteration's forward chains onto this
    iteration's graph, whose buffers the backward freed ("Trying to backward through the graph
    a second time"), or keeps every graph alive. Truncated backpropagation through time detaches
    the state (``states = [s.detach() for s in states]``, ``hidden = repackage(hidden)``) before
    the next forward (pytorch/examples word_language_model)."""
    if not isinstance(loop, (ast.For, ast.While)):
        return
    for node in walk_local(loop):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and
                isinstance(node.value, ast.Call)):
            continue
        k = script.key(node.value.func)
        if not k or k == "self" or not script.is_model(k) or script.grad_disabled(node):
            continue
        target = node.targets[0]
        outs = [target] if isinstance(target, ast.Name) else \
            [e for e in target.elts if isinstance(e, ast.Name)] \
            if isinstance(target, ast.Tuple) else []
        args = {n.id for a in [*node.value.args, *(kw.value for kw in node.value.keywords)]
                if not _is_cut(a)  # rnn(x, state.detach()) cuts it at the call
                for n in ast.walk(a) if isinstance(n, ast.Name)}
        for out in outs:
            if out.id not in args or not _outlives(out.id, loop) or \
                    _rebound_in(loop, out.id, node) or _detached_in_place(loop, out.id):
                continue
            yield Hit(node, f"`{out.id}` comes out of {k}(...) with the graph of this iteration "
                            f"and goes into the next iteration's forward without detach: the "
                            f"next backward runs into this iteration's freed graph (or keeps "
                            f"every iteration's graph alive)",
                      fix=f"detach it before the next forward ({out.id} = "
                          f"{out.id}.detach(), or detach each tensor of a tuple)")
            return


def _rebound_in(loop: ast.AST, name: str, keep: ast.AST) -> bool:
    """``name`` is assigned in the loop other than by ``keep`` (a detach, a reset)."""
    for sub in walk_local(loop):
        if sub is keep:
            continue
        targets = sub.targets if isinstance(sub, ast.Assign) else \
            [sub.target] if isinstance(sub, (ast.AugAssign, ast.AnnAssign, ast.For)) else []
        if any(isinstance(n, ast.Name) and n.id == name for t in targets for n in ast.walk(t)):
            return True
    return False


def _detached_in_place(loop: ast.AST, name: str) -> bool:
    for sub in walk_local(loop):
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and \
                sub.func.attr in ("detach_", "requires_grad_") and \
                any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(sub.func.value)):
            return True
        if isinstance(sub, ast.For) and any(isinstance(n, ast.Name) and n.id == name
                                            for n in ast.walk(sub.iter)):
            return True  # for s in states: s.detach_()
    return False


def _accumulation(script: Script, node: ast.AST, names: set[str]):  # type: ignore[no-untyped-def]
    if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add):
        target = node.target
        if isinstance(target, ast.Subscript):  # epoch_losses[key] += loss[key]
            target = target.value
        acc = _acc_name(target)
        if acc is None:
            return None
        value = node.value
        if isinstance(value, ast.List) and len(value.elts) == 1:
            value = value.elts[0]
        if carries_graph(script, value, names):
            return acc, value, "+="
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
            isinstance(node.value, ast.BinOp) and isinstance(node.value.op, ast.Add):
        target = node.targets[0]
        acc = _acc_name(target)
        left, right = node.value.left, node.value.right
        if isinstance(target, ast.Name) and isinstance(left, ast.Name) and left.id == acc and \
                carries_graph(script, right, names):
            return acc, right, "= +"
        if acc is not None and not isinstance(target, ast.Name):
            # totals[k] = totals.get(k, 0) + v; self.sums[k] = self.sums[k] + v
            for mine, other in ((left, right), (right, left)):
                if _reads_acc(mine, acc) and carries_graph(script, other, names):
                    return acc, other, "= +"
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        blended = _blend(script, node, names) or _folded_sum(script, node, names)
        if blended is not None:
            return blended
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        call = node.value
        f = call.func
        if isinstance(f, ast.Attribute) and f.attr == "append" and len(call.args) == 1:
            holder = f.value
            if isinstance(holder, ast.Call) and isinstance(holder.func, ast.Attribute) and \
                    holder.func.attr == "setdefault":  # logs.setdefault(k, []).append(v)
                holder = holder.func.value
            acc = _acc_name(holder)
            if acc is not None and carries_graph(script, call.args[0], names) and \
                    not _rebound_cut(script, call.args[0], names) and \
                    not bounded_container(script, node, acc):
                # (a deque(maxlen=N), or a list trimmed as it grows, keeps the last N graphs:
                # memory stops growing)
                return acc, call.args[0], "append"
        if isinstance(f, ast.Attribute) and f.attr == "add_" and len(call.args) == 1:
            # total.add_(loss); stats.device_stat("loss").add_(loss): the tensor the object
            # returns is kept by it (DeepLearningExamples#1102)
            holder = f.value
            if isinstance(holder, ast.Call) and isinstance(holder.func, ast.Attribute):
                holder = holder.func.value
            acc = _acc_name(holder)
            if acc is not None and carries_graph(script, call.args[0], names):
                return acc, call.args[0], "add_"
    return None


def _rebound_cut(script: Script, value: ast.expr, names: set[str]) -> bool:
    """The name appended was bound last, above the append in its block, to a cut copy
    (``output = {k: v.detach() for k, v in output.items()}``, ``loss = loss.item()``): whatever
    it held before."""
    if not isinstance(value, ast.Name):
        return False
    if _entry_cut_before(value):
        return True
    reaching = reaching_values(value.id, value)
    if reaching and all(_cut_at_top(v) for v in reaching):
        return True  # loss = loss.item() (float(loss), loss.detach()) after the backward
    assigned = last_assignment(value.id, value)
    if not isinstance(assigned, (ast.DictComp, ast.ListComp)):
        return False
    elt = assigned.value if isinstance(assigned, ast.DictComp) else assigned.elt
    return _is_cut(elt)  # (each entry detached; an entry copied as is keeps its graph)


def _cut_at_top(expr: ast.expr) -> bool:
    """``expr`` is a number or a detached tensor as a whole: ``float(x)``, ``int(x)``, or a
    method chain with a cut in it (``x.item()``, ``x.detach().cpu()``); ``x.detach() + y``
    is not (``y`` may carry a graph)."""
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name):
        return expr.func.id in ("float", "int", "round")
    n: ast.AST = expr
    while isinstance(n, (ast.Call, ast.Attribute)):
        if isinstance(n, ast.Attribute):
            if n.attr in CUTS:
                return True
            n = n.value
        else:
            n = n.func
    return False


def _entry_cut_before(value: ast.Name) -> bool:
    """Above the append, in its block and after ``value`` was last bound, an entry of it is
    replaced by a cut copy (``output["loss"] = output["loss"].detach()``): the writer cut what
    held the graph."""
    stmt = statement_of(value)
    block = parent(stmt) if stmt is not None else None
    body = next((b for b in (getattr(block, f, None) for f in ("body", "orelse", "finalbody"))
                 if isinstance(b, list) and stmt in b), None)
    if body is None:
        return False
    for prev in reversed(body[:body.index(stmt)]):
        if not isinstance(prev, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            continue
        targets = prev.targets if isinstance(prev, ast.Assign) else [prev.target]
        if any(isinstance(t, ast.Name) and t.id == value.id for t in targets):
            return False  # bound here: what it holds now comes from this line
        if isinstance(prev, ast.Assign) and prev.value is not None and any(
                isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and
                t.value.id == value.id for t in targets) and _is_cut(prev.value):
            return True
    return False


def _blend(script: Script, node: ast.Assign, names: set[str]):  # type: ignore[no-untyped-def]
    """A running average: ``ema = 0.98 * ema + 0.02 * loss``, also as the ``else`` of
    ``loss if ema is None else ...`` and with the old value read first (``old =
    self.stats[key]``, then ``self.stats[key] = beta * old + (1 - beta) * value``). The new
    value keeps the old one, so every graph that ever entered it stays alive. A term that cuts
    the old value (``ema.detach()``) starts no chain."""
    acc = _acc_name(node.targets[0])
    if acc is None:
        return None
    value = node.value
    branches = [_sum_terms(b) for b in ([value.body, value.orelse]
                                        if isinstance(value, ast.IfExp) else [value])]
    if all(len(terms) < 2 for terms in branches):
        return None  # (most assignments: no function walk)
    func = scope_of(node)
    memo = script.__dict__.setdefault("_tg_blend_olds", {})
    if (id(func), acc) not in memo:
        memo[(id(func), acc)] = {t.id for a in walk_local(func) if isinstance(a, ast.Assign)
                                 and _reads_acc(a.value, acc)
                                 for t in a.targets if isinstance(t, ast.Name)}
    olds = memo[(id(func), acc)]
    for terms in branches:
        if len(terms) < 2:
            continue
        keeps = [t for t in terms if not _is_cut(t) and any(
            _reads_acc(n, acc) or isinstance(n, ast.Name) and n.id in olds
            for n in ast.walk(t))]
        new = [t for t in terms if t not in keeps and carries_graph(script, t, names)]
        if keeps and new:
            return acc, new[0], "= +"
    return None


def _folded_sum(script: Script, node: ast.Assign, names: set[str]):  # type: ignore[no-untyped-def]
    """Per-term totals rebuilt by a comprehension whose element adds a value of the step to the
    accumulator's own entry: ``totals = [t + c for t, c in zip(totals, terms)]`` (a generator
    in ``tuple(...)`` too, or a branch of ``terms if totals is None else ...``; RecBole's
    trainer keeps its loss tuple this way, RUCAIBox/RecBole#282), ``running = {k:
    running.get(k, 0.0) + v for k, v in parts.items()}``. The new container holds each entry's
    old value, so every step's graph stays alive; a cut term (``v.item()``) keeps none."""
    acc = _acc_name(node.targets[0])
    if acc is None:
        return None
    for comp in ast.walk(node.value):
        folded = _fold_parts(comp, acc)
        if folded is None:
            continue
        terms, parts = folded
        bound = {n.id for t, _ in parts for n in ast.walk(t) if isinstance(n, ast.Name)}
        graph = {n.id for t, it in parts if carries_graph(script, it, names)
                 for n in ast.walk(t) if isinstance(n, ast.Name)}
        for t in terms:
            if _is_cut(t) or _keeps_old(t, acc, parts):
                continue
            if isinstance(t, ast.Name) and t.id in graph or \
                    carries_graph(script, t, names - bound):
                return acc, t, "= +"
    return None


def _fold_parts(comp: ast.AST, acc: str):  # type: ignore[no-untyped-def]
    """For a one-generator comprehension whose element (a dict comprehension's value) is a sum
    with a term that keeps ``acc``'s old entry: (the sum's terms, [(target part, what it
    iterates)]); None otherwise."""
    if not isinstance(comp, (ast.ListComp, ast.GeneratorExp, ast.DictComp)) or \
            len(comp.generators) != 1:
        return None
    elt = comp.value if isinstance(comp, ast.DictComp) else comp.elt
    if not (isinstance(elt, ast.BinOp) and isinstance(elt.op, ast.Add)):
        return None
    gen = comp.generators[0]
    parts = iterated_parts(gen.target, gen.iter)
    terms = _sum_terms(elt)
    if not any(not _is_cut(t) and _keeps_old(t, acc, parts) for t in terms):
        return None
    return terms, parts


def _keeps_old(term: ast.AST, acc: str, parts: list[tuple[ast.expr, ast.expr]]) -> bool:
    """``term`` is the accumulator's old entry: ``totals[k]``, ``totals.get(k, 0)``, or a name
    the comprehension takes from the accumulator (``t`` of ``zip(totals, terms)``)."""
    if _reads_acc(term, acc):
        return True
    return isinstance(term, ast.Name) and any(
        _reads_acc(it, acc) and any(isinstance(n, ast.Name) and n.id == term.id
                                    for n in ast.walk(t)) for t, it in parts)


def _sum_terms(expr: ast.AST) -> list[ast.AST]:
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Add, ast.Sub)):
        return _sum_terms(expr.left) + _sum_terms(expr.right)
    return [expr]


def _reads_acc(expr: ast.AST, acc: str) -> bool:
    """``totals[k]``, ``totals.get(k, 0)``, ``self.sums[k]``: a read of the accumulator."""
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and \
            expr.func.attr == "get":
        expr = expr.func.value
    if isinstance(expr, ast.Subscript):
        expr = expr.value
    return dotted(expr) == acc


def _acc_name(node: ast.AST) -> str | None:
    """``total`` or ``self.history`` (an attribute of the object, which outlives the loop);
    a list kept under a key of either (``history["recon"]``, ``self.logs[name]``) is held by
    the container it sits in."""
    if isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        # self.history, or state.metrics: a list held by an object (a run's state, a logger)
        return f"{node.value.id}.{node.attr}"
    if isinstance(node, ast.Attribute) and (dotted(node) or "").startswith("self.") and \
            "(" not in (dotted(node) or "("):
        return dotted(node)  # self.state.metrics: held by an object the trainer keeps
    return None


def _lives_across(script: Script, name: str, loop: ast.AST) -> bool:
    """The object ``name`` exists before ``loop`` and the loop does not rebind it: assigned
    above it, a parameter of the function around it (the caller made it), or a global that
    function never assigns. A module, or an object the loop builds anew, does not count."""
    if name in script.aliases or any(isinstance(n, ast.Name) and n.id == name and
                                     isinstance(n.ctx, ast.Store) for n in walk_local(loop)):
        return False  # (state.updates += 1 changes the object, it does not rebind it)
    if _outlives(name, loop):
        return True
    scope = scope_of(loop)
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        args = scope.args
        if name in {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}:
            return True
        bound = any(isinstance(n, ast.Name) and n.id == name and
                    not isinstance(n.ctx, ast.Load) for n in walk_local(scope))
        return not bound and any(
            isinstance(s, (ast.Assign, ast.AnnAssign)) and any(
                isinstance(t, ast.Name) and t.id == name
                for t in (s.targets if isinstance(s, ast.Assign) else [s.target]))
            for s in script.tree.body)
    return False


def _handed_across(script: Script, loop: ast.AST, func: ast.AST, acc: str,
                   node: ast.AST) -> bool:
    """``acc`` (``state.metrics``) is a list on an object that ``func`` takes as a parameter,
    or the parameter itself when ``node`` changes it in place (``running[k] = running.get(k,
    0.0) + v``, ``history.append(loss)``), and every call of ``func`` in ``loop`` hands it an
    object that lives across the loop (``log_step(state, loss)`` with ``state`` made before it,
    or ``self.state``) and that no backward of the loop's function reads."""
    base = acc.split(".", 1)[0]
    args = func.args  # type: ignore[attr-defined]
    params = [a.arg for a in args.posonlyargs + args.args]
    whole = "." not in acc
    if base not in params or base in ("self", "cls") or whole and not (
            isinstance(node, ast.Expr) or isinstance(node, (ast.Assign, ast.AugAssign)) and
            isinstance(node.targets[0] if isinstance(node, ast.Assign) else node.target,
                       ast.Subscript)):
        return False
    handed = []
    for call in walk_local(loop):
        if not isinstance(call, ast.Call):
            continue
        for target in script.targets(call):
            if target.func is func:
                names = params[1:] if target.bound and params else params
                handed.append(bind_arguments(names, call).get(base))
    return bool(handed) and all(
        isinstance(h, ast.Name) and _lives_across(script, h.id, loop) and not (
            whole and _reaches_backward(h.id, scope_of(loop))) or
        (dotted(h) or "").startswith("self.") for h in handed)


def _object_reaches_backward(script: Script, node: ast.AST, acc: str) -> bool:
    """What the object keeps reaches a backward anywhere in the file, read under any name
    (``policy.saved_log_probs`` filled in ``select_action`` and summed into the loss that
    ``finish_episode`` backpropagates), or the list is rebuilt before every append."""
    attr = acc.rsplit(".", 1)[1]
    reads = {d for n in script.nodes if isinstance(n, ast.Attribute) and n.attr == attr
             and (d := dotted(n)) is not None and "(" not in d}
    return any(_self_reaches_backward(script, node, a, whole=True) for a in reads | {acc})


def _self_reaches_backward(script: Script, node: ast.AST, acc: str, *,
                           whole: bool = False) -> bool:
    """``self.losses`` is reset in the same function, or a backward in its class reads it
    (losses collected over micro-batches, then summed and backpropagated)."""
    func = script.enclosing_function(node)
    if func is not None:
        # a reset counts when it runs at every iteration of the loop around the accumulation
        # (``self.epoch_loss = 0.0`` before ``for x in loader: self.epoch_loss += loss`` does
        # not: the sum keeps the graphs of the whole epoch)
        loops = sorted((n for n in walk_local(func) if isinstance(n, (ast.For, ast.While)) and
                        any(n2 is node for n2 in ast.walk(n))), key=lambda n: -n.lineno)
        scope = next((lp for lp in loops if any(e.kind in ("backward", "step") for e in
                                                events(script, lp.body))), func)
        for sub in walk_local(scope):
            if isinstance(sub, ast.Assign) and sub.lineno < node.lineno and any(  # type: ignore
                    dotted(t) == acc for t in sub.targets):
                return True  # rebuilt on every call: it does not outlive the iteration
    cls = None if whole else script.enclosing_class(node)
    scope = cls if cls is not None else script.tree
    # what is computed from the accumulator, through names (``log_probs =
    # torch.stack([m[0] for m in self.memory])``, ``actor = -(log_probs * adv).sum()``), and
    # reaches a backward: a rollout buffer consumed by the update
    derived = {acc}
    assigns = [a for a in ast.walk(scope) if isinstance(a, ast.Assign)]
    for _ in range(3):
        grown = {t.id for a in assigns if _reads_any(a.value, derived)
                 for t in a.targets if isinstance(t, ast.Name)} - derived
        if not grown:
            break
        derived |= grown
    return any(is_backward(c) and _reads_any(c, derived) for c in ast.walk(scope))


def _reads_any(expr: ast.AST, names: set[str]) -> bool:
    return any(isinstance(n, (ast.Name, ast.Attribute)) and dotted(n) in names
               for n in ast.walk(expr))


def _meter_update(script: Script, node: ast.AST, names: set[str]) -> Hit | None:
    """``meter.update(loss, n)`` where the method adds its argument into an attribute
    (``self.sum += val * n``): an AverageMeter fed the loss tensor keeps every graph. So does
    ``stats["loss"] = loss`` on an object whose ``__setitem__`` appends the value to a list."""
    if script.grad_disabled(node):
        return None
    for target, call, owner, bound in _method_calls(script, node):
        func = target.func
        for param, arg in bound.items():
            if not carries_graph(script, arg, names):
                continue
            found = next((k for k in _kept_attrs(func, param)
                          if _picks_graph(script, k[1], param, arg, names)), None)
            if found is None:
                passed = next(_passed_on(target, param), None)
                if passed is not None:
                    return _passed_hit(script, call, owner, arg, names, func, passed)
                continue
            kept, keeper = found
            text = script.segment(arg) or "loss"
            picks = _picks_from(keeper, param)
            if target.script is script and (picks or isinstance(call, ast.Call) and
                                            _dispatched(script, call)):
                # The holder picks tensors out of what it is handed (``out["loss"]``), or is one
                # of the objects the call may reach (``for cb in callbacks:
                # cb.on_batch_end(logits, y)``): that line, not the caller, decides what is kept.
                taken = "taken from" if picks else "made from"
                return Hit(keeper, f"{func.name}() keeps tensors {taken} `{param}` in "
                                   f"`{kept}` across iterations, and `{owner}({text}, ...)` at "
                                   f"{script.at(call.lineno)} hands it tensors with a grad_fn: "
                                   f"every step's autograd graph stays alive",
                           fix=f"keep .item() (or .detach()) of what is stored in {kept}")
            shown, tensor, inside = _handed_parts(script, call, owner, arg, names)
            return Hit(call, f"`{shown}` hands a tensor with a grad_fn to "
                             f"{func.name}(), which keeps it in `{kept}` across iterations: "
                             f"every step's autograd graph stays alive",
                       fix=f"pass {tensor}.item() (or {tensor}.detach()){inside}")
    return None


def _passed_hit(script: Script, call: ast.AST, owner: str, arg: ast.expr, names: set[str],
                func: ast.AST, passed: tuple[Target, str, bool]) -> Hit:
    """The finding for a meter that hands what it is given to the values it holds, which keep
    it (:func:`_passed_on`): reported where the tensors enter what the call hands over (a
    ``logs.update(losses)`` merging them into a dict of numbers, :func:`_merged_into`), else
    at the call."""
    inner, kept, per_value = passed
    cls = inner.script.enclosing_class(inner.func)
    where = f"{cls.name}.{inner.func.name}()" if cls is not None else f"{inner.func.name}()"
    text = script.segment(arg) or "loss"
    kept_at = f"which passes each value to {where}, which keeps it" if per_value else \
        f"which passes it to {where}, which keeps it"
    merged = _merged_into(script, arg, call, names)
    if merged is not None:
        stmt, source = merged
        src = script.segment(source) or "losses"
        return Hit(stmt, f"this merges the tensors of `{src}` (with a grad_fn) into `{text}`, "
                         f"which `{owner}(...)` at {script.at(call.lineno)} hands to "
                         f"{func.name}(), {kept_at} in `{kept}` across iterations: every "
                         f"step's autograd graph stays alive",
                   fix=f"merge numbers: `{{k: v.item() for k, v in {src}.items()}}`")
    shown, tensor, inside = _handed_parts(script, call, owner, arg, names)
    return Hit(call, f"`{shown}` hands tensors with a grad_fn to "
                     f"{func.name}(), {kept_at} in `{kept}` across iterations: every step's "
                     f"autograd graph stays alive",
               fix=f"hand numbers: `{{k: v.item() for k, v in {text}.items()}}`" if per_value
               and isinstance(arg, ast.Name) else
               f"pass {tensor}.item() (or {tensor}.detach()){inside}")


def _handed_parts(script: Script, call: ast.AST, owner: str, arg: ast.expr,
                  names: set[str]) -> tuple[str, str, str]:
    """(the call as shown, the tensor to cut, where it sits in the argument) for a finding
    at a call that hands a keeper tensors: ``pass (d_loss - g_loss).item() in {...}``."""
    text = script.segment(arg) or "loss"
    part = _graph_element(script, arg, names)
    shown = script.segment(call) or f"{owner}({text}, ...)"
    if len(shown) > 60:
        shown = f"{owner}(..., {text}, ...)" if len(text) <= 40 else f"{owner}(...)"
    tensor = script.segment(part) or "loss"
    if not isinstance(part, (ast.Name, ast.Attribute, ast.Subscript, ast.Call)):
        tensor = f"({tensor})"  # ((d_loss - g_loss).item())
    inside = f" in {text}" if part is not arg and hasattr(arg, "lineno") else ""
    return shown, tensor, inside


def _merged_into(script: Script, arg: ast.expr, call: ast.AST, names: set[str]
                 ) -> tuple[ast.stmt, ast.expr] | None:
    """``(statement, mapping)`` when ``arg`` names a dict its function builds without a
    graph (``logs = {"total": total.item()}``) and then merges a mapping of graph tensors into
    (``logs.update(losses)``) before ``call``: that merge is what the fix changes."""
    if not isinstance(arg, ast.Name):
        return None
    built = last_assignment(arg.id, call)
    if built is None or carries_graph(script, built, names):
        return None
    func = script.enclosing_function(call)
    merges = [n for n in walk_local(func or script.tree) if isinstance(n, ast.Expr) and
              isinstance(n.value, ast.Call) and isinstance(n.value.func, ast.Attribute) and
              n.value.func.attr == "update" and isinstance(n.value.func.value, ast.Name) and
              n.value.func.value.id == arg.id and len(n.value.args) == 1 and
              built.lineno < n.lineno < call.lineno and  # type: ignore[attr-defined]
              carries_graph(script, n.value.args[0], names)]
    return (merges[0], merges[0].value.args[0]) if len(merges) == 1 else None  # type: ignore


def _passed_on(target: Target, param: str) -> Iterator[tuple[Target, str, bool]]:
    """(method, attribute it keeps in, whether handed each value) for each method of an object
    held by ``target``'s own object that ``target`` hands ``param``, or each value of it, and
    that keeps what it is handed: a meter's ``for k, v in update_dict.items():
    self.meters[k].update(v, n)`` with ``SmoothedValue.update`` doing ``self.total += value *
    n`` (a framework-style meter that groups smoothed values, in this file or another of the
    project)."""
    func, where = target.func, target.script
    carried = {param}
    for loop in walk_local(func):
        if not isinstance(loop, ast.For):
            continue
        it, var = loop.iter, loop.target
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and \
                it.func.attr in ("items", "values") and not it.args:
            it, var = it.func.value, var.elts[-1] if it.func.attr == "items" and \
                isinstance(var, ast.Tuple) and len(var.elts) == 2 else var
        if isinstance(it, ast.Name) and it.id in carried and isinstance(var, ast.Name):
            carried.add(var.id)  # (for v in d: v is a key, no value: only items and values)
    for call in walk_local(func):
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)) or \
                not any(isinstance(a, ast.Name) and a.id in carried for a in call.args):
            continue
        for inner in where.targets(call) or _held_methods(where, func, call.func):
            params = [a.arg for a in inner.func.args.posonlyargs + inner.func.args.args]
            for p, a in bind_arguments(params[1:], call).items():
                kept = _kept_attr(inner.func, p) if isinstance(a, ast.Name) and \
                    a.id in carried and inner.func is not func else None
                if kept is not None:
                    yield inner, kept[0], a.id != param  # type: ignore[union-attr]


def _held_methods(where: Script, func: ast.AST, method: ast.Attribute) -> list[Target]:
    """The methods ``method`` may run when its receiver is an object its class holds,
    whole or as a value of a container (``self.meters[k].update`` with ``self.meters =
    defaultdict(SmoothedValue)``): the method of each project class the attribute's
    assignments in the class name."""
    recv = method.value
    while isinstance(recv, ast.Subscript):
        recv = recv.value
    attr = dotted(recv) or ""
    cls = where.enclosing_class(func)
    if cls is None or not attr.startswith("self.") or attr.count(".") != 1:
        return []
    found: list[Target] = []
    for st in ast.walk(cls):  # (``self.meters = defaultdict(Smoothed)``, or a value stored
        # into it: ``self.meters[k] = Smoothed()``)
        if isinstance(st, ast.Assign) and any(dotted(t.value if isinstance(t, ast.Subscript)
                                                     else t) == attr for t in st.targets):
            for n in ast.walk(st.value):
                ref = where.graph.class_named(n.id) if isinstance(n, ast.Name) else None
                inner = where.graph.method(ref, method.attr) if ref is not None else None
                if inner is not None and inner not in found:
                    found.append(inner)
    return found


def _helper_meter_update(script: Script, loop: ast.AST, func: ast.AST, node: ast.AST,
                         names: set[str]) -> Hit | None:
    """:func:`_meter_update` in a function the training loop calls (``update_meter(meter,
    losses)``), on a meter that outlives the loop: the loop hands it in (:func:`_handed_across`)
    or the object holds it (``self.meter``)."""
    if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and
            isinstance(node.value.func, ast.Attribute)):
        return None
    recv = dotted(node.value.func.value) or ""
    if not recv.startswith("self.") and not _handed_across(script, loop, func, recv, node):
        return None
    return _meter_update(script, node, names)


def _method_calls(script: Script, node: ast.AST
                  ) -> Iterator[tuple[Target, ast.AST, str, dict[str, ast.expr]]]:
    """The functions statement ``node`` runs with what it hands them: a call (``meter.update(
    loss, n)``), or a store into a subscript of an object of the project whose class defines
    ``__setitem__`` (``stats["loss"] = loss`` runs ``__setitem__(self, "loss", loss)``)."""
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        for target in script.targets(node.value):
            params = [a.arg for a in target.func.args.posonlyargs + target.func.args.args]
            if target.bound and params:
                params = params[1:]
            owner = script.segment(node.value.func) or "update"
            bound = bind_arguments(params, node.value)
            extra = target.func.args.kwarg
            spread = [k for k in node.value.keywords if k.arg is not None and k.arg not in
                      params and k.arg not in {a.arg for a in target.func.args.kwonlyargs}]
            if extra is not None and spread:  # log(d_loss=d_loss) into def log(self, **values)
                bound[extra.arg] = ast.Dict(keys=[ast.Constant(k.arg) for k in spread],
                                            values=[k.value for k in spread])
            yield target, node.value, owner, bound
    elif isinstance(node, ast.Assign) and len(node.targets) == 1 and \
            isinstance(node.targets[0], ast.Subscript):
        store = node.targets[0]
        for cls in script.graph.types(store.value):
            target = cls.script.graph.method(cls, "__setitem__")
            params = [a.arg for a in target.func.args.args] if target is not None else []
            if len(params) == 3:
                owner = f"{script.segment(store.value) or 'object'}.__setitem__"
                yield target, node, owner, {params[1]: store.slice, params[2]: node.value}


def _dispatched(script: Script, call: ast.Call) -> bool:
    """``call`` may run methods of several classes of the file (``cb.on_batch_end(...)`` over a
    list of callbacks): what one of them keeps is its own doing, not the caller's."""
    return len({id(t.func) for t in script.targets(call) if t.script is script}) > 1


def _graph_element(script: Script, arg: ast.AST, names: set[str]) -> ast.AST:
    """The element of a dict, list or tuple literal or a ``dict(...)`` call ``arg`` that carries
    a graph (the value to detach: ``loss`` of ``{"loss": loss}``); ``arg`` itself otherwise."""
    while True:
        if isinstance(arg, ast.Dict):
            parts = arg.values
        elif isinstance(arg, (ast.List, ast.Tuple)):
            parts = arg.elts
        elif isinstance(arg, ast.Call) and isinstance(arg.func, ast.Name) and \
                arg.func.id == "dict" and script.callee(arg) is None:
            parts = [*arg.args, *(k.value for k in arg.keywords)]  # dict(step=i, loss=loss)
        else:
            return arg
        found = next((p for p in parts if p is not None and carries_graph(script, p, names)),
                     None)
        if found is None:
            return arg
        arg = found


def _kept_attr(func: ast.AST, param: str) -> tuple[str, ast.AST] | None:
    return next(_kept_attrs(func, param), None)


def _picks_graph(script: Script, keeper: ast.AST, name: str, arg: ast.expr,
                 names: set[str]) -> bool:
    """What ``keeper`` keeps of the argument ``arg`` can hold a graph. Handed a dict display
    or ``dict(...)`` call (``cb.on_batch_end({"prediction": pred, "target": y})``) and reading
    it only by constant keys (``outputs["target"]``), it keeps the values under those keys: a
    target batch has no graph even when the prediction beside it has (``dict_entry``: a key
    that a later ``**extra`` may replace is not known)."""
    if not (isinstance(arg, ast.Dict) or isinstance(arg, ast.Call) and dotted(arg.func) == "dict"):
        return True
    parents = {id(c): p for p in ast.walk(keeper) for c in ast.iter_child_nodes(p)}
    picked = []
    for read in (n for n in ast.walk(keeper) if isinstance(n, ast.Name) and n.id == name):
        sub = parents.get(id(read))
        entry = dict_entry(arg, sub.slice.value) \
            if isinstance(sub, ast.Subscript) and isinstance(sub.slice, ast.Constant) else None
        if entry is None or entry is _ABSENT:
            return True  # read whole, or by a key the build does not show
        picked.append(entry)
    return any(carries_graph(script, v, names) for v in picked)


def _kept_attrs(func: ast.AST, param: str) -> Iterator[tuple[str, ast.AST]]:
    for sub in ast.walk(func):
        value = None
        target = None
        if isinstance(sub, ast.AugAssign):
            value, target = sub.value, sub.target
        elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and \
                sub.func.attr == "append" and sub.args:
            value, target = sub.args[0], sub.func.value
        if value is None or not (dotted(target) or "").startswith("self."):
            continue
        if _mentions_uncut(value, param):
            yield (dotted(target) or "").replace(".[]", "[...]"), sub


def _picks_from(keeper: ast.AST, name: str) -> bool:
    """The kept value reads ``name`` only through subscripts or attributes (``out["loss"]``,
    ``outputs.loss``), not whole (``self.sum += val * n``)."""
    reads = [n for n in ast.walk(keeper) if isinstance(n, ast.Name) and n.id == name]
    parents = {id(c): p for p in ast.walk(keeper) for c in ast.iter_child_nodes(p)}
    return bool(reads) and all(isinstance(parents.get(id(r)), (ast.Subscript, ast.Attribute))
                               for r in reads)


def _mentions_uncut(node: ast.AST, name: str) -> bool:
    """``name`` is read in ``node`` other than through a cut: ``{"loss": out["loss"]}`` keeps
    it, ``{"loss": out["loss"].detach()}`` and ``out["loss"].item()`` do not."""
    if isinstance(node, ast.Attribute) and node.attr in CUTS or isinstance(node, ast.Call) and \
            isinstance(node.func, ast.Name) and node.func.id in ("float", "int", "round"):
        return False
    if isinstance(node, ast.Name):
        return node.id == name
    if isinstance(node, COMPREHENSIONS):
        return comprehension_holds(node, {name},
                                   lambda n, h: any(_mentions_uncut(n, x) for x in h))
    return any(_mentions_uncut(c, name) for c in ast.iter_child_nodes(node))


def _outlives(acc: str, loop: ast.AST) -> bool:
    """The accumulator is assigned before the loop and not re-created in every iteration: a
    reset under a test (``if step % log_every == 0: total = 0.0``) keeps the graphs of the
    iterations between resets."""
    for sub in walk_local(loop):
        if not isinstance(sub, ast.Assign):
            continue
        for t in sub.targets:  # acc = 0.0, or a, acc = 0.0, 0.0
            pairs = zip(t.elts, sub.value.elts) if isinstance(t, ast.Tuple) and \
                isinstance(sub.value, ast.Tuple) and len(t.elts) == len(sub.value.elts) \
                else [(t, sub.value)]
            for name, v in pairs:
                if isinstance(name, ast.Name) and name.id == acc and not (
                        isinstance(v, ast.BinOp) and isinstance(v.left, ast.Name) and
                        v.left.id == acc or _blend_of(v, acc) or _first_time(v, acc) or
                        _folds(v, acc)) and \
                        not ifs_between(sub, loop):
                    return False
    scope = scope_of(loop)
    return any(isinstance(sub, (ast.Assign, ast.AnnAssign)) and sub.lineno < loop.lineno
               and any(isinstance(n, ast.Name) and n.id == acc
                       for t in (sub.targets if isinstance(sub, ast.Assign) else [sub.target])
                       for n in ast.walk(t))
               for sub in walk_local(scope))


def _folds(value: ast.AST, acc: str) -> bool:
    """``{k: acc.get(k, 0.0) + v for k, v in parts.items()}``: a new container whose entries
    keep the old ones, not a fresh start."""
    return any(_fold_parts(c, acc) is not None for c in ast.walk(value))


def _first_time(value: ast.AST, acc: str) -> bool:
    """``terms if total is None else ...``: a value chosen by a test of the accumulator itself
    starts it on the first iteration only, as an ``if total is None:`` statement would."""
    return isinstance(value, ast.IfExp) and any(
        isinstance(n, ast.Name) and n.id == acc for n in ast.walk(value.test))


def _blend_of(value: ast.AST, acc: str) -> bool:
    """``0.98 * acc + 0.02 * x`` (or its ``IfExp``): a new value that keeps the old one
    uncut, not a fresh start."""
    branches = [value.body, value.orelse] if isinstance(value, ast.IfExp) else [value]
    return any(not _is_cut(t) and any(isinstance(n, ast.Name) and n.id == acc
                                      for n in ast.walk(t))
               for b in branches for t in _sum_terms(b) if len(_sum_terms(b)) > 1)


def _reaches_backward(acc: str, scope: ast.AST) -> bool:
    """A backward anywhere in the scope reads the accumulator, directly or through one name
    (``loss = torch.stack(log_probs).sum(); loss.backward()`` after the loop)."""
    names = {acc}
    for sub in walk_local(scope):
        if isinstance(sub, ast.Assign) and any(isinstance(n, ast.Name) and n.id == acc
                                               for n in ast.walk(sub.value)):
            names.update(t.id for t in sub.targets if isinstance(t, ast.Name))
    for call in walk_local(scope):
        if is_backward(call):
            if any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(call)):
                return True
    return False


def _is_scalar_loss(script: Script, value: ast.expr, names: set[str]) -> bool:
    """A loss (a backward target or a loss call's result), so ``.item()`` applies."""
    if is_loss_call(script, value):
        return True
    if isinstance(value, ast.Name):
        if any(is_backward(c) and isinstance(c.func.value, ast.Name)  # type: ignore
               and c.func.value.id == value.id for c in script.calls):
            return True
        assigned = last_assignment(value.id, value)
        return assigned is not None and is_loss_call(script, assigned)
    if isinstance(value, ast.BinOp):
        return _is_scalar_loss(script, value.left, names) or \
            _is_scalar_loss(script, value.right, names)
    return False


def _hit(script: Script, node: ast.AST, acc: str, value: ast.expr, verb: str,
         scalar: bool, names: set[str]) -> Hit:
    text = script.segment(value) or "loss"
    # in a dict, list or tuple literal, the tensor inside it is what to detach
    part = _graph_element(script, value, names)
    held = script.segment(part) or "loss"
    simple = isinstance(part, (ast.Name, ast.Attribute, ast.Call, ast.Subscript))
    scope = scope_of(node)
    skip = {id(n) for n in ast.walk(node)}
    safe = part is value and scalar and numeric_only(script, acc, scope, skip)
    method = ".item()" if safe else ".detach()"
    new = f"{held}{method}" if simple else f"({held}){method}"
    edit = Edit(part.lineno, part.col_offset, part.end_lineno or part.lineno,
                part.end_col_offset or part.col_offset, new)
    if verb in ("append", "add_"):  # a method call on the holder
        holder = getattr(getattr(node, "value", None), "func", None)
        what = f"{script.segment(holder.value) or acc}.{verb}({text})" \
            if isinstance(holder, ast.Attribute) else f"{acc}.{verb}({text})"
    elif isinstance(node, ast.AugAssign):
        what = f"{script.segment(node.target) or acc} += {text}"
    elif isinstance(node, ast.Assign):
        what = f"{script.segment(node.targets[0]) or acc} = ... + {text}"
    else:
        what = f"{acc} += {text}"
    message = (f"`{what}` keeps the autograd graph of every iteration alive through `{acc}`, "
               f"which outlives the loop and never reaches backward")
    if part is not value:
        return Hit(node, message, fix=f"store {new} (or .item()) in {text}", edits=[edit])
    if isinstance(value, (ast.Dict, ast.List, ast.Tuple, ast.Set, ast.ListComp, ast.SetComp,
                          ast.DictComp, ast.GeneratorExp)):
        # (no element found to name: a container has no .detach())
        return Hit(node, message, fix="call .detach() (or .item()) on each tensor it holds")
    return Hit(node, message, fix=f"accumulate {new} instead", edits=[edit], safe=safe)


def _cache_hit(c) -> Hit:  # type: ignore[no-untyped-def]
    return Hit(c.store, f"{c.cls.name} caches {c.cache}, computed with grad from self.{c.source}, "
                        f"and later forwards reuse it: it keeps the graph of the forward that "
                        f"built it alive across steps, so the next backward through it fails "
                        f"with 'Trying to backward through the graph a second time' (or, with "
                        f"retain_graph=True, keeps that graph alive)",
               fix=f"recompute it on every call while {c.source} learns, cache it only under "
                   f"torch.no_grad() or when it needs no gradient, or detach it")
