"""The training events of a block of code, in the order they run.

``events(script, stmts)`` flattens statements (both branches of an ``if``, one pass through a loop
body, ``try`` bodies and handlers) and inlines calls to same-file functions, mapping their
parameters to the caller's arguments, so that ``validate(net, loader)`` contributes the
``model.eval()`` inside ``validate`` as ``net.eval()``; a string literal passed selects the
branch that tests it (``set_mode("eval", [net])``), and a loop over a literal list of models (or a
parameter bound to one) runs its body for each. Rules read this stream to see, e.g., a
``zero_grad`` between ``backward`` and ``step``. An optimizer held in a dict is keyed by its
entry (``optimizers["d"].step()``: ``optimizers[d]``).
"""

from __future__ import annotations

import ast
import builtins
import os
from dataclasses import dataclass
from typing import Literal

from trainguard.lint.astutil import SCOPES, children, dotted, kwarg, mode_switch, parent
from trainguard.lint.callgraph import RETURNS_SELF, ClassRef, Target
from trainguard.lint.consts import module_constants_trusted, truth
from trainguard.lint.factories import bound_mode
from trainguard.lint.held_calls import held_qualname
from trainguard.lint.script import Script, is_backward

__all__ = ["Event", "events", "Kind", "branch_taken", "builds_module", "dispatches"]

Kind = Literal["backward", "step", "zero", "sched", "train", "eval", "mode?", "unscale", "clip",
               "forward", "loop", "setgrad", "autograd"]


@dataclass(frozen=True, slots=True)
class Event:
    """One training event. ``key`` names the object (optimizer, model, scheduler) in the caller's
    terms; ``node`` is the call in the file; ``via`` is the call site that inlined it, if any."""

    kind: Kind
    key: str | None
    node: ast.AST
    via: ast.Call | None = None
    foreign: str | None = None  # the other project file that holds ``node`` (via ``via``)

    @property
    def site(self) -> ast.AST:
        """Where to report it in the linted file: the node, or the call that reached another
        file's code."""
        return self.via if self.foreign and self.via is not None else self.node

    @property
    def line(self) -> int:
        return self.site.lineno  # type: ignore[attr-defined]

    def place(self, script: Script) -> str:
        """``line 12`` (``cell 3, line 4`` in a notebook), or ``helpers.py line 12`` for code in
        another file."""
        line = self.node.lineno  # type: ignore[attr-defined]
        return f"{os.path.basename(self.foreign)} line {line}" if self.foreign else \
            script.at(line)


def _lr_step_signature(call: ast.Call) -> bool:
    """``step()``, ``step(epoch)`` or ``ReduceLROnPlateau.step(metrics)``: a learning-rate
    scheduler's step takes at most one argument and no keyword but ``epoch``/``metrics``
    (a pipeline schedule's ``step(inputs, target=..., losses=...)`` is something else)."""
    return len(call.args) <= 1 and all(k.arg in ("epoch", "metrics") for k in call.keywords)


def _renamed(script: Script, node: ast.AST, rename: dict[str, str]) -> str | None:
    """``node``'s key in the caller's names (``rename``: a callee's parameter -> the caller's
    key for its argument)."""
    k = script.key(node)
    if k is None:
        return None
    head, _, rest = k.partition(".")
    if head in rename:
        return f"{rename[head]}.{rest}" if rest else rename[head]
    return k


