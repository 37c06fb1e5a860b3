"""Gradient cuts inside a module's ``forward``: a submodule whose output reaches what
``forward`` returns only through a cut (``.detach()``, ``.data``, ``.item()``, a NumPy round
trip, ``torch.from_numpy``/``torch.tensor``, ``argmax``, an integer cast, or a Python number:
``float(w)``, ``math.exp(w)``) trains nothing,
whatever the loss is ("the result will never require gradient":
https://pytorch.org/docs/stable/generated/torch.Tensor.detach.html).

A flow through the local names of ``forward`` (every statement, whichever branch runs): what
is returned or yielded, stored on ``self``, or handed to a call whose effect is unknown reaches
the output; assignments, subscript stores and ``append``/``update`` into local containers carry
values along. A submodule counts as used uncut when any such path to the output has no cut, or
when ``forward`` hands the submodule itself to a call (``self.run_layer(x, self.block)``). An
``if`` whose test the file decides (``if cfg.log_weights:``) is read as taken or not taken:
``weights = weights.detach()`` under a true test replaces ``weights`` for what follows.
A read of ``self.<attr>`` that the class's forward hooks fill (:mod:`trainguard.lint.hooks`) is
the hooked module's output, through whatever cut the hook makes; ``a, b = self.sub(x)`` on a
module class of the file that returns a tuple gives each name its own part.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from trainguard.lint.astutil import (COMPREHENSIONS, assigned_pairs, dotted, encloses, is_false,
                                     is_true, parent, self_attr, statement_of, walk_local)
from trainguard.lint.callgraph import ClassRef, bind_arguments
from trainguard.lint.consts import UNKNOWN, resolve, truth
from trainguard.lint.hooks import HookStore, hook_stores
from trainguard.lint.packed import packs_sequences, recurrent_outputs, recurrent_submodules, \
    rnn_output
from trainguard.lint.script import NO_GRAD, Script

__all__ = ["ForwardCut", "forward_cuts", "InputCut", "input_cuts", "submodules_with_parameters",
           "no_grad_block", "parametric", "CUT_ATTRS", "NEW_LEAF", "metadata_read",
           "python_number"]

# Methods whose result carries no graph: detached copies, Python numbers, NumPy arrays, and
# integer results (argmax and integer casts cannot require grad).
CUT_ATTRS = {"detach", "data", "item", "numpy", "tolist", "argmax", "argmin", "long", "int",
             "bool", "short", "byte"}
NEW_LEAF = {"torch.tensor", "torch.Tensor", "torch.autograd.Variable", "torch.as_tensor",
            "torch.from_numpy", "torch.FloatTensor"}
# Of those, the ones that hand a tensor argument back with its history: ``as_tensor`` returns it
# (or ``.to(dtype)`` of it), ``torch.Tensor(t)``/``FloatTensor(t)`` an alias with a grad_fn;
# only ``torch.tensor(t)`` copies it into a new leaf
# (https://pytorch.org/docs/stable/generated/torch.as_tensor.html: "preserving autograd history").
_KEEP_HISTORY = {"torch.as_tensor", "torch.Tensor", "torch.FloatTensor", "torch.autograd.Variable"}
# torch.nn layers that hold parameters (a cut ReLU or pooling layer loses nothing).
_PARAMETRIC = ("Linear", "Bilinear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d",
               "ConvTranspose2d", "ConvTranspose3d", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d",
               "LayerNorm", "GroupNorm", "Embedding", "EmbeddingBag", "LSTM", "GRU", "RNN",
               "LSTMCell", "GRUCell", "RNNCell", "MultiheadAttention", "Transformer",
               "TransformerEncoder", "TransformerDecoder", "TransformerEncoderLayer",
               "TransformerDecoderLayer", "PReLU", "RMSNorm")
_CONTAINERS = ("Sequential", "ModuleList", "ModuleDict")
_STORE_METHODS = {"append", "extend", "insert", "update", "add", "setdefault", "appendleft"}


@dataclass(frozen=True, slots=True)
class ForwardCut:
    """Submodules ``attrs`` of class ``cls`` reach ``forward``'s output only through ``cut``."""

    cls: ast.ClassDef
    attrs: tuple[str, ...]  # the submodules cut there
    call: ast.Call  # a submodule's call in forward
    cut: ast.AST
    how: str


def forward_cuts(script: Script) -> list[ForwardCut]:
    out = []
    for cls in script.classes.values():
        methods = {b.name: b for b in cls.body if isinstance(b, ast.FunctionDef)}
        forward, init = methods.get("forward"), methods.get("__init__")
        if forward is None or init is None:
            continue
        if not _may_cut(script, forward, methods):
            continue
        subs = _parametric_submodules(script, init)
        if subs:
            out.extend(_cuts_in(script, cls, forward, subs, methods))
    return out


@dataclass(frozen=True, slots=True)
class InputCut:
    """``cls.forward`` returns its input ``name`` only through ``cut``, and an instance of
    ``cls`` follows another module with parameters in ``stack`` (an ``nn.Sequential`` call):
    those modules get no gradient through it."""

    cls: ast.ClassDef
    name: str
    cut: ast.AST
    how: str
    stack: ast.Call


def input_cuts(script: Script) -> list[InputCut]:
    """Module classes of the file stacked after another module with parameters (``nn.Sequential(
    Layer(64, 600), Layer(600, 600))``, or repeated blocks run one after another:
    :func:`_chained_blocks`) whose ``forward`` takes its input out of the graph on the way to
    the output (``np.take(x.detach().numpy(), idx)`` rebuilt with ``torch.from_numpy``,
    ligerlac/torchlogix#17; ``x = torch.tensor(x)``): the layers before it never learn."""
    out = []
    stacked = _stacked_after_parameters(script)
    for name, stack in _chained_blocks(script).items():
        stacked.setdefault(name, stack)
    for name, stack in stacked.items():
        cls = script.classes.get(name)
        methods = {b.name: b for b in cls.body if isinstance(b, ast.FunctionDef)} if cls else {}
        forward, init = methods.get("forward"), methods.get("__init__")
        if forward is None or init is None or len(forward.args.args) < 2 or \
                not _may_cut(script, forward, methods):
            continue
        flow = _Flow(script, _parametric_submodules(script, init))
        flow.methods = {k: v for k, v in methods.items() if k not in ("forward", "__init__")}
        flow.read(forward)
        _, _, params = flow.reach()
        name = forward.args.args[1].arg
        cut = params.get(name)
        if cut is not None and not script.grad_disabled(cut):
            out.append(InputCut(cls, name, cut, _describe(script, cut), stack))
    return out


