"""TG206 data-attribute: a write through ``.data`` where autograd needed to see it.

``.data`` gives a tensor that autograd does not track: an in-place change through it is
invisible to the version counter (https://pytorch.org/docs/stable/notes/autograd.html; the 0.4
migration guide asks for ``.detach()`` and ``torch.no_grad()`` instead). That is harmless when no
graph holds the tensor and wrong when one does. So it fires on the writes that meet a graph:

- inside a module's ``forward`` (or a function it calls, two calls deep), outside ``torch.no_grad()``: the
  forward runs while the graph is recorded, so the write happens behind the graph's back every
  step (``self.fc.weight.data = self.fc.weight * mask``);
- in a training iteration between the forward and the backward (a saved tensor changes before
  backward reads it), or in a function the iteration calls there (a callback's hook);
- the same write between forward and backward on a tensor the graph recorded that is no
  parameter (``delta = generator(z); delta.data = delta.data * scale``; also in a helper on
  the tensor a call hands it: ``rescale(torch.tanh(self.net(z)))``) or on a learnable
  tensor (``nn.Parameter``, ``requires_grad=True``) once a forward used it: backward treats
  the rescale as if it never happened;
- a write into a name bound to such a tensor's ``.data`` (``target_f = q_pred.data`` then
  ``target_f[range(n), actions] = targets`` before backward: a DQN target that is the
  prediction itself, google-deepmind/dqn#8);
- in ``forward``, a write on what a submodule returned (``probs.data.clamp_(eps, 1 - eps)``
  after ``probs = torch.sigmoid(self.deep(z))``): its backward reads the changed values;
- the same write on a new tensor that ``forward`` computes from a parameter of the module
  (``temp = self.log_temp.exp()``), or that a function forward calls computes from the
  parameter it is handed (``weights = torch.softmax(logits, 0)``); a view of the parameter
  itself is a projection and stays silent;
- an update written with a gradient that ``torch.autograd.grad(..., create_graph=True)`` made
  in the same function or at a flat script's top level (``w.data -= lr * g`` in a MAML inner
  loop, over a dict built from
  ``named_parameters()``): the update was meant to stay in the graph (Truxify#13118);
- ``p.data = q.data`` (or ``= q``) with ``q`` a parameter of another module, outside
  initialization: ``p`` then shares ``q``'s storage, so an optimizer step on one model writes
  into the other (a copy, ``p.data.copy_(q.data)``, is silent).

It also fires on a read of a parameter's ``.data`` in a module's ``forward`` when the forward
never uses the parameter itself (``F.linear(x, self.fc.weight.data)``): the parameter then never
gets a gradient (d2l-ai/d2l-en#2600); and on a term of a backpropagated loss computed from a
parameter's ``.data`` (an L1 penalty on ``layer.weight.data``) beside a term that reaches the
model: the term adds no gradient (bioFAM/scDORI#19; :func:`trainguard.lint.cut_trace.data_terms`).

Silent: other reads (``loss.data``, ``p.data.norm()``; in ``forward``: metadata such as
``.data.shape``, and a straight-through estimator that uses the parameter too), parameter (re)initialization before training
(``p.data.normal_()``, ``w = p.data; w.zero_()``, in ``__init__``, ``init*``/``reset*``
functions), updates after backward (manual SGD ``p.data.add_(p.grad, alpha=-lr)``, weight
clipping, EMA, a renormalisation after the step even when another loss's forward and backward
follow in the same iteration), a clamp of the weight onto a box in ``forward`` (BinaryConnect),
``.data`` of things that are not tensors (``dataset.data``), and anything under
``torch.no_grad()``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from trainguard.lint.astutil import dotted, is_true, kwarg, parent, walk_local
from trainguard.lint.callgraph import bind_arguments
from trainguard.lint.cuts import submodules_with_parameters
from trainguard.lint.dataflow import _is_cut, carries_graph, last_assignment
from trainguard.lint.regions import forward_calls, training_loops
from trainguard.lint.rules import Hit
from trainguard.lint.script import Script, is_backward

CODE = "TG206"
_INIT_FUNC = re.compile(r"init|reset", re.I)
_TENSOR_ATTRS = {"weight", "bias"}
_PARAM_ITER = re.compile(r"\.(named_)?parameters\(|\[['\"]params['\"]\]")
_INPLACE = re.compile(r"^(?!_)\w+_$")


def check(script: Script) -> Iterator[Hit]:
    if ".data" not in script.source:
        return
    yield from _forward_reads(script)
    yield from _local_reads(script)
    yield from _restored_by_context(script)
    yield from _loss_terms(script)
    params = _parameter_names(script)
    for node in script.nodes:
        if not (isinstance(node, ast.Attribute) and node.attr == "data") or not _is_write(node):
            continue
        recv = node.value
        output = False
        if not _tensorish(recv, params):
            output = _graph_tensor(script, node) or (
                "grad input" if _differentiated_input(script, node) else None)
            if not output:
                continue
        if script.grad_disabled(node):
            continue
        func = script.enclosing_function(node)
        text = script.segment(recv) or "x"
        alias = _aliased_parameter(script, node, params)
        if alias is not None and (func is None or not _INIT_FUNC.search(func.name)):
            yield Hit(node, f"`{text}.data = {alias}` makes {text} share {alias}'s storage: "
                            f"an optimizer step on one model writes into the other's "
                            f"parameters, behind autograd's back",
                      fix=f"copy the values instead: `with torch.no_grad(): "
                          f"{text}.copy_({alias.removesuffix('.data')})`, or load_state_dict()")
            continue
        if func is not None and _INIT_FUNC.search(func.name):
            continue
        if output == "grad input":  # (only the MAML inner step: an input of that gradient)
            where = _second_order(script, node, func)
        else:
            where = (None if output == "parameter" else
                     _in_forward(script, node, projection=output != "output")) or \
                _before_backward(script, node) or _called_before_backward(script, func) or \
                _second_order(script, node, func)
        if where is None:
            continue
        up = parent(node)
        if output == "output" and isinstance(up, ast.Assign) and up.value is node and \
                isinstance(up.targets[0], ast.Name):  # an alias written into later
            alias_name = up.targets[0].id
            yield Hit(node, f"`{alias_name} = {text}.data` shares {text}'s storage, and "
                            f"{alias_name} is written in place {where}: {text} changes behind "
                            f"autograd's back (the loss compares the prediction with itself)",
                      fix=f"make a copy: `{alias_name} = {text}.detach().clone()`")
            continue
        if output == "output":
            op = up.attr if isinstance(up, ast.Attribute) and _INPLACE.match(up.attr) else None
            yield Hit(node, f"`{text}.data` is written {where}, but {text} is an output the "
                            f"graph recorded: autograd does not see the change, so backward "
                            f"treats it as if it never happened and the model learns for values "
                            f"it did not produce",
                      fix=f"compute it as part of the graph: `{text} = {text}.{op[:-1]}(...)` "
                          f"(out of place, no .data)" if op else
                      f"rescale as part of the graph: `{text} = {text} * scale` (no .data)")
            continue
        if where.startswith("with a gradient taken with create_graph=True"):
            fix = ("make the adapted weights new tensors in the graph (`fast = [p - lr * g for "
                   "p, g in zip(fast, grads)]`, no .data) and run the next forward with them")
        else:
            fix = ("compute the masked or updated value as part of the graph (e.g. "
                   "F.linear(x, w * mask)), or change it under `with torch.no_grad():` "
                   "outside the forward")
        yield Hit(node, f"`{text}.data` is written {where}: autograd does not see the change, "
                        f"so the graph and the gradients use values the parameter no longer "
                        f"has", fix=fix)


def _is_write(node: ast.Attribute) -> bool:
    p = parent(node)
    if isinstance(node.ctx, ast.Store):
        return True
    if isinstance(p, ast.Attribute) and _INPLACE.match(p.attr) and \
            isinstance(parent(p), ast.Call) and parent(p).func is p:  # type: ignore[union-attr]
        return True
    while isinstance(p, ast.Subscript) and p.value is node and isinstance(p.ctx, ast.Load) and \
            isinstance(parent(p), ast.Subscript):  # x.data[i][a:b] = ...: the outer store
        node, p = p, parent(p)
    if isinstance(p, ast.Subscript) and isinstance(p.ctx, ast.Store) and p.value is node:
        return True
    if isinstance(p, ast.AugAssign) and p.target is node:
        return True
    if isinstance(p, ast.Assign) and p.value is node and len(p.targets) == 1 and \
            isinstance(p.targets[0], ast.Name):
        return _written_through(p, p.targets[0].id)
    return False


def _written_through(assign: ast.Assign, name: str) -> bool:
    """``target_f = q_pred.data`` followed, before ``name`` is bound again, by a write into it
    (``target_f[range(n), actions] = targets``, ``target_f.clamp_(...)``): a write through
    ``.data`` (google-deepmind/dqn#8's DQN target made from the prediction itself)."""
    scope = parent(assign)
    while scope is not None and not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                       ast.Module)):
        scope = parent(scope)
    for n in sorted((n for n in walk_local(scope) if getattr(n, "lineno", 0) > assign.lineno),
                    key=lambda n: (n.lineno, n.col_offset)):  # type: ignore[union-attr]
        if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store):
            return False  # bound again first
        if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store) and \
                isinstance(n.value, ast.Name) and n.value.id == name:
            return True
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                isinstance(n.func.value, ast.Name) and n.func.value.id == name and \
                _INPLACE.match(n.func.attr):
            return True
    return False