def _classify(script: Script, call: ast.Call, rename: dict[str, str]) -> Event | None:
    f = call.func

    def key(node: ast.AST) -> str | None:
        while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in RETURNS_SELF:  # model.to(device).train()
            node = node.func.value
        return _renamed(script, node, rename)

    if is_backward(call):
        return Event("backward", None, call)
    if (script.call_qualname(call) or "").endswith("autograd.grad"):
        return Event("autograd", None, call)  # a pass through the graph that sets no .grad
    if not isinstance(f, ast.Attribute):
        q = script.call_qualname(call) or ""
        if q.endswith(("clip_grad_norm_", "clip_grad_value_", "clip_grad_norm")) or \
                _held_clip(script, f):
            return Event("clip", None, call)
        return None
    recv = key(f.value)
    if recv is None and f.attr in ("step", "zero_grad"):
        recv = _held_entry(script, f.value, key)
        if recv is not None and f.attr == "step" and _lr_step_signature(call):
            return Event("step", recv, call)
    q = script.call_qualname(call) or ""
    if f.attr == "step":
        if recv in script.scalers or (recv or "").endswith("scaler"):
            arg = call.args[0] if call.args else None
            return Event("step", key(arg) if arg is not None else None, call)
        if script.is_scheduler(recv) and _lr_step_signature(call):
            return Event("sched", recv, call)
        held = _scheduler_entry(script, f.value)
        if held is not None and _lr_step_signature(call):
            return Event("sched", held, call)
        if script.is_optimizer(recv):
            return Event("step", recv, call)
        return None
    if f.attr == "zero_grad":
        return Event("zero", recv, call)
    if f.attr in ("zero_", "detach_") and (dotted(f.value) or "").endswith(".grad"):
        return Event("zero", "*", call)
    if f.attr == "unscale_":
        return Event("unscale", None, call)
    if (q.endswith(("clip_grad_norm_", "clip_grad_value_")) or f.attr == "clip_grad_norm_" or
            _held_clip(script, f)) and not _own_method(script, f, module=True):
        return Event("clip", None, call)  # (a project class's own clip: its body is inlined)
    if f.attr in ("train", "eval"):
        mode = mode_switch(call)
        if mode is None:
            return None  # not nn.Module.train(mode=True)/eval(): a trainer's own train(epochs=...)
        if _own_method(script, f):
            return None  # an object of a project class that is no module: its own train(batch)
        owner = rename.get("<self>")
        if recv == "self" and owner and script.is_model(owner):
            # a model's mode setter (``self.train(mode)`` in the ``set_training_mode(True)``
            # the caller ran on ``policy``) sets the mode the caller chose, on the caller's
            # model; a model's own method that switches itself (``self.eval()`` in the
            # ``generate()`` the caller ran on ``vocoder``) switches the caller's model
            chosen = _chosen_mode(call, rename) if mode == "?" else mode
            return Event(chosen or "mode?", owner, call)  # type: ignore[arg-type]
        if recv and (script.is_model(recv) or recv.endswith("()")):
            return Event("mode?" if mode == "?" else mode, recv, call)
        if recv and not script.is_optimizer(recv) and not script.is_scheduler(recv):
            # a module under another name (trainable_module.train(), m.eval()): the mode of the
            # model may have changed, so nothing is known about it any more
            return Event("mode?", recv, call)
    return None


def _chosen_mode(call: ast.Call, rename: dict[str, str]) -> str | None:
    """``train(mode)`` with ``mode`` a parameter the caller bound to a literal
    (``set_training_mode(True)`` running ``self.train(mode)``, as stable-baselines3's policies
    do: ``<bool:True>``): the mode that sets; None for anything else."""
    flag = call.args[0] if call.args else kwarg(call, "mode")
    bound = rename.get(flag.id, "") if isinstance(flag, ast.Name) else ""
    return {"<bool:True>": "train", "<bool:False>": "eval"}.get(bound)


def _own_method(script: Script, f: ast.Attribute, *, module: bool = False) -> bool:
    """``f`` (``learner.train``) is a method that a project class defines for itself, the
    receiver being an instance of it that is not an ``nn.Module`` (a learner whose
    ``train(feed)`` runs one step, ULTRA_pytorch#6): a call of that method, no mode switch.
    With ``module``, a module class's own method counts too (``acc.clip_grad_norm_(params,
    1.0, opt)`` of a mixed-precision wrapper that unscales before it clips: Accelerate's
    ``Accelerator.clip_grad_norm_``), so its body is read for what it does."""
    graph = script.graph
    types = graph.types(f.value)
    return bool(types) and all(graph.method(t, f.attr) is not None and
                               (module or not graph.is_module_class(t)) for t in types)