def _stacked_after_parameters(script: Script) -> dict[str, ast.Call]:
    """Class name -> an ``nn.Sequential(...)`` call in which an instance of the file's class
    follows a module with parameters (another instance of a class of the file that has them,
    or a torch layer)."""
    found: dict[str, ast.Call] = {}
    if "Sequential" not in script.source:
        return found
    for call in script.calls:
        if len(call.args) < 2 or not (script.call_qualname(call) or "").endswith("Sequential"):
            continue
        for before, item in zip(call.args, call.args[1:]):
            name = dotted(item.func) if isinstance(item, ast.Call) else None
            if name in script.classes and name not in found and \
                    parametric(script, before, 2):
                found[name] = call
    return found


def _chained_blocks(script: Script) -> dict[str, ast.Call]:
    """Class name -> an ``nn.Sequential`` or ``nn.ModuleList`` call that holds several
    instances of a module class of the file with parameters (a comprehension, ``nn.ModuleList(
    Block(a, b) for a, b in zip(units, units[1:]))``, or a list of two or more) run one after
    another: a ``Sequential`` does so itself; a ``ModuleList`` where a method of the class that
    builds it feeds each block the previous block's output (``for block in self.blocks: x =
    block(x)``). Each block after the first follows one with parameters."""
    found: dict[str, ast.Call] = {}
    if "Sequential" not in script.source and "ModuleList" not in script.source:
        return found
    for call in script.calls:
        kind = (script.call_qualname(call) or "").rsplit(".", 1)[-1]
        if kind not in ("Sequential", "ModuleList") or len(call.args) != 1 or call.keywords:
            continue
        name = _repeated_class(script, call.args[0], starred=kind == "Sequential")
        if name is None or name in found or \
                not submodules_with_parameters(script, script.classes[name]):
            continue
        if kind == "Sequential" or _run_in_chain(script, call):
            found[name] = call
    return found


def _repeated_class(script: Script, arg: ast.AST, *, starred: bool) -> str | None:
    """The module class of the file that ``arg`` makes several instances of: a comprehension
    (starred for ``nn.Sequential(*[...])``) not over ``range(1)``, or a list of two or more."""
    if starred != isinstance(arg, ast.Starred):
        return None
    arg = arg.value if isinstance(arg, ast.Starred) else arg
    if isinstance(arg, COMPREHENSIONS[:3]):
        it = arg.generators[0].iter  # type: ignore[attr-defined]
        if isinstance(it, ast.Call) and dotted(it.func) == "range" and len(it.args) == 1:
            n = resolve(script, it.args[0])
            if isinstance(n, int) and n < 2:
                return None
        items = [arg.elt]  # type: ignore[attr-defined]
    elif isinstance(arg, (ast.List, ast.Tuple)) and len(arg.elts) >= 2:
        items = arg.elts
    else:
        return None
    names = {dotted(e.func) if isinstance(e, ast.Call) else None for e in items}
    name = names.pop() if len(names) == 1 else None
    return name if name in script.classes else None


def _run_in_chain(script: Script, call: ast.Call) -> bool:
    """``self.<attr> = call``, and a method of the same class runs the blocks in a chain:
    ``x = block(x)`` in ``for block in self.<attr>`` (or ``enumerate`` of it), or
    ``x = self.<attr>[i](x)`` in a loop."""
    stmt = parent(call)
    attr = self_attr(stmt.targets[0]) if isinstance(stmt, ast.Assign) and \
        len(stmt.targets) == 1 else None
    cls = script.enclosing_class(call)
    if attr is None or cls is None:
        return False
    for loop in (n for n in ast.walk(cls) if isinstance(n, (ast.For, ast.AsyncFor))):
        it, target = loop.iter, loop.target
        if isinstance(it, ast.Call) and dotted(it.func) == "enumerate" and it.args and \
                isinstance(target, ast.Tuple) and len(target.elts) == 2:
            it, target = it.args[0], target.elts[1]
        block = target.id if self_attr(it) == attr and isinstance(target, ast.Name) else None
        for node in ast.walk(loop):
            if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and
                    len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
                continue
            f = node.value.func
            if not (isinstance(f, ast.Name) and f.id == block or
                    isinstance(f, ast.Subscript) and self_attr(f.value) == attr):
                continue
            if any(isinstance(a, ast.Name) and a.id == node.targets[0].id
                   for a in node.value.args):
                return True
    return False


def _may_cut(script: Script, forward: ast.FunctionDef,
             methods: dict[str, ast.FunctionDef]) -> bool:
    """``forward`` (or a method of the class it calls, or the ``forward`` of a submodule class
    of the file it calls) holds a cut, or calls a function of the file that may: otherwise no
    flow needs reading."""
    todo, seen = [forward], set()
    while todo:
        f = todo.pop()
        if id(f) in seen:
            continue
        seen.add(id(f))
        if f is not forward and _no_grad_decorator(script, f) is not None:
            return True  # a called forward under @torch.no_grad()
        owner = script.enclosing_class(f)
        if owner is not None and hook_stores(owner):
            return True  # forward hooks store outputs: maybe detached
        for n in walk_local(f):
            if isinstance(n, ast.Attribute) and n.attr in CUT_ATTRS | {"indices", "argsort"} or \
                    isinstance(n, ast.Compare) or index_part(script, n):
                return True
            if isinstance(n, (ast.With, ast.AsyncWith)) and any(
                    _turns_grad_off(script, i.context_expr) for i in n.items):
                return True  # values computed under no_grad carry no graph
            if isinstance(n, ast.Call):
                q = script.call_qualname(n) or ""
                if q in NEW_LEAF or q.startswith("numpy.") or q in _INDEX_FUNCS or \
                        python_number(script, n) or index_result(script, n):
                    return True
                name = self_attr(n.func)
                if name in methods:
                    todo.append(methods[name])
                elif isinstance(n.func, ast.Name) and n.func.id in script.functions:
                    return True
                elif name is not None:  # a submodule of the file: self.quantizer(z)
                    todo.extend(_module_forward(script, n) or ())
    return False


def _parametric_submodules(script: Script, init: ast.FunctionDef) -> set[str]:
    subs = set()
    for node in walk_local(init):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            for t, v in assigned_pairs(node.targets, node.value):  # self.a, self.b = A(), B()
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and \
                        t.value.id == "self" and (parametric(script, v, 4, imported=True) or
                                                  _learnable_parameter(script, v)):
                    subs.add(t.attr)
    return subs