def _restored_by_context(script: Script) -> Iterator[Hit]:
    """A ``@contextmanager`` that writes parameters through ``.data`` before its ``yield`` and
    writes the old values back after it (zennit's ``mod_params``, chr5tphr/zennit#61), used as
    ``with swap(layer): out = layer(x)`` in a function that then runs ``backward`` or
    ``torch.autograd.grad``: the restore lands between the forward and the backward, which then
    computes with the restored weights, not the ones the forward used."""
    for func in (f for fs in script.functions.values() for f in fs):
        if not any((script.qualname(d) or "").endswith("contextmanager")
                   for d in func.decorator_list):
            continue
        yields = [n.lineno for n in walk_local(func) if isinstance(n, (ast.Yield, ast.YieldFrom))]
        writes = [n for n in walk_local(func) if isinstance(n, ast.Attribute) and
                  n.attr == "data" and _is_write(n)]
        if not yields or not any(w.lineno < yields[0] for w in writes):
            continue  # (nothing written before the yield: no swap)
        restores = [w for w in writes if w.lineno > yields[0]]
        site = next((w for w in _with_sites(script, func) if forward_calls(script, w) or any(
            isinstance(n, ast.Call) for st in w.body for n in ast.walk(st))), None)
        if not restores or site is None or script.grad_disabled(site):
            continue
        outer = script.enclosing_function(site) or script.tree
        after = next((c for c in walk_local(outer) if isinstance(c, ast.Call) and
                      c.lineno > (site.end_lineno or site.lineno) and
                      (is_backward(c) or (script.call_qualname(c) or "").endswith(
                          "autograd.grad"))), None)
        if after is None:
            continue
        text = script.segment(restores[0].value) or "the parameter"
        yield Hit(restores[0],
                  f"`{text}.data` is written back after the `yield` of {func.name}(), which the "
                  f"`with` at {script.at(site.lineno)} wraps around a forward: the restore lands "
                  f"before the backward at {script.at(after.lineno)}, so the gradients are "
                  f"computed with the restored values, not the ones the forward used",
                  fix="swap the parameters out of place (setattr a new nn.Parameter, or compute "
                      "with the modified tensor directly, e.g. F.linear(x, w_mod, b_mod)), and "
                      "restore after the backward")