def _held_clip(script: Script, f: ast.expr) -> bool:
    """``self.grad_clip_fn(params)`` or ``clip(params)`` holding a gradient-clipping function
    (``functools.partial(clip_grad_norm_, max_norm=1.0)`` handed in): :mod:`held_calls`."""
    if "clip_grad" not in script.source or not (
            isinstance(f, ast.Name) and f.id not in script.functions and
            f.id not in script.classes or isinstance(f, ast.Attribute) and
            isinstance(f.value, ast.Name) and f.value.id == "self"):
        return False
    return (held_qualname(script, f) or "").endswith(("clip_grad_norm_", "clip_grad_value_"))


def _held_entry(script: Script, node: ast.AST, key) -> str | None:  # type: ignore[no-untyped-def]
    """``optimizers["generator"]`` (a dict of optimizers, ParallelWaveGAN style): the entry's
    key, ``optimizers[generator]``, when the container is an optimizer by its name or build."""
    if not (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and
            isinstance(node.slice.value, str)):
        return None
    base = key(node.value)
    if script.is_optimizer(base):
        return f"{base}[{node.slice.value}]"
    return _stored_optimizer(script, base, node.slice.value)


def _stored_optimizer(script: Script, base: str | None, name: str) -> str | None:
    """``ctx["optimizer"]`` read from a context dict the file fills (``ctx = {"model": model,
    "optimizer": optimizer}``, ``dict(optimizer=opt)`` or ``ctx["optimizer"] = optimizer``) and
    hands to its hooks: the key of the optimizer stored under ``name``, when every store of
    that entry the file shows puts the same optimizer there."""
    from trainguard.lint.dataflow import dict_entry

    if base is None:
        return None
    values = [dict_entry(v, name) for v in script.assignments.get(base, [])]
    values += [n.value for n in script.nodes if isinstance(n, ast.Assign) and any(
        isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Constant) and
        t.slice.value == name and script.key(t.value) == base for t in n.targets)]
    if None in values:
        return None  # built by a call, or spread from another dict: not known
    values = [v for v in values if not isinstance(v, ast.Constant)]  # ({} holds no entry)
    if not values:
        return None
    if all(isinstance(v, ast.Call) for v in values):  # state["opt"] = AdamW(...)
        return f"{base}[{name}]" if script.is_optimizer(name) else None
    keys = {script.key(v) for v in values}
    held = keys.pop() if len(keys) == 1 else None
    return held if script.is_optimizer(held) else None


def _scheduler_entry(script: Script, node: ast.AST) -> str | None:
    """``s`` in ``for s in self.schedulers: s.step()`` over a list of learning-rate schedulers
    (:attr:`Script.scheduler_lists`): the list's key."""
    if not isinstance(node, ast.Name):
        return None
    loop = parent(node)
    while loop is not None and not isinstance(loop, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                     ast.Lambda, ast.Module)):
        if isinstance(loop, (ast.For, ast.AsyncFor)) and isinstance(loop.target, ast.Name) \
                and loop.target.id == node.id:
            held = script.key(loop.iter)
            return held if held in script.scheduler_lists else None
        loop = parent(loop)
    return None


def _grad_assign(stmt: ast.stmt) -> Kind | None:
    """``p.grad = None`` (or zeros) zeroes gradients by hand: ``zero``; ``p.grad = g`` sets
    them (clipped, averaged, copied from another model): ``setgrad``."""
    if not (isinstance(stmt, ast.Assign) and any(
            isinstance(t, ast.Attribute) and t.attr == "grad" for t in stmt.targets)):
        return None
    v = stmt.value
    if isinstance(v, ast.Constant) and v.value is None:
        return "zero"
    if isinstance(v, ast.Call) and (dotted(v.func) or "").endswith(("zeros_like", "zeros")):
        return "zero"
    return "setgrad"


def builds_module(script: Script, call: ast.Call) -> bool:
    """``call`` constructs a module: a class of this file with a ``forward``, or a zoo model
    (``torchvision.models.*``, ``timm.create_model``)."""
    cls = script.classes.get(dotted(call.func) or "")
    if cls is not None and any(isinstance(b, ast.FunctionDef) and b.name == "forward"
                               for b in cls.body):
        return True
    return (script.call_qualname(call) or "").startswith(("torchvision.models.",
                                                          "timm.create_model"))