def submodules_with_parameters(script: Script, cls: ast.ClassDef) -> set[str]:
    """The ``self.x`` attributes ``cls.__init__`` builds as layers with parameters (a
    ``Linear``, a container of such layers, a module class of the file) or ``nn.Parameter``."""
    init = next((b for b in cls.body if isinstance(b, ast.FunctionDef) and
                 b.name == "__init__"), None)
    return set() if init is None else _parametric_submodules(script, init)


def _parameter_attrs(script: Script, init: ast.FunctionDef) -> set[str]:
    """The ``self.x = nn.Parameter(...)`` attributes ``__init__`` sets."""
    return {a for n in walk_local(init) if isinstance(n, ast.Assign) and
            _learnable_parameter(script, n.value)
            for a in map(self_attr, n.targets) if a}


def _learnable_parameter(script: Script, value: ast.AST) -> bool:
    """``nn.Parameter(...)`` that requires grad (a learned node embedding, a scale)."""
    if not isinstance(value, ast.Call) or \
            not (script.call_qualname(value) or "").endswith("Parameter"):
        return False
    flag = next((k.value for k in value.keywords if k.arg == "requires_grad"),
                value.args[1] if len(value.args) > 1 else None)
    return not (isinstance(flag, ast.Constant) and flag.value is False)


def parametric(script: Script, value: ast.AST, depth: int, *, imported: bool = False) -> bool:
    """``value`` builds a module with parameters: a torch layer that has them, a container of
    such layers, a module class of the file, and with ``imported`` one of another project file
    (:func:`_imported_parametric`)."""
    if not isinstance(value, ast.Call) or depth <= 0:
        return False
    q = script.call_qualname(value) or ""
    name = q.rsplit(".", 1)[-1]
    if q.startswith("torch.nn.") and name in _PARAMETRIC:
        return True
    if q.startswith("torch.nn.") and name in _CONTAINERS:
        parts = list(value.args) + [k.value for k in value.keywords]
        items = [e for p in parts for e in (
            p.elts if isinstance(p, (ast.List, ast.Tuple)) else
            [p.value.elt] if isinstance(p, ast.Starred) and isinstance(
                p.value, (ast.ListComp, ast.GeneratorExp)) else
            [p.elt] if isinstance(p, (ast.ListComp, ast.GeneratorExp)) else [p])]
        return any(parametric(script, e, depth - 1, imported=imported) for e in items)
    cls = script.classes.get(q) if q else None
    if cls is None:
        return imported and _imported_parametric(script, value, depth)
    return any(isinstance(b, ast.FunctionDef) and b.name == "forward" for b in cls.body)


# Signs that an imported module class may be meant to stay frozen (loaded weights, parameters
# switched off): a cut in the forward that uses it may then be the point.
_FROZEN_HINTS = ("requires_grad", "pretrained", "load_state_dict", "torch.load", "torch.hub",
                 "torchvision", "timm")


def _imported_parametric(script: Script, value: ast.Call, depth: int) -> bool:
    """A module class of another file of the project (``from helpers import ConvBackbone``)
    whose ``forward`` exists and whose ``__init__`` builds layers with parameters, read in its
    own file; not one that loads weights or sets ``requires_grad`` (maybe frozen on purpose)."""
    name = dotted(value.func)
    if not name or name.split(".")[0] not in script.project_imports:
        return False
    from trainguard.lint.project import foreign_definition  # (project reads Script: lazy)

    ref = foreign_definition(script, name)
    if not isinstance(ref, ClassRef) or ref.script is script:
        return False
    methods = {b.name: b for b in ref.node.body if isinstance(b, ast.FunctionDef)}
    text = ref.script.segment(ref.node) or ""
    if "forward" not in methods or "__init__" not in methods or \
            any(h in text for h in _FROZEN_HINTS):
        return False
    return any(isinstance(n, ast.Assign) and
               parametric(ref.script, n.value, depth - 1, imported=True)
               for n in walk_local(methods["__init__"]))


Source = tuple  # ("name", Name node) | ("sub", attr, call or None)


def _cuts_in(script: Script, cls: ast.ClassDef, forward: ast.FunctionDef,
             subs: set[str], methods: dict[str, ast.FunctionDef]) -> list[ForwardCut]:
    flow = _Flow(script, subs)
    flow.methods = {k: v for k, v in methods.items() if k not in ("forward", "__init__")}
    flow.tensors = _parameter_attrs(script, methods["__init__"]) & subs
    flow.hooked = hook_stores(cls)
    if packs_sequences(script):
        flow.recurrent = recurrent_submodules(script, methods["__init__"])
    flow.read(forward)
    uncut, cut_at, _ = flow.reach()
    by_cut: dict[int, list[tuple[str, ast.Call]]] = {}
    cut_nodes: dict[int, ast.AST] = {}
    for attr, (call, c) in cut_at.items():
        if attr in uncut or call is None or script.grad_disabled(call) or \
                _used_elsewhere(script, cls, attr, flow.called):
            continue
        by_cut.setdefault(id(c), []).append((attr, call))
        cut_nodes[id(c)] = c
    return [ForwardCut(cls, tuple(sorted(a for a, _ in found)), found[0][1], cut_nodes[k],
                       _describe(script, cut_nodes[k]))
            for k, found in by_cut.items()]