def _with_sites(script: Script, func: ast.AST) -> list[ast.With]:
    """The ``with`` statements whose item calls ``func``."""
    out = []
    for call in script.call_sites(func):  # type: ignore[arg-type]
        item = parent(call)
        if isinstance(item, ast.withitem) and isinstance(parent(item), ast.With):
            out.append(parent(item))  # type: ignore[arg-type]
    return out


def _tensorish(recv: ast.AST, params: dict[str, list[ast.AST]]) -> bool:
    if isinstance(recv, ast.Attribute):
        return recv.attr in _TENSOR_ATTRS
    return isinstance(recv, ast.Name) and _bound_as_parameter(recv, params)


def _graph_tensor(script: Script, node: ast.Attribute) -> str | None:
    """The receiver of ``x.data`` holds a tensor that a graph records: a model's output
    (``delta = generator(z)``, arithmetic on it), a parameter of the enclosing module
    (``self.w = nn.Parameter(...)``), or a tensor made with ``requires_grad=True``. Where the
    write happens decides whether it meets the graph (inside forward, or between the forward
    and the backward): a parameter only once a forward used it."""
    recv = node.value
    if isinstance(recv, ast.Attribute):
        cls = script.enclosing_class(node)
        return "parameter" if cls is not None and _own_parameter(cls, dotted(recv) or "") \
            else None
    if not isinstance(recv, ast.Name):
        return None
    value = last_assignment(recv.id, node)
    if value is None and _handed_output(script, node, recv):
        return "output"
    if value is None or script.grad_disabled(value):
        return None  # made under no_grad: no graph holds it
    if isinstance(value, ast.Call) and ((dotted(value.func) or "").endswith("Parameter") or
                                        is_true(kwarg(value, "requires_grad"))):
        return "parameter"
    return "output" if carries_graph(script, value, set()) or \
        _submodule_output(script, node, value) or _parameter_result(script, node, value) \
        else None


def _handed_output(script: Script, node: ast.AST, recv: ast.Name) -> bool:
    """``recv`` is a parameter of the function around ``node`` that a call, with grad enabled,
    hands a tensor the graph recorded: in a module's ``forward``, what a submodule returned
    (``return rescale(torch.tanh(self.net(z)))``); elsewhere a model's output (``out =
    model(x)`` then ``rescale(out)``). A parameter handed over, or a plain tensor, is none."""
    func = script.enclosing_function(node)
    if func is None:
        return False
    params = [a.arg for a in func.args.posonlyargs + func.args.args]
    if recv.id not in params:
        return False
    for site in script.call_sites(func)[:4]:
        if script.grad_disabled(site):
            continue
        names = params[1:] if params[:1] == ["self"] and \
            isinstance(site.func, ast.Attribute) else params
        arg = bind_arguments(names, site).get(recv.id)
        if arg is None:
            continue
        value = last_assignment(arg.id, site) if isinstance(arg, ast.Name) else arg
        if _submodule_output(script, site, arg) or \
                value is not None and carries_graph(script, value, set()):
            return True
    return False