def _module_built(script: Script, stmt: ast.stmt, rename: dict[str, str]) -> str | None:
    """``self.vae = VAE(n)``: a model bound to a newly built module, which starts in train
    mode (``nn.Module.__init__`` sets ``training = True``) whatever mode the object it replaces
    was left in. The model's key in the caller's terms, or None."""
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and
            isinstance(stmt.value, ast.Call)):
        return None
    if not builds_module(script, stmt.value):
        return None
    k = script.key(stmt.targets[0])
    if k is None or not script.is_model(k):
        return None
    head, _, rest = k.partition(".")
    if head in rename:
        return f"{rename[head]}.{rest}" if rest else rename[head]
    return k


def _module_bound(script: Script, stmt: ast.stmt,
                  rename: dict[str, str]) -> tuple[Kind, str] | None:
    """``model = make().eval()``, ``encoder = Encoder.from_pretrained(path)``: a model bound to
    a module whose mode the call chain or the factory's returns say
    (:func:`~trainguard.lint.factories.bound_mode`): that mode and the model's key."""
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and
            isinstance(stmt.value, ast.Call)):
        return None
    k = script.key(stmt.targets[0])
    if k is None or not script.is_model(k):
        return None
    mode = bound_mode(script, stmt.value)
    if mode is None:
        return None
    head, _, rest = k.partition(".")
    if head in rename:
        k = f"{rename[head]}.{rest}" if rest else rename[head]
    return mode, k


def _calls_in_order(stmt: ast.AST) -> list[ast.Call]:
    calls = []
    stack = [stmt]
    while stack:
        n = stack.pop()
        for c in children(n):
            if isinstance(c, SCOPES) or isinstance(c, ast.stmt):
                continue
            if isinstance(c, ast.Call):
                calls.append(c)
            stack.append(c)
    calls.sort(key=lambda c: (c.end_lineno or 0, c.end_col_offset or 0))
    return calls


def events(script: Script, stmts: list[ast.stmt], *, rename: dict[str, str] | None = None,
           depth: int = 3, via: ast.Call | None = None,
           _stack: tuple[int, ...] = (), _src: Script | None = None) -> list[Event]:
    """The events of ``stmts`` in running order, with calls of functions of the same file or
    project inlined ``depth`` deep (every target of a call whose receiver may be of several
    classes, in turn). ``_src`` is the script that holds ``stmts`` when it is another file."""
    rename = rename or {}
    if not stmts:
        return []
    memo = script.__dict__.setdefault("_tg_events", {})
    key = (id(stmts[0]), len(stmts), tuple(sorted(rename.items())), depth, id(via), _stack)
    found = memo.get(key)
    if found is None:
        found = memo[key] = _events(script, _src or script, stmts, rename, depth, via, _stack)
    return found