class _Flow:
    """Where each local name's value comes from in one function: rebinding assignments (a
    load sees the last one above it, and the ones before it while that one may not have run;
    in a loop, the loop's later ones too), and in-place stores into containers (seen by every
    load)."""

    def __init__(self, script: Script, subs: set[str], depth: int = 3) -> None:
        self.script, self.subs, self.depth = script, subs, depth
        self.params: set[str] = set()
        self.defs: dict[str, list[tuple[ast.stmt, list]]] = {}
        self.muts: dict[str, list] = {}
        self.roots: list = []
        self.packed = False
        self.methods: dict[str, ast.FunctionDef] = {}  # the class's own, called on self
        self.tensors: set[str] = set()  # the subs that are nn.Parameter, not modules
        self.recurrent: set[str] = set()  # recurrent subs fed packed sequences
        self.rnn_out: set[str] = set()  # the names their outputs are bound to
        self.called: list[ast.FunctionDef] = []
        self.hooked: dict[str, list[HookStore]] = {}  # what the class's forward hooks store
        self.first_call: dict[str, ast.Call] = {}  # each submodule's first call in forward
        self._taken: dict[int, ast.AST | None] = {}

    def read(self, func: ast.FunctionDef) -> None:
        self.params = {a.arg for a in func.args.posonlyargs + func.args.args +
                       func.args.kwonlyargs}
        self.first_call = {}
        for n in walk_local(func):
            if isinstance(n, ast.Call) and self_attr(n.func) in self.subs:
                self.first_call.setdefault(n.func.attr, n)  # type: ignore[attr-defined]
        # PackedSequence.data is the packed values, with their history: where forward packs
        # sequences, ``.data`` is no cut
        # (https://pytorch.org/docs/stable/generated/torch.nn.utils.rnn.PackedSequence.html)
        self.packed = any(isinstance(n, ast.Call) and (self.script.call_qualname(n) or "")
                          .startswith("torch.nn.utils.rnn.pack") for n in walk_local(func))
        # where the file packs sequences elsewhere (a collate function, the training loop),
        # what a recurrent layer returns is taken as a PackedSequence too
        self.rnn_out = recurrent_outputs(func, self.recurrent) if self.recurrent else set()
        for node in walk_local(func):
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                sources = self.deps(node.value)
                off = no_grad_block(self.script, node)
                if off is not None:  # computed under torch.no_grad(): no graph carried on
                    sources = [(src, c or off) for src, c in sources]
                parts = self.unpacked(node) if isinstance(node, ast.Assign) else None
                if parts is None and isinstance(node, ast.Assign) and \
                        _pair_target(node) and index_result(self.script, node.value):
                    # ``vals, idx = s.topk(k)``: the second part holds integer indices
                    parts = [sources, [(src, c or node.value) for src, c in sources]]
                if parts is not None:  # ``_, feats = self.tap(x)``: each name its own part
                    for t, part in zip(node.targets[0].elts, parts):  # type: ignore[attr-defined]
                        self.store(t, [(src, c or off) for src, c in part], node)
                    continue
                if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                    sources = sources + self.deps(ast.Name(node.target.id, ast.Load(),
                                                           lineno=node.lineno,
                                                           col_offset=node.col_offset),
                                                  at=node)
                for t in targets:
                    self.store(t, sources, node)
            elif isinstance(node, (ast.For, ast.AsyncFor)):
                self.store(node.target, self.deps(node.iter), node)
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                for item in node.items:
                    if item.optional_vars is not None:
                        self.store(item.optional_vars, self.deps(item.context_expr), node)
            elif isinstance(node, (ast.Return, ast.Yield, ast.YieldFrom)):
                self.roots.extend(self.deps(node.value))
            elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
                f = node.value.func
                args = list(node.value.args) + [k.value for k in node.value.keywords]
                if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and \
                        f.attr in _STORE_METHODS:
                    self.muts.setdefault(f.value.id, []).extend(
                        d for a in args for d in self.deps(a))
                elif not self.hooked_call(node.value):
                    # an effect trainguard cannot see: taken as reaching the output
                    self.roots.extend(self.deps(node.value))

    def hooked_call(self, call: ast.Call) -> bool:
        """``self.backbone(x)`` as a statement, with a forward hook registered on
        ``self.backbone`` or a layer inside it: what the call leaves behind is what the hooks
        store, read where forward reads it."""
        attr = self_attr(call.func)
        return attr in self.subs and any(
            _root_attr(s.hooked) == attr for stores in self.hooked.values() for s in stores)

    def unpacked(self, node: ast.Assign) -> list[list] | None:
        """For ``a, b = self.sub(x)`` where ``self.sub`` is a module class of the file whose
        ``forward`` returns a tuple of that size at every ``return``: the sources of each part
        (the submodule, uncut or through the cut on the way to that part, and the arguments
        that reach it); None otherwise."""
        target, call = node.targets[0], node.value
        if len(node.targets) != 1 or not isinstance(target, ast.Tuple) or \
                not isinstance(call, ast.Call) or self_attr(call.func) not in self.subs or \
                any(not isinstance(e, ast.Name) for e in target.elts) or self.depth <= 0:
            return None
        found = _module_forward(self.script, call)
        cls = self.script.enclosing_class(found[0]) if found else None
        if cls is None:
            return None
        rets = [r.value for r in walk_local(found[0]) if isinstance(r, ast.Return)]
        if not rets or any(not isinstance(r, ast.Tuple) or len(r.elts) != len(target.elts)
                           for r in rets):
            return None
        names = [a.arg for a in found[0].args.posonlyargs + found[0].args.args][1:]
        bound = bind_arguments(names, call)
        parts = []
        for i in range(len(target.elts)):
            inner = _Flow(self.script, set(), self.depth - 1)
            inner.hooked = hook_stores(cls)
            inner.read(found[0])
            inner.roots = [d for r in rets for d in inner.deps(r.elts[i])]  # type: ignore
            uncut, cut_at, params = inner.reach()
            own = [c for _, c in cut_at.values()]
            if "self" in params:  # any other state of the module read: the module itself
                own.insert(0 if params["self"] is None else len(own), params["self"])
            if uncut:
                own.insert(0, None)
            part = [(("sub", call.func.attr, call), own[0])] if own else []  # type: ignore
            for name, arg in bound.items():
                if name in params:
                    part.extend((d, c or params[name]) for d, c in self.deps(arg))
            part.extend((d, c) for a in call.args if isinstance(a, ast.Starred)
                        for d, c in self.deps(a.value))
            parts.append(part)
        return parts

    def hook_sources(self, node: ast.Attribute) -> list:
        """Reading ``self.<attr>`` that forward hooks fill: the hooked module's output, through
        the cut each hook makes on the way (``self.latents = output.detach()``)."""
        found = []
        for store in self.hooked[node.attr]:
            reached = _hook_reach(self.script, store)
            if reached is False:
                continue
            attr = _root_attr(store.hooked)
            sub = attr if attr in self.subs else "(hooked module)"
            found.append((("sub", sub, self.first_call.get(sub)), reached))
        return found

    def store(self, target: ast.AST, sources: list, stmt: ast.stmt) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for e in target.elts:
                self.store(e, sources, stmt)
        elif isinstance(target, ast.Starred):
            self.store(target.value, sources, stmt)
        elif isinstance(target, ast.Name):
            self.defs.setdefault(target.id, []).append((stmt, sources))
        elif isinstance(target, ast.Subscript):
            base = target.value
            while isinstance(base, ast.Subscript):
                base = base.value
            if isinstance(base, ast.Name):
                self.muts.setdefault(base.id, []).extend(sources)
            else:
                self.roots.extend(sources)
        else:  # self.attr = ...: kept for later, taken as reaching the output
            self.roots.extend(sources)

    def reach(self) -> tuple[set[str], dict[str, tuple[ast.Call | None, ast.AST]],
                             dict[str, ast.AST | None]]:
        """From the output back: (submodules reached uncut, {submodule: (its call, first cut)}
        for those reached through a cut, {parameter: None if reached uncut, else its cut})."""
        uncut: set[str] = set()
        cut_at: dict[str, tuple[ast.Call | None, ast.AST]] = {}
        params: dict[str, ast.AST | None] = {}
        seen: set[tuple[int, bool]] = set()
        stack = list(self.roots)
        while stack:
            src, c = stack.pop()
            if src[0] == "sub":
                if c is None:
                    uncut.add(src[1])
                else:
                    cut_at.setdefault(src[1], (src[2], c))
                continue
            key = (id(src[1]), c is not None)
            if key in seen:
                continue
            seen.add(key)
            name = src[1].id
            if name in self.params and self.reads_input(src[1]):
                if c is None or name not in params:
                    params[name] = c
            for nxt, c2 in self.sources_of(src[1]):
                stack.append((nxt, c or c2))
        return uncut, cut_at, params

    def reads_input(self, load: ast.Name) -> bool:
        """``load`` may see the value the parameter of that name was passed: no assignment
        to it runs on every way there (``x = torch.tensor(x)`` reads the passed ``x``)."""
        stmt = _statement(load)
        here = _pos(stmt)
        return not any(_pos(d[0]) < here and self.taken(d[0]) is not None and
                       _dominates(self.taken(d[0]), stmt)  # type: ignore[arg-type]
                       for d in self.defs.get(load.id, ()))

    def sources_of(self, load: ast.Name) -> list:
        name = load.id
        out = list(self.muts.get(name, ()))
        defs = self.defs.get(name, ())
        if not defs:
            return out
        stmt = _statement(load)
        here = _pos(stmt)
        before = [d for d in defs if (_pos(d[0]) < here or encloses(d[0], stmt)) and
                  self.taken(d[0]) is not None]
        for d in sorted(before, key=lambda d: _pos(d[0]), reverse=True):
            out.extend(d[1])
            if _dominates(self.taken(d[0]), stmt):  # type: ignore[arg-type]
                break
        for loop in _loops_around(stmt):
            out.extend(s for d in defs if _pos(d[0]) >= here and encloses(loop, d[0])
                       for s in d[1])
        return out

    def taken(self, stmt: ast.AST) -> ast.AST | None:
        """``stmt``, or the outermost ``if`` around it whose test the file decides for its
        branch (``if cfg.log_weights:`` with ``log_weights: bool = True``): the statement then
        runs whenever that ``if`` does. None when a test is decided against it."""
        if id(stmt) not in self._taken:
            self._taken[id(stmt)] = self._decide(stmt)
        return self._taken[id(stmt)]

    def _decide(self, stmt: ast.AST) -> ast.AST | None:
        while isinstance(block := getattr(stmt, "_tg_parent", None), ast.If) and \
                stmt is not block.test:
            decided = truth(block.test)
            if decided is None:
                value = resolve(self.script, block.test)  # if self.log_weights:
                decided = None if value is UNKNOWN else bool(value)
            if decided is None:
                break
            if decided != any(stmt is b for b in block.body):
                return None
            stmt = block
        return stmt

    def deps(self, expr: ast.AST | None, at: ast.AST | None = None) -> list:
        found: list = []
        stack: list[tuple[ast.AST, ast.AST | None]] = [(expr, None)] if expr is not None else []
        subs, script = self.subs, self.script
        while stack:
            node, c = stack.pop()
            if isinstance(node, ast.Name):
                if at is not None:  # a synthetic load: placed at ``at``
                    node._tg_parent = at  # type: ignore[attr-defined]
                found.append((("name", node), c))
                continue
            if isinstance(node, ast.Attribute) and self_attr(node) in self.hooked and \
                    isinstance(node.ctx, ast.Load):
                found.extend((src, c or how) for src, how in self.hook_sources(node))
                continue
            if isinstance(node, ast.Attribute) and self_attr(node) in subs:
                # a module handed on (unknown use), or a parameter's value read here
                found.append((("sub", node.attr, node if node.attr in self.tensors else None),
                              c))
                continue
            if index_part(self.script, node):  # s.topk(k).indices: integers, no graph
                stack.append((node.value, c or node))  # type: ignore[attr-defined]
                continue
            if isinstance(node, ast.IfExp):  # its test picks a branch, like an ``if``'s
                stack.extend(((node.body, c), (node.orelse, c)))
                continue
            if isinstance(node, ast.Compare):  # s > thresh: a bool tensor
                stack.extend((e, c or node) for e in (node.left, *node.comparators))
                continue
            if isinstance(node, ast.Attribute) and node.attr == "data":
                packed = self.packed or rnn_output(node.value, self.rnn_out, self.recurrent)
                stack.append((node.value, c if packed else c or node))
                continue
            if isinstance(node, (ast.Lambda, ast.FunctionDef, ast.ClassDef)) or \
                    metadata_read(node):
                continue
            if isinstance(node, ast.Call):
                f = node.func
                args = list(node.args) + [k.value for k in node.keywords]
                if self_attr(f) in subs:
                    found.append((("sub", f.attr, node), c))  # type: ignore[union-attr]
                    # a module class of the file: what of its inputs reaches its output, and
                    # through which cut (a quantizer returning only detached values)
                    passed = self.helper(node)
                    stack.extend(((a, c or how) for a, how in passed) if passed is not None
                                 else ((a, c) for a in args))
                    continue
                method = self.methods.get(self_attr(f) or "")
                if method is not None:  # self.adjacency(): the submodules it reads feed it
                    self.called.append(method)
                    found.extend((("sub", a, node), c or how)
                                 for a, how in self._method_subs(method))
                helper = self.helper(node)
                if helper is not None:  # a same-file function: what reaches its return
                    for arg, how in helper:
                        stack.append((arg, c or how))
                    continue
                q = script.call_qualname(node) or ""
                if isinstance(f, ast.Attribute) and f.attr in CUT_ATTRS:
                    stack.append((f.value, c or node))
                    stack.extend((a, c) for a in args)
                    continue
                if q in _KEEP_HISTORY and node.args and not isinstance(
                        node.args[0], (ast.List, ast.Tuple, ast.Constant, *COMPREHENSIONS)):
                    stack.extend((a, c) for a in args)  # as_tensor(t): t, with its history
                    continue
                if q in NEW_LEAF or q.startswith("numpy.") or q in _INDEX_FUNCS or \
                        python_number(script, node):
                    stack.extend((a, c or node) for a in args)
                    continue
                if isinstance(f, ast.Attribute) and f.attr == "argsort":  # s.argsort(): ints
                    stack.append((f.value, c or node))
                    stack.extend((a, c) for a in args)
                    continue
                if isinstance(f, ast.Attribute):
                    stack.append((f.value, c))
                stack.extend((a, c) for a in args)
                continue
            stack.extend((child, c) for child in ast.iter_child_nodes(node))
        return found

    def _method_subs(self, method: ast.FunctionDef) -> list[tuple[str, ast.AST | None]]:
        """The submodules a method of the class (called on ``self``) reads, each with the cut
        on its way to what the method returns (None: uncut, or not followed): a
        ``node_features()`` that runs ``self.embed`` and returns
        ``torch.from_numpy(np.concatenate([emb.detach().numpy(), ...]))`` cuts it."""
        reads = sorted({self_attr(n) for n in walk_local(method)} & self.subs)
        if self.depth <= 0 or not any(isinstance(n, ast.Return) for n in walk_local(method)):
            return [(a, None) for a in reads]
        inner = _Flow(self.script, self.subs, self.depth - 1)
        inner.methods, inner.tensors = self.methods, self.tensors
        inner.read(method)
        uncut, cut_at, _ = inner.reach()
        return [(a, None if a in uncut or a not in cut_at else cut_at[a][1]) for a in reads]

    def helper(self, call: ast.Call) -> list[tuple[ast.expr, ast.AST | None]] | None:
        """For a call of a same-file function: each argument that reaches its return, with the
        cut on the way (None: uncut); None when the call runs no such function."""
        func = self.script.callee(call) if self.depth > 0 else None
        instance = False
        if func is None and self.depth > 0:  # a module of the file called: self.quantizer(z)
            found = _module_forward(self.script, call)
            func, instance = (found[0], True) if found else (None, False)
        if func is None or isinstance(func, ast.AsyncFunctionDef):
            return None
        memo = self.script.__dict__.setdefault("_tg_param_cuts", {})
        if id(func) not in memo:
            memo[id(func)] = None  # recursion: unknown
            inner = _Flow(self.script, set(), self.depth - 1)
            inner.read(func)
            memo[id(func)] = inner.reach()[2]
        reached = memo[id(func)]
        if reached is None:
            return None
        off = _no_grad_decorator(self.script, func)
        if off is not None:  # @torch.no_grad() def forward(...): nothing it returns has a graph
            reached = {name: how or off for name, how in reached.items()}
        names = [a.arg for a in func.args.posonlyargs + func.args.args]
        if names and names[0] in ("self", "cls") and (instance or
                                                       isinstance(call.func, ast.Attribute)):
            names = names[1:]
        out = []
        for name, arg in bind_arguments(names, call).items():
            if name in reached:
                out.append((arg, reached[name]))
        out.extend((a.value, None) for a in call.args if isinstance(a, ast.Starred))
        return out