# Methods whose result shares the storage of the tensor they are called on: a write through
# ``.data`` of ``self.w.view(-1)`` changes the parameter itself (a projection), not a result.
_VIEWS = {"view", "view_as", "reshape", "squeeze", "unsqueeze", "t", "transpose", "permute",
          "flatten", "expand", "expand_as", "narrow", "select", "contiguous", "to", "float",
          "double", "cpu", "cuda", "requires_grad_"}


def _parameter_result(script: Script, node: ast.AST, value: ast.AST) -> bool:
    """``value`` is a new tensor that the graph computes from a learnable tensor of a module:
    in ``forward``, from ``self.w`` (an ``nn.Parameter`` or a submodule of the class); in a
    function that a ``forward`` calls, from an argument that the call hands such a tensor
    (``log_alpha = log_sigma2 - 2 * torch.log(theta.abs())`` with ``compute_log_alpha(
    self.log_sigma2, self.theta)``). The parameter itself, or a view of it, is no result: a
    write through its ``.data`` is a projection of the parameter."""
    func = script.enclosing_function(node)
    if func is None:
        return False
    cls = script.enclosing_class(node)
    seeds: set[str] = set()
    if func.name == "forward" and cls is not None:
        seeds = {f"self.{a}" for a in submodules_with_parameters(script, cls)}
    else:
        params = [a.arg for a in func.args.posonlyargs + func.args.args]
        for site in script.call_sites(func)[:4]:
            outer, owner = script.enclosing_function(site), script.enclosing_class(site)
            if outer is None or owner is None or outer.name != "forward" or \
                    script.grad_disabled(site):
                continue
            held = {f"self.{a}" for a in submodules_with_parameters(script, owner)}
            names = params[1:] if params[:1] == ["self"] and \
                isinstance(site.func, ast.Attribute) else params
            seeds |= {p for p, arg in bind_arguments(names, site).items()
                      if carries_graph(script, arg, held)}
    if not seeds or _alias_of(value, seeds):
        return False
    names = set(seeds)
    for st in sorted((n for n in walk_local(func) if isinstance(n, ast.Assign) and
                      n.lineno < node.lineno), key=lambda n: n.lineno):  # type: ignore
        if carries_graph(script, st.value, names) and not _alias_of(st.value, seeds):
            names |= {t.id for t in st.targets if isinstance(t, ast.Name)}
    return carries_graph(script, value, names)


def _alias_of(value: ast.AST, leaves: set[str]) -> bool:
    """``value`` is one of ``leaves`` (``self.w``, a parameter's name), an item or a view of
    one: it shares the leaf's storage."""
    while True:
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and \
                value.func.attr in _VIEWS:
            value = value.func.value
        elif isinstance(value, ast.Subscript):
            value = value.value
        else:
            return dotted(value) in leaves