def _events(root: Script, script: Script, stmts: list[ast.stmt], rename: dict[str, str],
            depth: int, via: ast.Call | None, _stack: tuple[int, ...]) -> list[Event]:
    out: list[Event] = []
    foreign = script.path if script is not root else None

    def sub(block: list[ast.stmt]) -> list[Event]:
        return events(root, block, rename=rename, depth=depth, via=via, _stack=_stack,
                      _src=script)

    for stmt in stmts:
        if isinstance(stmt, SCOPES):
            continue
        grad_kind = _grad_assign(stmt)
        if grad_kind is not None:
            out.append(Event(grad_kind, "*", stmt, via, foreign))
        built = _module_built(script, stmt, rename)
        if built is not None:
            out.append(Event("train", built, stmt, via, foreign))
        for call in _calls_in_order(stmt):
            ev = _classify(script, call, rename)
            if ev is not None and ev.kind in ("backward", "step") and depth > 0:
                own = _own_backward(root, script, call, rename, depth, via, _stack)
                if own is not None:  # balancer.backward(losses): a project method, read inside
                    out.extend(own)
                    if ev.kind == "step":  # an optimizer's step(losses) that backpropagates
                        out.append(Event(ev.kind, ev.key, ev.node, via or None, foreign))
                    continue
            if ev is not None:
                out.append(Event(ev.kind, ev.key, ev.node, via or None, foreign))
                continue
            if depth <= 0:
                continue
            dispatched = _dispatched(script, call, rename)
            for target in dispatched or script.targets(call) or _constructor(script, call) \
                    or _object_called(script, call):
                if target.instance or id(target.func) in _stack:
                    continue
                inner = _bind(script, target.func, call, rename,
                              method=bool(dispatched) or target.bound or None)
                out.extend(events(root, target.func.body, rename=inner, depth=depth - 1,
                                  via=via or call, _stack=_stack + (id(target.func),),
                                  _src=target.script))
        if built is None:  # model = make().eval(), Encoder.from_pretrained(path)
            bound = _module_bound(script, stmt, rename)
            if bound is not None:
                out.append(Event(bound[0], bound[1], stmt, via, foreign))
        if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
            out.append(Event("loop", None, stmt, via, foreign))
        taken = branch_taken(script, stmt) if isinstance(stmt, ast.If) else None
        if taken is None and isinstance(stmt, ast.If):  # `if mode == "eval":`, "eval" passed
            taken = _bound_branch(stmt.test, rename)
        group = _group(script, stmt.iter, rename) if isinstance(stmt, ast.For) and \
            isinstance(stmt.target, ast.Name) else None
        for field in ("body", "handlers", "orelse", "finalbody"):
            if taken is not None and field == ("orelse" if taken else "body"):
                continue  # `if DEBUG:` with DEBUG = False: that branch never runs
            block = getattr(stmt, field, None)
            if isinstance(block, list):
                if field == "body" and group:  # for m in (net, ema): m.eval() for each
                    for k in group:
                        out.extend(events(root, block, rename={**rename, stmt.target.id: k},
                                          depth=depth, via=via, _stack=_stack, _src=script))
                elif field == "handlers":
                    for h in block:
                        out.extend(sub(h.body))
                else:
                    out.extend(sub(block))
        if isinstance(stmt, ast.Match):
            for case in stmt.cases:
                out.extend(sub(case.body))
    return out


def _own_backward(root: Script, script: Script, call: ast.Call, rename: dict[str, str],
                  depth: int, via: ast.Call | None, _stack: tuple[int, ...]) -> list[Event] | None:
    """The events of a project method named ``backward`` or ``step`` that ``call`` runs (a
    gradient balancer's ``backward(losses)`` that sets ``p.grad`` by hand around each task's
    ``loss.backward()``; a multi-term optimizer's ``step(losses)`` that backpropagates each
    term), when it holds a backward of its own; None otherwise (``loss.backward()``,
    ``accelerator.backward(loss)``, ``optimizer.step()``: PyTorch's or a library's)."""
    if not isinstance(call.func, ast.Attribute) or not isinstance(call.func.value, ast.Name) \
            or call.func.value.id == "self":  # (a trainer's own self.backward(loss): its call)
        return None
    targets = [t for t in script.targets(call) if not t.instance and id(t.func) not in _stack]
    if len(targets) != 1:
        return None
    target = targets[0]
    inner = _bind(script, target.func, call, rename, method=target.bound or None)
    found = events(root, target.func.body, rename=inner, depth=depth - 1, via=via or call,
                   _stack=_stack + (id(target.func),), _src=target.script)
    return found if any(e.kind == "backward" for e in found) else None


def _bound_branch(test: ast.expr, rename: dict[str, str]) -> bool | None:
    """``if mode == "train":`` in a function called with a string literal for ``mode``
    (``set_mode("eval", models)``): whether that call takes the branch; None when the test
    reads anything else."""
    names = {n.id for n in ast.walk(test) if isinstance(n, ast.Name)}
    env: dict[str, ast.expr] = {}
    for name in names:
        bound = rename.get(name, "")
        if not bound.startswith("<str:"):
            return None
        env[name] = ast.Constant(value=bound[5:-1])
    return truth(test, env=env) if env else None