# Reads of a tensor's metadata, not of its values: no gradient flows through a shape, a
# dtype or a device (``F.one_hot(labels, cosine.shape[1])`` does not depend on ``cosine``'s
# values), so they are no path from a submodule to the output, cut or uncut.
_META_ATTRS = frozenset({"shape", "dtype", "device", "ndim", "is_cuda", "layout"})
_META_CALLS = frozenset({"size", "dim", "ndimension", "numel", "get_device", "nelement"})


# Ops that return integer indices (torch.argsort(s)), and ops that return a (values, indices)
# pair (torch.return_types): what their indices select keeps no path back to the scores
# (https://pytorch.org/docs/stable/generated/torch.topk.html).
_INDEX_FUNCS = frozenset({"torch.argmax", "torch.argmin", "torch.argsort", "torch.bucketize",
                          "torch.searchsorted"})
_PAIRED = frozenset({"topk", "sort", "kthvalue", "median", "mode", "cummax", "cummin", "max",
                     "min"})


def index_result(script: Script, call: ast.AST) -> bool:
    """``s.topk(k)``, ``torch.sort(s)``, ``s.max(dim=1)``: a (values, indices) pair."""
    if not isinstance(call, ast.Call):
        return False
    f = call.func
    name = f.attr if isinstance(f, ast.Attribute) else ""
    q = script.call_qualname(call) or ""
    if q.startswith("torch.") and not q.startswith("torch.nn."):
        name = q.rsplit(".", 1)[-1]
    if name not in _PAIRED:
        return False
    if name in ("max", "min"):  # a reduction over a dim; max(a, b) and max(s) are values
        first = 1 if q.startswith("torch.") else 0
        dim = call.args[first] if len(call.args) > first else next(
            (k.value for k in call.keywords if k.arg == "dim"), None)
        return isinstance(dim, ast.Constant) and isinstance(dim.value, int) or \
            isinstance(dim, ast.UnaryOp) and isinstance(dim.operand, ast.Constant)
    return True