def _submodule_output(script: Script, node: ast.AST, value: ast.AST) -> bool:
    """In a module's ``forward``: ``value`` is computed, uncut, from what a submodule with
    parameters returns (``probs = torch.sigmoid(self.deep(z)).squeeze(1)``), directly or
    through local names assigned above ``node``."""
    func = script.enclosing_function(node)
    cls = script.enclosing_class(node)
    if func is None or cls is None or func.name != "forward":
        return False
    subs = submodules_with_parameters(script, cls)
    if not subs:
        return False
    names: set[str] = set()

    def graph(expr: ast.AST) -> bool:
        return carries_graph(script, expr, names) or not _is_cut(expr) and any(
            isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and
            isinstance(c.func.value, ast.Name) and c.func.value.id == "self" and
            c.func.attr in subs for c in ast.walk(expr))

    for st in sorted((n for n in walk_local(func) if isinstance(n, ast.Assign) and
                      n.lineno < node.lineno), key=lambda n: n.lineno):  # type: ignore
        if graph(st.value):  # (``_, last = self.rnn(x)``: each name unpacked holds output)
            names |= {n.id for t in st.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return graph(value)


def _bound_as_parameter(name: ast.Name, params: dict[str, list[ast.AST]]) -> bool:
    """``name`` is read inside a loop (or comprehension) that binds it to a parameter: the
    same name elsewhere in the file may hold anything else (a ``state_dict()`` value, a plain
    tensor)."""
    loops = {id(loop) for loop in params.get(name.id, ())}
    n = name
    while (n := parent(n)) is not None:
        if id(n) in loops:
            return True
    return False


def _aliased_parameter(script: Script, node: ast.Attribute,
                       params: dict[str, list[ast.AST]]) -> str | None:
    """For ``p.data = q.data`` / ``p.data = q``: the parameter ``q`` whose storage ``p`` takes."""
    stmt = parent(node)
    if not (isinstance(stmt, ast.Assign) and node in stmt.targets):
        return None
    value = stmt.value
    inner = value.value if isinstance(value, ast.Attribute) and value.attr == "data" else value
    if isinstance(inner, ast.Name) and _bound_as_parameter(inner, params):
        return script.segment(value)
    if isinstance(inner, ast.Attribute) and inner.attr in _TENSOR_ATTRS:
        return script.segment(value)
    return None


def _in_forward(script: Script, node: ast.AST, *, projection: bool = True) -> str | None:
    """Where ``node`` runs inside a forward, or None. A weight clamped onto a box is a
    projection (``projection``); an output the graph saved is not: its backward (a sigmoid's
    reads its output) then runs on the clamped values."""
    func = script.enclosing_function(node)
    if func is None:
        return None
    if projection and _clamps_itself(script, node):
        return None
    if func.name == "forward" and script.enclosing_class(node) is not None:
        return "inside forward()"
    hook = _forward_hook_registration(script, func)
    if hook is not None:
        return f"in {func.name}(), a forward hook registered at {script.at(hook.lineno)} " \
               f"(it runs after the module's forward saved its tensors)"
    frontier = [func]
    for _ in range(2):  # forward -> helper -> helper
        nxt = []
        for f in frontier:
            for site in script.call_sites(f)[:4]:
                if script.grad_disabled(site):
                    continue
                outer = script.enclosing_function(site)
                if outer is None:
                    continue
                if outer.name == "forward" and script.enclosing_class(site) is not None:
                    return f"in {func.name}(), which forward() calls ({script.at(site.lineno)})"
                nxt.append(outer)
        frontier = nxt
    return None


def _forward_hook_registration(script: Script, func: ast.AST) -> ast.Call | None:
    """The ``register_forward_hook(func)`` call that makes ``func`` run when a module's forward
    has computed its output: the graph already saved the tensors a write there changes. (A
    pre-hook runs before the module uses its weights, like a write at the top of forward.)"""
    name = func.name  # type: ignore[attr-defined]
    if "register_forward_hook" not in script.source:
        return None
    for call in script.calls:
        f = call.func
        if isinstance(f, ast.Attribute) and f.attr == "register_forward_hook" and call.args:
            hook = call.args[0]
            hook_name = hook.id if isinstance(hook, ast.Name) else hook.attr \
                if isinstance(hook, ast.Attribute) else None
            if hook_name == name:
                return call
    return None


def _clamps_itself(script: Script, node: ast.Attribute) -> bool:
    """``w.data = w.data.clamp(lo, hi)`` or ``w.data.clamp_(lo, hi)``: a projection onto a box
    (BinaryConnect keeps its latent weights in [-1, 1] this way, Courbariaux et al. 2015). It
    leaves every value already in range, and so the optimizer's updates, as they were; a mask or
    a quantizer written back the same way replaces them every step and stays reported."""
    target = script.segment(node.value)
    p = parent(node)
    if isinstance(p, ast.Attribute) and p.attr in ("clamp_", "clip_"):
        return True
    stmt = parent(node)
    if not (isinstance(stmt, ast.Assign) and node in stmt.targets):
        return False
    value = stmt.value
    call = value if isinstance(value, ast.Call) else None
    if call is None:
        return False
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr in ("clamp", "clip", "clamp_", "clip_"):
        src = script.segment(func.value) or ""
        return src.removesuffix(".data") == target
    if dotted(func) in ("torch.clamp", "torch.clip") and call.args:
        src = script.segment(call.args[0]) or ""
        return src.removesuffix(".data") == target
    return False


def _before_backward(script: Script, node: ast.AST) -> str | None:
    """Between a forward and the backward of the same iteration of a training loop, or of a
    function that runs both (a step function the loop calls: one call is one iteration)."""
    line = node.lineno  # type: ignore[attr-defined]
    func = script.enclosing_function(node)
    step_function = func is not None and not any(
        isinstance(n, (ast.For, ast.AsyncFor, ast.While)) and script.has_backward(n)
        for n in walk_local(func))  # its own body is the iteration, not a loop in it
    for loop in [*training_loops(script), *([func] if step_function else [])]:
        if not any(n is node for n in walk_local(loop)):
            continue
        backwards = [c.lineno for c in walk_local(loop) if is_backward(c)]
        forwards = [c.lineno for c in forward_calls(script, loop)] + \
            _loss_reads(loop, node, backwards)
        before = [f for f in forwards if f < line]
        if not before or not any(b > line for b in backwards):
            continue
        if any(max(before) < b < line for b in backwards):
            continue  # the last forward's graph was already used: a write after its update
        b = min(b for b in backwards if b > line)
        return f"after the forward and before backward() at {script.at(b)}"
    return None


def _loss_reads(loop: ast.AST, node: ast.AST, backwards: list[int]) -> list[int]:
    """Lines before ``node`` (``theta.data.clamp_(...)``) that compute, from the tensor it writes
    through (a learnable tensor used without a model: ``c, k, a, w = theta``), values the loss of
    a later backward is made from: that use is the forward whose graph saved the tensor."""
    if not isinstance(node, ast.Attribute):
        return []  # (a call site of a helper that writes)
    recv = node.value
    later = [b for b in backwards if b > node.lineno]
    if not isinstance(recv, ast.Name) or not later:
        return []
    backward = min(later)  # the line of the backward the write comes before
    calls = [c for c in walk_local(loop) if is_backward(c) and c.lineno == backward]
    needed = {n.id for c in calls for a in [c.func.value, *c.args]  # type: ignore[attr-defined]
              for n in ast.walk(a) if isinstance(n, ast.Name)}
    assigns = sorted((a for a in walk_local(loop) if isinstance(a, ast.Assign)
                      and a.lineno < backward), key=lambda a: -a.lineno)
    found = []
    for a in assigns:  # backwards through the iteration: what the loss is made from
        targets = {n.id for t in a.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        if not targets & needed:
            continue
        reads = {n.id for n in ast.walk(a.value) if isinstance(n, ast.Name)}
        needed |= reads
        if recv.id in reads and a.lineno < node.lineno:  # type: ignore[attr-defined]
            found.append(a.lineno)
    return found


def _called_before_backward(script: Script, func: ast.AST | None) -> str | None:
    """``func`` (a callback's hook, a helper) is called in a training iteration between the
    forward and the backward (directly or through one more function)."""
    if func is None:
        return None
    frontier = [func]
    for _ in range(2):
        nxt = []
        for f in frontier:
            for site in script.call_sites(f)[:6]:  # type: ignore[arg-type]
                if script.grad_disabled(site):
                    continue
                where = _before_backward(script, site)
                if where is not None:
                    name = func.name  # type: ignore[attr-defined]
                    return f"in {name}(), called at {script.at(site.lineno)} {where}"
                outer = script.enclosing_function(site)
                if outer is not None:
                    nxt.append(outer)
        frontier = nxt
    return None


def _second_order(script: Script, node: ast.Attribute, func: ast.AST | None) -> str | None:
    """The write's value uses a gradient that ``torch.autograd.grad(..., create_graph=True)``
    made in the same function, or at the top level of a flat script (``param.data -= lr * grad``
    in a MAML inner loop): the update was meant to stay in the graph, so the meta-gradient can
    flow through it."""
    if func is None:
        func = script.tree
    stmt = node
    while stmt is not None and not isinstance(stmt, ast.stmt):
        stmt = getattr(stmt, "_tg_parent", None)
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        value = stmt.value  # param.data.sub_(lr * grad)
    else:
        value = getattr(stmt, "value", None)
    if value is None:
        return None
    made: dict[str, int] = {}
    for n in walk_local(func):
        if isinstance(n, ast.Assign) and any(
                isinstance(c, ast.Call) and (script.call_qualname(c) or "").endswith(
                    "autograd.grad") and is_true(kwarg(c, "create_graph"))
                for c in ast.walk(n.value)):
            made.update({t.id: n.lineno for t in ast.walk(n.targets[0])
                         if isinstance(t, ast.Name)})
    made = {name: line for name, line in made.items()  # (a name the write still sees so)
            if any(isinstance(c, ast.Call) and is_true(kwarg(c, "create_graph"))
                   for c in ast.walk(last_assignment(name, node) or ast.Constant(None)))}
    for _ in range(2):  # for (name, p), g in zip(weights.items(), grads): g is one of them
        for n in walk_local(func):
            if isinstance(n, (ast.For, ast.comprehension)) and any(
                    isinstance(x, ast.Name) and x.id in made for x in ast.walk(n.iter)):
                line = next(made[x.id] for x in ast.walk(n.iter)
                            if isinstance(x, ast.Name) and x.id in made)
                made.update({t.id: line for t in ast.walk(n.target) if isinstance(t, ast.Name)})
    used = [made[x.id] for x in ast.walk(value) if isinstance(x, ast.Name) and x.id in made]
    if not used:
        return None
    return (f"with a gradient taken with create_graph=True ({script.at(used[0])}), meant to be "
            f"differentiated through this update (a MAML inner step)")


def _differentiated_input(script: Script, node: ast.Attribute) -> bool:
    """The receiver of ``p.data`` is a loop variable that ``zip`` pairs with the result of a
    ``torch.autograd.grad(loss, inputs, ...)`` call taken over ``inputs`` (``for p, g in
    zip(fast, grads)`` after ``grads = torch.autograd.grad(loss, fast, ...)``): ``p`` is one of
    the tensors that gradient was taken for, however ``fast`` was built (``[w, b]``, a list or a
    dict's values)."""
    recv = node.value
    if not isinstance(recv, ast.Name):
        return False
    scope = script.enclosing_function(node) or script.tree
    for n in walk_local(scope):
        if not isinstance(n, (ast.For, ast.comprehension)) or not isinstance(n.iter, ast.Call) \
                or dotted(n.iter.func) != "zip" or not isinstance(n.target, ast.Tuple) \
                or len(n.target.elts) != len(n.iter.args):
            continue
        pairs = list(zip(n.target.elts, n.iter.args))
        texts = {_inputs_text(script, a) for a in n.iter.args}
        grads = [a for _, a in pairs if isinstance(a, ast.Name) and
                 _gradient_inputs(script, last_assignment(a.id, n.iter)) in texts]
        if grads and any(isinstance(t, ast.Name) and t.id == recv.id and a not in grads
                         for t, a in pairs):
            return True
    return False


def _gradient_inputs(script: Script, value: ast.AST | None) -> str | None:
    """The source of the inputs of ``torch.autograd.grad(outputs, inputs, ...)`` when ``value``
    is that call; else None."""
    if isinstance(value, ast.Call) and len(value.args) >= 2 and \
            (script.call_qualname(value) or "").endswith("autograd.grad"):
        return _inputs_text(script, value.args[1])
    return None


def _inputs_text(script: Script, node: ast.AST) -> str:
    """The source of a gradient's inputs, unwrapped from ``list(...)`` and ``.values()``."""
    while True:
        if isinstance(node, ast.Call) and dotted(node.func) in ("list", "tuple") and node.args:
            node = node.args[0]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr == "values" and not node.args:
            node = node.func.value
        else:
            return script.segment(node) or ""


def _parameter_names(script: Script) -> dict[str, list[ast.AST]]:
    """Loop variables over ``X.parameters()``, ``X.named_parameters()`` or ``group['params']``
    (``zip(a.parameters(), b.parameters())`` binds two), each with the loops (or
    comprehensions) that bind it: a name is a parameter only inside them."""
    out: dict[str, list[ast.AST]] = {}
    for node in script.nodes:
        if not isinstance(node, (ast.For, ast.comprehension)):
            continue
        it = node.iter
        if isinstance(it, ast.Call) and dotted(it.func) == "zip":
            pairs = list(zip(node.target.elts, it.args)) \
                if isinstance(node.target, ast.Tuple) else []
        else:
            pairs = [(node.target, it)]
        for target, source in pairs:
            if not _PARAM_ITER.search(script.segment(source) or "") and \
                    not _parameter_dict(script, source) and not _parameter_list(script, source):
                continue
            if isinstance(target, ast.Tuple) and len(target.elts) == 2:
                target = target.elts[1]
            if isinstance(target, ast.Name):
                scope = parent(node) if isinstance(node, ast.comprehension) else node
                out.setdefault(target.id, []).append(scope)  # type: ignore[arg-type]
    return out


def _parameter_list(script: Script, source: ast.AST) -> bool:
    """A name assigned the parameters in the same function (``params =
    list(self.model.parameters())`` iterated as ``zip(params, grads)`` in a MAML inner loop)."""
    if not isinstance(source, ast.Name):
        return False
    value = last_assignment(source.id, source)
    return value is not None and bool(_PARAM_ITER.search(script.segment(value) or ""))


def _parameter_dict(script: Script, source: ast.AST) -> bool:
    """``weights.items()``/``.values()`` of a dict built from parameters in the same function
    (``weights = dict(self.model.named_parameters())``, a MAML inner loop's fast weights)."""
    return isinstance(source, ast.Call) and isinstance(source.func, ast.Attribute) and \
        source.func.attr in ("items", "values") and _parameter_list(script, source.func.value)


_METADATA = {"shape", "size", "dtype", "device", "numel", "dim", "ndim", "is_cuda", "new_zeros",
             "new_ones", "new_empty", "new_full", "new_tensor"}


def _loss_terms(script: Script) -> Iterator[Hit]:
    """A term of a backpropagated loss computed from a parameter's ``.data`` (an L1/L2 penalty
    on ``model.layer.weight.data``): autograd does not see through ``.data``, so the term
    changes the loss's value and adds nothing to the gradient: the penalty does not act
    (bioFAM/scDORI#19). Reported at the ``.data`` read."""
    from trainguard.lint.cut_trace import data_terms

    seen: set[int] = set()
    for call in script.calls:
        if not is_backward(call) or not script.may_reach("backward"):
            continue
        for term, read, where in data_terms(script, call):
            if id(read) in seen:
                continue
            seen.add(id(read))
            text = script.segment(term) or "this term"
            text = text if len(text) <= 50 else "this term"
            yield Hit(read, f"the term {text} of the loss that backward() runs on at "
                            f"{script.at(call.lineno)} is computed from .data: autograd does "
                            f"not see through it, so the term changes the loss's value and adds "
                            f"no gradient (the penalty does not act on the parameter)",
                      fix="use the parameter itself (layer.weight.abs().sum()), not its .data")


def _forward_reads(script: Script) -> Iterator[Hit]:
    """``torch.matmul(x, self.weight.data)`` in a module's ``forward``: the parameter reaches the
    output only through ``.data``, which autograd does not track, so it never gets a gradient
    and the optimizer never changes it. Silent when ``forward`` also uses the parameter itself
    (a straight-through estimator mixes both), for metadata (``.data.shape``), and under
    ``torch.no_grad()``."""
    for cls in script.classes.values():
        forward = next((b for b in cls.body if isinstance(b, ast.FunctionDef) and
                        b.name == "forward"), None)
        if forward is None:
            continue
        reads: dict[str, ast.Attribute] = {}
        plain: set[str] = set()
        for node in walk_local(forward):
            if not isinstance(node, ast.Attribute) or not isinstance(node.ctx, ast.Load):
                continue
            name = dotted(node) or ""
            if node.attr == "data" and name.startswith("self.") and \
                    _tensorish(node.value, {}) or node.attr == "data" and \
                    _own_parameter(cls, dotted(node.value) or ""):
                p = parent(node)
                if _is_write(node) or isinstance(p, ast.Attribute) and p.attr in _METADATA \
                        or script.grad_disabled(node):
                    continue
                reads.setdefault(dotted(node.value) or "", node)
            elif name.startswith("self.") and not (isinstance(parent(node), ast.Attribute) and
                                                   parent(node).attr in _METADATA | {"data"}):
                plain.add(name)  # self.w, self.w.t(): the parameter itself
        for owner, node in reads.items():
            if owner in plain:
                continue
            yield Hit(node, f"forward() reads `{owner}.data`: the output uses {owner}'s values "
                            f"outside autograd, so {owner} never gets a gradient and the "
                            f"optimizer never changes it",
                      fix=f"use {owner} itself (the .data read cuts it from the graph)")


def _local_reads(script: Script) -> Iterator[Hit]:
    """``mu + sigma.data * eps`` returned by ``forward`` or a method it calls on ``self``, with
    ``sigma`` computed there from the method's tensors (``sigma = torch.exp(log_sigma)``): the
    output takes sigma's values outside autograd, so no gradient of what the output feeds goes
    back through that term to what made sigma (ethanluoyc/pytorch-vae#5). Silent when the same
    expression also uses the tensor itself (a straight-through estimator), for metadata, under
    ``torch.no_grad()``, and for a value that does not reach a ``return``."""
    for cls in script.classes.values():
        methods = {b.name: b for b in cls.body if isinstance(b, ast.FunctionDef)}
        forward = methods.get("forward")
        if forward is None:
            continue
        called = {c.func.attr for c in walk_local(forward) if isinstance(c, ast.Call)
                  and isinstance(c.func, ast.Attribute) and isinstance(c.func.value, ast.Name)
                  and c.func.value.id == "self"}
        for name, func in methods.items():
            if name != "forward" and name not in called:
                continue
            for node in walk_local(func):
                hit = _local_data_term(script, func, node)
                if hit is not None:
                    yield hit


def _local_data_term(script: Script, func: ast.FunctionDef, node: ast.AST) -> Hit | None:
    if not (isinstance(node, ast.Attribute) and node.attr == "data" and
            isinstance(node.value, ast.Name) and isinstance(node.ctx, ast.Load)):
        return None
    p = parent(node)
    if not (isinstance(p, ast.BinOp) and isinstance(p.op, (ast.Add, ast.Sub, ast.Mult,
                                                           ast.Div))):
        return None
    name = node.value.id
    value = last_assignment(name, node)
    inputs = {a.arg for a in func.args.args[1:]}
    if value is None or _is_cut(value) or script.grad_disabled(node) or \
            not any(isinstance(n, ast.Name) and n.id in inputs for n in ast.walk(value)):
        return None
    stmt = p
    while parent(stmt) is not None and not isinstance(stmt, ast.stmt):
        stmt = parent(stmt)  # type: ignore[assignment]
    if any(isinstance(n, ast.Name) and n.id == name and n is not node.value
           for n in ast.walk(stmt)):
        return None  # the tensor itself is in the same statement: straight-through
    bound = {t.id for t in stmt.targets if isinstance(t, ast.Name)} \
        if isinstance(stmt, ast.Assign) else set()
    if not isinstance(stmt, ast.Return) and not any(
            isinstance(r, ast.Return) and r.value is not None and
            any(isinstance(n, ast.Name) and n.id in bound for n in ast.walk(r.value))
            for r in walk_local(func)):
        return None  # (the value reaches no ``return``: logged, kept aside)
    return Hit(node, f"{func.name}() builds its output from `{name}.data`: autograd does not "
                     f"see that read, so no gradient goes back through this term to what made "
                     f"{name} (its part of the output is a constant to the loss)",
               fix=f"use {name} itself (or {name}.detach() where a constant is meant)")


def _own_parameter(cls: ast.ClassDef, name: str) -> bool:
    """``self.w`` assigned ``nn.Parameter(...)`` in the class."""
    for node in ast.walk(cls):
        if isinstance(node, ast.Assign) and any(dotted(t) == name for t in node.targets) and \
                isinstance(node.value, ast.Call) and \
                (dotted(node.value.func) or "").endswith("Parameter"):
            return True
    return False