def _group(script: Script, it: ast.expr, rename: dict[str, str]) -> list[str] | None:
    """The models a ``for`` runs over: a literal list or tuple of them (``for m in (netG,
    netD):``), or a parameter bound to one at the call (``set_mode("eval", [net])``)."""
    if isinstance(it, ast.Name) and rename.get(it.id, "").startswith("<list:"):
        return rename[it.id][6:-1].split(",")
    keys = _listed(script, it, rename)
    return keys.split(",") if keys else None


def _listed(script: Script, node: ast.AST, rename: dict[str, str]) -> str | None:
    """``net,ema`` for a literal ``[net, ema]`` (up to four) whose every element is a model."""
    if not isinstance(node, (ast.List, ast.Tuple)) or not 0 < len(node.elts) <= 4:
        return None
    keys = [_renamed(script, e, rename) for e in node.elts]
    if any(k is None or k.startswith("<") or "," in k or not script.is_model(k) for k in keys):
        return None
    return ",".join(keys)  # type: ignore[arg-type]


def branch_taken(script: Script, stmt: ast.If) -> bool | None:
    """True when the file's constants make ``stmt``'s test always true, False when always
    false, None when they do not decide it."""
    memo = script.__dict__.setdefault("_tg_branch", {})
    if id(stmt) not in memo:
        trusted = script.__dict__.get("_tg_consts_trusted")
        if trusted is None:
            trusted = script.__dict__["_tg_consts_trusted"] = module_constants_trusted(
                script.tree, script.source)
        memo[id(stmt)] = truth(stmt.test) if trusted and _constant_test(script, stmt.test) \
            else None
    return memo[id(stmt)]


def _constant_test(script: Script, test: ast.AST) -> bool:
    """A test the constants may decide: literals, and names the file assigns exactly once
    (a cheap look-up before the evaluator reads the scopes)."""
    for n in ast.walk(test):
        if isinstance(n, ast.Name) and len(script.assignments.get(n.id, ())) != 1:
            return False
        if isinstance(n, (ast.Call, ast.Attribute, ast.Subscript)):
            return False
    return True


def dispatches(script: Script, call: ast.Call | None) -> bool:
    """``call`` hands control to callbacks (``cb(trainer)`` over a list of callable objects,
    ``getattr(cb, hook)(trainer)``): whatever a callback does there is its own."""
    return call is not None and bool(_dispatched(script, call, {}))


def _dispatched(script: Script, call: ast.Call, rename: dict[str, str]) -> list[Target]:
    """``getattr(cb, hook)(trainer)``: the methods a hook dispatch runs, when the hook's name is
    a string the caller passed (``self._fire("on_after_backward")``) or a literal. Each type
    ``cb`` may be (the callbacks a trainer was given; when that is not known, each class the
    file instantiates) contributes its method of that name."""
    f = call.func
    if isinstance(f, ast.Name) and f.id not in script.functions and \
            f.id not in script.classes and f.id not in script.aliases and f.id not in _BUILTINS:
        return _called_instance(script, call)
    if not (isinstance(f, ast.Call) and isinstance(f.func, ast.Name) and f.func.id == "getattr"
            and len(f.args) >= 2):
        return []
    hook = _text(f.args[1], rename)
    if not hook or not hook.isidentifier():
        return []
    graph = script.graph
    refs = graph.types(f.args[0])
    if not refs:  # handlers handed down through several calls: every class built here
        built = {dotted(c.func) for c in script.calls}
        refs = [ClassRef(script, cls) for name, cls in script.classes.items() if name in built]
    out = []
    for ref in refs:
        m = ref.script.graph.method(ref, hook)
        if m is not None and m not in out:
            out.append(m)
    return out[:6]


_BUILTINS = frozenset(dir(builtins))


def _called_instance(script: Script, call: ast.Call) -> list[Target]:
    """``cb(self, it, logs)`` over ``for cb in self.callbacks``: calling an object runs its
    class's ``__call__`` (each class of the project the name may hold that is no ``nn.Module``,
    whose call runs ``forward``), as a method of the object."""
    return [Target(t.script, t.func, bound=True)
            for t in script.graph.instance_targets(call)
            if getattr(t.func, "name", "") == "__call__"][:6]