def index_part(script: Script, node: ast.AST) -> bool:
    """``s.topk(k).indices`` or ``s.topk(k)[1]``: the integer half of such a pair."""
    if isinstance(node, ast.Attribute):
        return node.attr == "indices" and index_result(script, node.value)
    return isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and \
        node.slice.value == 1 and index_result(script, node.value)


def _pair_target(node: ast.Assign) -> bool:
    t = node.targets[0]
    return len(node.targets) == 1 and isinstance(t, ast.Tuple) and len(t.elts) == 2 and \
        all(isinstance(e, ast.Name) for e in t.elts)


def python_number(script: Script, call: ast.Call) -> bool:
    """``float(w)``, ``int(w)`` or a ``math`` function (``math.exp(-s)``): the tensor becomes a
    Python number, with no graph behind it."""
    f = call.func
    if isinstance(f, ast.Name) and f.id in ("float", "int"):
        return f.id not in script.functions and len(call.args) == 1
    return (script.call_qualname(call) or "").startswith("math.")


def metadata_read(node: ast.AST) -> bool:
    """``x.shape``, ``x.size(0)``, ``x.dim()``, ``len(x)``: a read of metadata only."""
    if isinstance(node, ast.Attribute):
        return node.attr in _META_ATTRS
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    return isinstance(f, ast.Attribute) and f.attr in _META_CALLS or \
        isinstance(f, ast.Name) and f.id == "len" and len(node.args) == 1


def _no_grad_decorator(script: Script, func: ast.AST) -> ast.AST | None:
    """The ``@torch.no_grad()``/``@torch.inference_mode()`` decorator of ``func``, or None
    (``set_grad_enabled(flag)`` may enable grad: not counted)."""
    for d in getattr(func, "decorator_list", ()):
        q = script.call_qualname(d) if isinstance(d, ast.Call) else script.qualname(d)
        if q in NO_GRAD and not (isinstance(d, ast.Call) and d.args and is_false(d.args[0])):
            return d
    return None


def no_grad_block(script: Script, node: ast.AST) -> ast.AST | None:
    """The ``torch.no_grad()``/``torch.inference_mode()`` item of a ``with`` block around
    ``node`` in its own function, or None. (Only those: ``set_grad_enabled(flag)`` may enable
    grad, and a function's callers are not read here.)"""
    n = node
    while (p := parent(n)) is not None and not isinstance(p, (ast.FunctionDef,
                                                             ast.AsyncFunctionDef, ast.Lambda)):
        if isinstance(p, (ast.With, ast.AsyncWith)) and n in p.body:
            for item in p.items:
                if _turns_grad_off(script, item.context_expr):
                    return item.context_expr
        n = p
    return None


def _turns_grad_off(script: Script, expr: ast.AST) -> bool:
    """``torch.no_grad()`` or ``torch.inference_mode()`` not given a false flag."""
    q = script.call_qualname(expr) if isinstance(expr, ast.Call) else None
    return q in NO_GRAD and not (expr.args and not is_true(expr.args[0]))  # type: ignore


def _hook_reach(script: Script, store: HookStore) -> ast.AST | None | bool:
    """How the value a forward hook stores comes from the tensors it is handed: None when
    uncut (``output``), the first cut on the way (``output.clone().detach()``), False when it
    does not come from them (a counter, a name)."""
    memo = script.__dict__.setdefault("_tg_hook_reach", {})
    key = id(store.value)
    if key not in memo:
        memo[key] = False  # (recursion: not followed)
        inner = _Flow(script, set(), 1)
        if isinstance(store.hook, ast.Lambda):
            inner.params = {a.arg for a in store.hook.args.args}
        else:
            inner.read(store.hook)
        inner.roots = inner.deps(store.value)
        reached = inner.reach()[2]
        cuts = [reached[p] for p in store.params if p in reached]
        memo[key] = False if not cuts else None if None in cuts else cuts[0]
    return memo[key]


def _root_attr(expr: ast.AST) -> str | None:
    """``x`` for ``self.x``, ``self.x.layer4``, ``self.x[-1]``: the submodule of ``self`` that
    holds the module ``expr`` names."""
    while isinstance(expr, (ast.Attribute, ast.Subscript)) and self_attr(expr) is None:
        expr = expr.value
    return self_attr(expr)


def _module_forward(script: Script, call: ast.Call) -> list[ast.FunctionDef]:
    """The ``forward`` of a module class of this file that calling ``self.<attr>(...)`` runs
    (one class only), as a list; empty otherwise."""
    if self_attr(call.func) is None:
        return []
    found = [t.func for t in script.graph.instance_targets(call)
             if t.script is script and isinstance(t.func, ast.FunctionDef)]
    return found if len(found) == 1 else []


def _statement(node: ast.AST) -> ast.AST:
    n = node
    while not isinstance(n, ast.stmt) and getattr(n, "_tg_parent", None) is not None:
        n = n._tg_parent  # type: ignore[attr-defined]
    return n


def _pos(node: ast.AST) -> tuple[int, int]:
    return (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))


def _ancestors(node: ast.AST) -> list[ast.AST]:
    out, n = [], node
    while (n := getattr(n, "_tg_parent", None)) is not None:
        out.append(n)
    return out


def _dominates(stmt: ast.AST, at: ast.AST) -> bool:
    """``stmt`` runs whenever ``at`` does: its block holds ``at`` (or a block around it), and it
    is no loop header around ``at``."""
    block = getattr(stmt, "_tg_parent", None)
    if isinstance(stmt, (ast.For, ast.AsyncFor, ast.With, ast.AsyncWith)) and encloses(stmt, at):
        return True
    if isinstance(block, (ast.If, ast.For, ast.AsyncFor, ast.While, ast.Try)) and \
            not encloses(block, at):
        return False
    return block is not None and (block is getattr(at, "_tg_parent", None) or
                                  encloses(block, at))


def _loops_around(stmt: ast.AST) -> list[ast.AST]:
    out = []
    for a in _ancestors(stmt):
        if isinstance(a, (ast.FunctionDef, ast.AsyncFunctionDef)):
            break
        if isinstance(a, (ast.For, ast.AsyncFor, ast.While)):
            out.append(a)
    return out


def _used_elsewhere(script: Script, cls: ast.ClassDef, attr: str,
                    called: list[ast.FunctionDef] = ()) -> bool:  # type: ignore[assignment]
    """The submodule is named anywhere but where ``__init__`` assigns it and ``forward`` (or a
    method forward calls) uses it (frozen, put in eval mode, updated as a moving average,
    called by another method or from outside): its role is not forward's alone. A read that
    only looks at it (``.detach().clone()`` for a snapshot, ``.shape``) or initializes it
    (``nn.init.uniform_(self.emb.weight, ...)``) does not count."""
    forward = next(b for b in cls.body if isinstance(b, ast.FunctionDef) and b.name == "forward")
    own = {id(n) for f in (forward, *called) for n in ast.walk(f)}
    own |= {id(e) for n in ast.walk(cls) if isinstance(n, ast.Assign) for t in n.targets
            for e in ast.walk(t)}  # (self.a, self.b = A(), B() too)
    own |= {id(e) for stores in hook_stores(cls).values() for st in stores
            for e in ast.walk(st.hooked)}  # (a hook registered on a layer of it)
    return any(isinstance(n, ast.Attribute) and n.attr == attr and id(n) not in own and
               not _parameters_read(n) and not _observed(n) and not _initialized(script, n)
               and not _inspected(script, n) for n in script.nodes) or \
        any(isinstance(n, ast.Constant) and n.value == attr for n in script.nodes)


def _inspected(script: Script, node: ast.Attribute) -> bool:
    """``vit = model.image.encoder`` (the submodule, or a module inside it, bound to a name)
    where every use of the name only lists its parameters: ``vit.named_parameters()`` read
    for their grads, or ``snapshot(vit)`` with a function (of the file or of the project) that
    does no more with it. A name that is called, switched to eval, frozen or written through
    gives the submodule another role."""
    top: ast.AST = node
    while isinstance(parent(top), ast.Attribute):
        top = parent(top)  # type: ignore[assignment]
    stmt = parent(top)
    func = script.enclosing_function(node)
    if func is None or not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and
                            isinstance(stmt.targets[0], ast.Name)):
        return False
    name = stmt.targets[0].id
    uses = [n for n in walk_local(func) if isinstance(n, ast.Name) and n.id == name and
            isinstance(n.ctx, ast.Load)]
    return bool(uses) and all(_lists_parameters(script, u, 1) for u in uses)