def _object_called(script: Script, call: ast.Call) -> list[Target]:
    """An object's ``__call__`` run by calling it: one held on ``self``
    (``self.steprunner(x, y)``, a runner handed to ``__init__``) or one just built
    (``EpochRunner(step_runner)(loader)``), as in keras-style training wrappers."""
    f = call.func
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self" \
            or isinstance(f, ast.Call):
        return _called_instance(script, call)
    return []


def _text(node: ast.AST, rename: dict[str, str]) -> str | None:
    """The string ``node`` spells: a literal, a parameter bound to one, or an f-string or ``+``
    of those (``f"on_{event}"``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name) and rename.get(node.id, "").startswith("<str:"):
        return rename[node.id][5:-1]
    if isinstance(node, ast.FormattedValue) and node.conversion == -1 and \
            node.format_spec is None:
        return _text(node.value, rename)
    parts = node.values if isinstance(node, ast.JoinedStr) else \
        [node.left, node.right] if isinstance(node, ast.BinOp) and \
        isinstance(node.op, ast.Add) else None
    if parts is None:
        return None
    texts = [_text(p, rename) for p in parts]
    return "".join(texts) if all(t is not None for t in texts) else None  # type: ignore[arg-type]


def _constructor(script: Script, call: ast.Call) -> list[Target]:
    """The ``__init__`` an instantiation of a class of the file (not an ``nn.Module``: building
    one is a ``train`` event) runs: ``Predictor(ckpt)`` whose ``__init__`` builds its network and
    calls ``self.model.eval()``."""
    ref = script.graph.class_named(dotted(call.func)) if isinstance(call.func, ast.Name) else None
    if ref is None or ref.script is not script or script.graph.is_module_class(ref):
        return []
    init = script.graph.method(ref, "__init__")
    return [Target(script, init.func, bound=True)] if init is not None and \
        init.script is script else []


def _bind(script: Script, func: ast.FunctionDef | ast.AsyncFunctionDef, call: ast.Call,
          rename: dict[str, str], *, method: bool | None = None) -> dict[str, str]:
    """Parameter name -> the caller's key for the argument passed to it (``<str:text>`` for a
    string literal, which names a hook the callee may dispatch)."""
    params = [a.arg for a in func.args.posonlyargs + func.args.args]
    if method is None:
        method = isinstance(call.func, ast.Attribute)
    bound: dict[str, str] = {}
    if params and params[0] == "self" and method:
        params = params[1:]
        owner = _renamed(script, call.func.value, rename) \
            if isinstance(call.func, ast.Attribute) else None
        if owner:  # the receiver, for the method's switches of its own mode (not a name)
            bound["<self>"] = owner

    # An argument that is not a plain name (``task.get_eval_model()``) is an unknown object:
    # its parameter maps to a key no rule treats as the caller's model.
    def text(arg: ast.AST) -> str | None:
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and \
                arg.value.isidentifier():
            return f"<str:{arg.value}>"
        return None

    def flag(arg: ast.AST) -> str | None:  # set_training_mode(True): a literal switch
        return f"<bool:{arg.value}>" if isinstance(arg, ast.Constant) and \
            isinstance(arg.value, bool) else None

    def fresh(arg: ast.AST) -> str | None:  # train(GoNet()): a module built for the call
        return f"{dotted(arg.func)}()" if isinstance(arg, ast.Call) and \
            builds_module(script, arg) else None

    def group(arg: ast.AST) -> str | None:  # set_mode("eval", [net]): the models listed
        keys = _listed(script, arg, rename)
        return f"<list:{keys}>" if keys else None

    for name, arg in zip(params, call.args):
        bound[name] = _renamed(script, arg, rename) or text(arg) or flag(arg) or \
            fresh(arg) or group(arg) or f"<arg {name}>"
    for kw in call.keywords:
        if kw.arg:
            bound[kw.arg] = _renamed(script, kw.value, rename) or text(kw.value) or \
                flag(kw.value) or f"<arg {kw.arg}>"
    return bound