def _lists_parameters(script: Script, use: ast.Name, depth: int) -> bool:
    """``use`` (a module) is only asked for its parameters, in a statement that neither sets
    ``requires_grad`` nor writes in place; or handed to functions that do only that."""
    p = parent(use)
    if isinstance(p, ast.Attribute) and p.attr in ("parameters", "named_parameters"):
        stmt = statement_of(use)
        return stmt is not None and not _writes(stmt)
    if not (isinstance(p, ast.Call) and use in p.args) or depth <= 0:
        return False
    targets = script.targets(p)
    if not targets:
        return False
    for t in targets:
        names = [a.arg for a in t.func.args.posonlyargs + t.func.args.args]
        bound = bind_arguments(names[1:] if t.bound else names, p)
        param = next((k for k, v in bound.items() if v is use), None)
        loads = [n for n in walk_local(t.func) if isinstance(n, ast.Name) and n.id == param]
        if param is None or _writes(t.func) or not all(
                _lists_parameters(t.script, n, depth - 1) for n in loads):
            return False
    return True


def _writes(node: ast.AST) -> bool:
    """``node`` sets ``requires_grad``, stores into ``.data`` or calls an in-place method."""
    return any(isinstance(n, ast.Attribute) and (
        n.attr.startswith("requires_grad") or n.attr == "data" and
        isinstance(n.ctx, ast.Store) or n.attr.endswith("_") and not n.attr.startswith("_"))
        for n in ast.walk(node)) or \
        any(isinstance(n, ast.keyword) and n.arg == "requires_grad" for n in ast.walk(node))


def _initialized(script: Script, node: ast.Attribute) -> bool:
    """``nn.init.uniform_(self.u_embeddings.weight, -r, r)``: an initialization, no role."""
    p = parent(node)
    if isinstance(p, ast.Attribute) and p.attr in ("weight", "bias"):
        p = parent(p)
    return isinstance(p, ast.Call) and node in ast.walk(p) and p.func is not node and \
        (script.call_qualname(p) or "").startswith("torch.nn.init.")


def _observed(node: ast.Attribute) -> bool:
    """``net.kernel.detach().clone()`` (a snapshot), ``.norm()``, ``.shape``: a value read to look
    at, which gives the parameter no other role."""
    p = getattr(node, "_tg_parent", None)
    if isinstance(p, ast.Attribute) and p.attr in ("weight", "bias"):  # embed.weight.detach()
        p = getattr(p, "_tg_parent", None)
        return isinstance(p, ast.Attribute) and (p.attr in _LOOKS or p.attr == "grad")
    return isinstance(p, ast.Attribute) and p.attr in _LOOKS


_LOOKS = frozenset({"detach", "clone", "cpu", "tolist", "item", "numpy", "norm", "shape", "size",
                    "dtype", "device", "numel", "grad"})  # (printing model.align.lag.grad)


def _parameters_read(node: ast.Attribute) -> bool:
    """``model.attention.parameters()`` handed to an optimizer, a clip or a snapshot: the
    submodule is meant to train, so a cut in forward still starves it. A loop or
    comprehension over them that sets ``requires_grad`` freezes it instead (not a read)."""
    p = getattr(node, "_tg_parent", None)
    if not (isinstance(p, ast.Attribute) and p.attr in ("parameters", "named_parameters") and
            isinstance(getattr(p, "_tg_parent", None), ast.Call)):
        return False
    n: ast.AST | None = p
    while n is not None and not isinstance(n, ast.stmt):
        n = getattr(n, "_tg_parent", None)
    return n is not None and not any(
        isinstance(x, (ast.Attribute, ast.keyword)) and
        (getattr(x, "attr", None) or getattr(x, "arg", None)) in ("requires_grad",
                                                                  "requires_grad_")
        for x in ast.walk(n))


def _describe(script: Script, cut: ast.AST) -> str:
    how = _describe_cut(script, cut)
    func = cut
    while (func := parent(func)) is not None and \
            not isinstance(func, (ast.FunctionDef, ast.Lambda, ast.ClassDef)):
        pass
    cls = script.enclosing_class(func) if func is not None else None
    store = next((st for stores in (hook_stores(cls).values() if cls is not None else ())
                  for st in stores if st.hook is func), None)
    if store is None:
        return how
    name = "a lambda" if isinstance(func, ast.Lambda) else f"{func.name}()"  # type: ignore
    return f"{how} in {name}, the forward hook registered at {script.at(store.register.lineno)}"


def _describe_cut(script: Script, cut: ast.AST) -> str:
    if isinstance(cut, ast.Compare):
        return "a comparison (a bool tensor)"
    if isinstance(cut, (ast.Subscript, ast.Attribute)) and index_part(script, cut) or \
            isinstance(cut, ast.Call) and (index_result(script, cut) or
                                           script.call_qualname(cut) in _INDEX_FUNCS or
                                           (dotted(cut.func) or "").endswith(".argsort")):
        call = cut if isinstance(cut, ast.Call) else cut.value  # type: ignore[attr-defined]
        name = call.func.attr if isinstance(call.func, ast.Attribute) else "the op"
        return f"the integer indices of {name}()"
    if isinstance(cut, ast.Attribute):
        return ".data"
    decorated = getattr(parent(cut), "decorator_list", ())
    if any(d is cut for d in decorated):
        func = parent(cut)
        owner = script.enclosing_class(func)
        name = f"{owner.name}.{func.name}" if owner is not None else func.name  # type: ignore
        return f"{name}(), decorated with @{script.segment(cut) or 'torch.no_grad()'}"
    if isinstance(cut, ast.Call):
        f = cut.func
        if isinstance(f, ast.Attribute) and f.attr in CUT_ATTRS:
            return f".{f.attr}()"
        q = script.call_qualname(cut) or ""
        if python_number(script, cut):
            return f"{q}(), a Python number"
        if q.startswith("numpy."):
            return f"a NumPy round trip ({q.replace('numpy.', 'np.')}(...))"
        return f"a new tensor made by {q.rsplit('.', 1)[-1]}(...)"
    return "a cut"
