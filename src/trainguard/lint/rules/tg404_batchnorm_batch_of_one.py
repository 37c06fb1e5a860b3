"""TG404 batchnorm-batch-of-one: a training batch gives BatchNorm one value per channel.

``BatchNorm1d`` on an ``(N, C)`` batch with ``N == 1`` raises "Expected more than 1 value per
channel when training" (https://github.com/pytorch/pytorch/issues/4534); so does
``BatchNorm2d`` on a ``(1, C, 1, 1)`` map, as after ``AdaptiveAvgPool2d(1)``. Statically: the
model uses such a BatchNorm (in the file, or in the project file whose class or factory builds
the model) and a training ``DataLoader`` (it shuffles, or a training loop iterates it) has
``batch_size=1`` (the default), or leaves a last batch of one sample: the dataset's length
``N`` and the batch size ``B`` are fixed by the file (``N = 1025; B = 64``, a function's
arguments at a call site, an ``__init__``'s at an instantiation: :mod:`trainguard.lint.shapes`), ``N % B == 1`` and ``drop_last`` is
not set. Sizes and loader options may come from a config: a dataclass of the file
(:mod:`trainguard.lint.records`), a dict handed to a trainer, options spread with ``**``.
Reported at the ``DataLoader`` call, where ``drop_last=True`` goes. Batches sliced by hand
(``for i in range(0, len(x), bs): xb = x[i:i + bs]``, in a training loop or a generator one
iterates: :mod:`trainguard.lint.sliced_batches`) are reported at that loop; a batch a
training loop makes with a tensor factory (``torch.rand(BATCH_SIZE, 3, h, w)``), a batch size
of 1 written in the file, where that 1 is written.

Silent: ``BatchNorm2d`` on ``(1, C, H, W)`` with ``H*W > 1`` (it trains), ``drop_last=True``
or a ``drop_last`` the file does not fix (``**options`` it does not fix), loaders that do not shuffle and that no training
loop iterates (evaluation runs BatchNorm in eval mode), sizes the file does not fix.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from trainguard.lint.astutil import dotted, kwarg, parent, walk_local
from trainguard.lint.callgraph import bind_arguments, defaults
from trainguard.lint.consts import UNKNOWN, const_eval, resolve
from trainguard.lint.regions import training_loops
from trainguard.lint.rules import Hit
from trainguard.lint.script import Script
from trainguard.lint.dataflow import last_assignment
from trainguard.lint.shapes import samples
from trainguard.lint.sliced_batches import single_sample_loops, site_envs, sliced_batch_loops

CODE = "TG404"
SKIP_IN_TESTS = True  # about a training run; test files are not runs
_POOL_TO_ONE = ("AdaptiveAvgPool2d", "AdaptiveMaxPool2d")


def check(script: Script) -> Iterator[Hit]:
    if "BatchNorm" not in script.source and not script.model_builders:
        return
    if not training_loops(script):  # cached: the other rules read it too
        return
    norm = _one_value_norm(script)
    if norm is None:
        return
    for loop, n, size, site in sliced_batch_loops(script):
        at = f" (called at {script.at(site.lineno)})" if site is not None else ""
        yield Hit(loop, f"this loop{at} slices {n} samples into batches of {size} by hand: the "
                        f"last batch of every epoch holds 1 sample, and {norm} in train mode "
                        f"raises 'Expected more than 1 value per channel when training' on it",
                  fix=f"skip the last partial batch (end the range at n - n % {size}, as "
                      "DataLoader's drop_last=True does), or pick a batch size that leaves no "
                      "remainder of 1")
    for loop, step, env, site in single_sample_loops(script):
        at = f" (called at {script.at(site.lineno)})" if site is not None else ""
        yield Hit(_written_one(script, step, env),
                  f"the loop at {script.at(loop.lineno)}{at} slices training batches of "
                  f"{ast.unparse(step)} samples, which is 1: {norm} in train mode sees one "
                  f"value per channel in every batch, so batch statistics are undefined and "
                  f"PyTorch raises 'Expected more than 1 value per channel when training'",
                  fix="use a batch size above 1, or GroupNorm/LayerNorm")
    yield from _made_batches(script, norm)
    if "DataLoader" not in script.source:
        return
    for call in script.calls:
        if not (script.call_qualname(call) or "").endswith("DataLoader"):
            continue
        dataset = call.args[0] if call.args else kwarg(call, "dataset")
        size_node = kwarg(call, "batch_size") or (call.args[1] if len(call.args) >= 2 else None)
        drop = kwarg(call, "drop_last")
        shuffled, batches = False, call
        if kwarg(call, "batch_sampler") is not None:
            built = _batch_sampler(script, kwarg(call, "batch_sampler"))
            if built is None:
                continue  # a batch sampler the file does not build: its batches are unknown
            size_node, drop, shuffled, batches = built
        for env, site in site_envs(script, call):
            spread = _spread(script, call, env)  # DataLoader(ds, **cfg["loader"])
            if spread is UNKNOWN:
                continue  # options the file does not fix may hold drop_last
            size = 1 if size_node is None else const_eval(size_node, env=env)
            if size is UNKNOWN and isinstance(size_node, ast.Name) and size_node.id in env:
                size = resolve(script, env[size_node.id])  # the caller's d["batch"]
            if size is UNKNOWN and size_node is not None:
                size = resolve(script, size_node)  # batch_size=self.batch_size
            if size_node is None and "batch_size" in spread:
                size = spread["batch_size"]
            if not isinstance(size, int) or isinstance(size, bool) or size < 1:
                continue
            if drop is not None and const_eval(drop, env=env) is not False and \
                    resolve(script, drop) is not False:  # drop_last=self.cfg.drop_last
                continue
            if spread.get("drop_last", False) is not False:
                continue
            if not shuffled and not _training_loader(script, call, env, spread):
                continue  # (a BatchSampler over a RandomSampler shuffles: a training loader)
            at = f" (called at {script.at(site.lineno)})" if site is not None else ""
            if size == 1:
                written = _entry_of(script, size_node) or size_node or \
                    _spread_entry(script, call, "batch_size") or call
                yield Hit(written,
                          f"batch_size=1{at} gives {norm} one value per channel in every "
                          f"training batch: batch statistics are undefined and PyTorch raises "
                          f"'Expected more than 1 value per channel when training'",
                          fix="use a batch size above 1 (with drop_last=True), or "
                              "GroupNorm/LayerNorm")
                break
            n = samples(script, dataset, env)
            if isinstance(n, int) and n % size == 1:
                what = "DataLoader" if batches is call else "DataLoader's BatchSampler"
                # a drop_last=False read from a configuration: where it is written, and changed
                configured = _written_false(script, "drop_last") \
                    if drop is not None and const_eval(drop, env=env) is UNKNOWN else None
                yield Hit(configured or batches,
                          f"this training {what}{at} splits {n} samples into "
                          f"batches of {size}: the last batch of every epoch holds 1 "
                          f"sample, and {norm} in train mode raises 'Expected more "
                          f"than 1 value per channel when training' on it",
                          fix=f"pass drop_last=True to the training {what} (or pick a batch "
                              "size that leaves no remainder of 1)")
                break


_FACTORIES = frozenset({"torch.randn", "torch.rand", "torch.zeros", "torch.ones",
                        "torch.empty", "torch.full"})


def _made_batches(script: Script, norm: str) -> Iterator[Hit]:
    """A training loop that builds its batch with a tensor factory (``x =
    torch.randn(args.batch_size, 3, h, w)``) whose first size the file fixes at 1 (a constant,
    an argparse default: ``--batch-size`` defaulting to 1, leaderj1001-style scripts) and runs
    the model on it in train mode: reported where that size of 1 is written."""
    from trainguard.lint.modes import mode_before
    from trainguard.lint.options import argparse_default
    from trainguard.lint.regions import forward_calls

    if not any(q in script.source for q in ("randn", "rand(", "zeros", "ones", "empty",
                                            "full")):
        return
    for loop in training_loops(script):
        fwds = forward_calls(script, loop)
        for node in walk_local(loop):
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and
                    isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Call)
                    and script.call_qualname(node.value) in _FACTORIES and node.value.args):
                continue
            first = node.value.args[0]
            if isinstance(first, (ast.Tuple, ast.List)):
                first = first.elts[0] if first.elts else first
            size = resolve(script, first)
            if size != 1 or isinstance(size, bool) or isinstance(first, ast.Starred):
                continue
            name = node.targets[0].id
            # the model's input (``model(x)``), not a state handed along (``rnn(x, h0)``)
            fed = [f for f in fwds if f.lineno >= node.lineno and f.args[:1] and
                   isinstance(f.args[0], ast.Name) and f.args[0].id == name]
            if not fed or mode_before(script, fed[0])[0] == "eval":
                continue
            written: ast.AST = first  # where the 1 is written: a constant, an option's default
            if isinstance(first, ast.Attribute) and isinstance(first.value, ast.Name):
                written = argparse_default(first, first.value.id, first.attr, script) or first
            elif isinstance(first, ast.Name) and len(script.assignments.get(first.id, ())) == 1:
                written = script.assignments[first.id][0]
            what = "its batch dimension is 1" if isinstance(first, ast.Constant) else \
                f"{ast.unparse(first)} is 1"
            yield Hit(written,
                      f"the training batch made at {script.at(node.lineno)} holds 1 sample "
                      f"({what}), so {norm} sees one value per channel: "
                      f"batch statistics are undefined and PyTorch raises 'Expected more than "
                      f"1 value per channel when training'",
                      fix="use a batch size above 1, or GroupNorm/LayerNorm")
            return


def _written_one(script: Script, expr: ast.expr, env: dict, depth: int = 3) -> ast.AST:
    """Where a batch size of 1 read as ``expr`` is written: the config dict's entry
    (``"batch_size": 1``), the argument a call passes for a parameter, or the one assignment
    of a name (``BATCH = 1``); ``expr`` itself otherwise."""
    entry = _entry_of(script, expr)
    if entry is not None or depth == 0:
        return entry or expr
    if isinstance(expr, ast.Name) and expr.id in env and isinstance(env[expr.id], ast.expr):
        return _written_one(script, env[expr.id], {}, depth - 1)
    if isinstance(expr, ast.Name) and len(script.assignments.get(expr.id, ())) == 1:
        return script.assignments[expr.id][0]
    return expr


def _spread_entry(script: Script, call: ast.Call, key: str) -> ast.expr | None:
    """The value written for ``key`` in the dict literal a call spreads with ``**``
    (``DataLoader(ds, **cfg["loader"])`` with ``CONFIG = {"loader": {"batch_size": 1}}``
    handed in as ``cfg``): where that option is set, and changed."""
    for k in call.keywords:
        if k.arg is None:
            value = _dict_value(_literal(script, k.value, 6), key)
            if value is not None:
                return value
    return None


def _entry_of(script: Script, expr: ast.AST | None) -> ast.AST | None:
    """The value written in a dict literal for ``cfg["batch_size"]`` (through the names and
    parameters :func:`_literal` follows): where a configured batch size of 1 is set, and
    changed (huaifeng1993/DFANet#9); None when not found."""
    if not isinstance(expr, ast.Subscript):
        return None
    return _dict_value(_literal(script, expr.value, 6), const_eval(expr.slice))


def _written_false(script: Script, key: str) -> ast.expr | None:
    """The one ``"drop_last": False`` entry of the file's dict literals, where a
    ``drop_last=cfg.drop_last`` read from a configuration is set, and changed; None when the
    file writes it in no dict or in several."""
    found = [v for d in script.nodes if isinstance(d, ast.Dict)
             for k, v in zip(d.keys, d.values)
             if k is not None and const_eval(k) == key and const_eval(v) is False]
    return found[0] if len(found) == 1 else None


def _dict_value(found: ast.AST | None, key: object) -> ast.expr | None:
    """The value a dict literal writes for the constant ``key``; None when ``found`` is no dict
    literal, ``key`` is unknown or absent."""
    if not isinstance(found, ast.Dict) or key is UNKNOWN:
        return None
    return next((v for k, v in zip(found.keys, found.values)
                 if k is not None and const_eval(k) == key), None)


def _literal(script: Script, expr: ast.AST | None, depth: int) -> ast.AST | None:
    """The literal an expression reads, through subscripts of dict literals, names assigned
    once, parameters every call binds alike and attributes ``__init__`` sets from them; None
    when not found."""
    from trainguard.lint.consts import _param_value, _self_value, _single_value

    if expr is None or depth <= 0:
        return None
    if isinstance(expr, ast.Dict):
        return expr
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and \
            expr.value.id == "self":  # self.opts, set from what every instantiation passes
        return _literal(script, _self_value(script, expr, expr.attr), depth - 1)
    if isinstance(expr, ast.Subscript):
        value = _dict_value(_literal(script, expr.value, depth - 1), const_eval(expr.slice))
        return _literal(script, value, depth - 1) if value is not None else None
    if isinstance(expr, ast.Name):
        value = _single_value(expr) or _param_value(script, expr, expr.id)
        return _literal(script, value, depth - 1)
    return None


def _batch_sampler(script: Script, node: ast.AST
                   ) -> tuple[ast.expr, ast.expr, bool, ast.Call] | None:
    """(batch_size, drop_last, over a RandomSampler, the call) of ``BatchSampler(sampler,
    batch_size=..., drop_last=...)`` built in the file (directly, or a name assigned above the
    loader): its last batch holds the remainder as DataLoader's own batching does, and it is
    where ``drop_last=True`` goes."""
    value = node
    if isinstance(node, ast.Name):
        value = last_assignment(node.id, node)
    if not (isinstance(value, ast.Call) and
            (script.call_qualname(value) or "").endswith("BatchSampler")):
        return None
    size = kwarg(value, "batch_size") or (value.args[1] if len(value.args) >= 2 else None)
    drop = kwarg(value, "drop_last") or (value.args[2] if len(value.args) >= 3 else None)
    if size is None:
        return None
    sampler = value.args[0] if value.args else kwarg(value, "sampler")
    shuffled = isinstance(sampler, ast.Call) and \
        (script.call_qualname(sampler) or "").endswith("RandomSampler")
    return size, drop if drop is not None else ast.Constant(False), shuffled, value


def _spread(script: Script, call: ast.Call, env: dict) -> Any:
    """The options a call spreads with ``**`` (a config dict, a dataclass field), merged;
    UNKNOWN when one of them is not fixed by the file."""
    out: dict = {}
    for k in call.keywords:
        if k.arg is not None:
            continue
        value = const_eval(k.value, env=env)
        if value is UNKNOWN:
            value = resolve(script, k.value)  # **self.cfg["loader"]
        if not isinstance(value, dict):
            return UNKNOWN
        out.update(value)
    return out


def _training_loader(script: Script, call: ast.Call, env: dict, spread: dict) -> bool:
    shuffle = kwarg(call, "shuffle")
    if shuffle is not None:
        value = const_eval(shuffle, env=env)
        if value is UNKNOWN:
            value = resolve(script, shuffle)  # shuffle=self.cfg.shuffle
        if value is not UNKNOWN:
            return bool(value)
    elif spread.get("shuffle", UNKNOWN) is not UNKNOWN:
        return bool(spread["shuffle"])
    return _feeds_training(script, call)


def _feeds_training(script: Script, loader: ast.Call) -> bool:
    p = parent(loader)
    names = set()
    if isinstance(p, ast.Assign):
        names = {t.id for t in p.targets if isinstance(t, ast.Name)}
    loops = {id(loop) for loop in training_loops(script)}
    for node in script.nodes:
        if isinstance(node, (ast.For, ast.AsyncFor)) and id(node) in loops:
            it = {n.id for n in ast.walk(node.iter) if isinstance(n, ast.Name)}
            if names & it or node.iter is loader:
                return True
    return False


def _one_value_norm(script: Script) -> str | None:
    """``BatchNorm1d`` when the model may use one (in this file or in the project file that
    builds it), ``BatchNorm2d after a pool to 1x1`` for that shape, else None."""
    if "BatchNorm1d" in script.source and not _lengths_only(script):
        return "BatchNorm1d"
    if _pooled_batchnorm2d(script) or _pooled_in_forward(script):
        return "BatchNorm2d after a pool to 1x1"
    from trainguard.lint.project import project_script

    for builder in script.model_builders.values():
        other = project_script(Path(builder.path))
        if other is not None and "BatchNorm1d" in other.source:
            return f"BatchNorm1d (in {Path(builder.path).name})"
        if other is not None and _pooled_batchnorm2d(other):  # (open-aff's global branch)
            return f"BatchNorm2d after a pool to 1x1 (in {Path(builder.path).name})"
    return None


_CONV1D = ("Conv1d", "ConvTranspose1d")


def _lengths_only(script: Script) -> bool:
    """Every ``BatchNorm1d`` of the file follows a ``Conv1d``: in an ``nn.Sequential`` right
    after it (``Conv1d(6, 32, 1), BatchNorm1d(32)``), or called on its output
    (``self.bn1(self.conv1(x))``), so it sees ``(N, C, L)``: L values per channel even for a
    batch of one (a point cloud's points, a signal's time steps)."""
    conv_attrs = {k for k, vs in script.assignments.items() for v in vs if isinstance(v, ast.Call)
                  and (script.call_qualname(v) or "").rsplit(".", 1)[-1] in _CONV1D}
    norms = [c for c in script.calls
             if (script.call_qualname(c) or "").rsplit(".", 1)[-1] == "BatchNorm1d"]
    if not norms:
        return False
    for norm in norms:
        seq = parent(norm)
        if isinstance(seq, ast.Call) and norm in seq.args and \
                (script.call_qualname(seq) or "").rsplit(".", 1)[-1] == "Sequential":
            i = seq.args.index(norm)
            before = seq.args[i - 1] if i else None
            if isinstance(before, ast.Call) and \
                    (script.call_qualname(before) or "").rsplit(".", 1)[-1] in _CONV1D:
                continue
            return False
        up = parent(norm)
        owner = next((k for k, vs in script.assignments.items() if any(v is norm for v in vs)),
                     None) if isinstance(up, ast.Assign) else None
        uses = [c for c in script.calls if owner and script.key(c.func) == owner]
        if not uses or not all(c.args and isinstance(c.args[0], ast.Call) and
                               script.key(c.args[0].func) in conv_attrs for c in uses):
            return False
    return True


def _pooled_batchnorm2d(script: Script) -> bool:
    """``nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(c, c, 1), nn.BatchNorm2d(c), ...)``:
    a BatchNorm2d that sees a 1x1 map (output size 1, or a bin of a pyramid whose sizes
    include 1)."""
    if "BatchNorm2d" not in script.source:
        return False
    for call in script.calls:
        if (script.call_qualname(call) or "").rsplit(".", 1)[-1] != "Sequential" and \
                not _sequential_init(script, call):
            continue
        pooled = False
        for layer, env in _layers(script, call, {}, 2):
            name = (script.call_qualname(layer) or "").rsplit(".", 1)[-1]
            if name in _POOL_TO_ONE and isinstance(layer, ast.Call) and layer.args:
                pooled = 1 in _possible_values(script, layer.args[0])
            elif name == "BatchNorm2d" and pooled:
                return True
            elif not _keeps_1x1(name, layer, env):
                pooled = False
    return False


def _keeps_1x1(name: str, layer: ast.AST, env: dict) -> bool:
    """A layer that leaves a 1x1 map 1x1: a 1x1 convolution, an activation."""
    return name in ("ReLU", "ReLU6", "SiLU", "Identity") or \
        name == "Conv2d" and _pointwise(layer, env)


def _pooled_in_forward(script: Script) -> bool:
    """A module's ``forward`` that hands a 1x1 map to a BatchNorm2d attribute, or to an
    ``nn.Sequential`` attribute that reaches one through 1x1 convolutions and activations: the
    map comes from a pool-to-1x1 attribute, or is shaped ``(N, C, 1, 1)`` by ``.view``/
    ``.reshape`` (a squeeze-and-excitation or channel-attention block, huaifeng1993/DFANet#9:
    ``y = self.fc(self.avgpool(x).view(n, c)).view(n, c, 1, 1)``, then ``self.conv(y)``)."""
    if "BatchNorm2d" not in script.source:
        return False
    for cls in script.classes.values():
        methods = {b.name: b for b in cls.body if isinstance(b, ast.FunctionDef)}
        init, forward = methods.get("__init__"), methods.get("forward")
        if init is None or forward is None:
            continue
        pools, norms = set(), set()
        for node in walk_local(init):
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and
                    isinstance(node.targets[0], ast.Attribute) and
                    isinstance(node.value, ast.Call)):
                continue
            name = (script.call_qualname(node.value) or "").rsplit(".", 1)[-1]
            attr = node.targets[0].attr
            if name in _POOL_TO_ONE and node.value.args and \
                    1 in _possible_values(script, node.value.args[0]):
                pools.add(attr)
            elif name == "BatchNorm2d" or name == "Sequential" and _norm_first(script, node.value):
                norms.add(attr)
        if not norms:
            continue
        flat = {node.targets[0].id for node in walk_local(forward)  # names of 1x1 maps
                if isinstance(node, ast.Assign) and len(node.targets) == 1 and
                isinstance(node.targets[0], ast.Name) and _one_by_one(node.value, pools)}
        for node in walk_local(forward):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    isinstance(node.func.value, ast.Name) and node.func.value.id == "self" and \
                    node.func.attr in norms and node.args and (
                        isinstance(node.args[0], ast.Name) and node.args[0].id in flat or
                        _one_by_one(node.args[0], pools)):
                return True
    return False


def _norm_first(script: Script, seq: ast.Call) -> bool:
    """``nn.Sequential(Conv2d(c, c, 1), BatchNorm2d(c), ...)``: a BatchNorm2d before any layer
    that is not a 1x1 convolution or an activation."""
    for layer, env in _layers(script, seq, {}, 2):
        name = (script.call_qualname(layer) or "").rsplit(".", 1)[-1]
        if name == "BatchNorm2d":
            return True
        if not _keeps_1x1(name, layer, env):
            return False
    return False


def _one_by_one(expr: ast.AST, pools: set[str]) -> bool:
    """``self.pool(x)`` of a pool-to-1x1 attribute, or ``t.view(n, c, 1, 1)`` /
    ``t.reshape(n, c, 1, 1)``."""
    if not isinstance(expr, ast.Call) or not isinstance(expr.func, ast.Attribute):
        return False
    f = expr.func
    if isinstance(f.value, ast.Name) and f.value.id == "self" and f.attr in pools:
        return True
    return f.attr in ("view", "reshape") and len(expr.args) == 4 and all(
        isinstance(a, ast.Constant) and a.value == 1 for a in expr.args[2:])


def _sequential_init(script: Script, call: ast.Call) -> bool:
    """``super().__init__(layer, ...)`` in a subclass of ``nn.Sequential`` (torchvision's
    ``ASPPPooling``): its arguments are the layers."""
    f = call.func
    if not (isinstance(f, ast.Attribute) and f.attr == "__init__" and
            isinstance(f.value, ast.Call) and isinstance(f.value.func, ast.Name) and
            f.value.func.id == "super" and call.args):
        return False
    cls = script.enclosing_class(call)
    return cls is not None and any((script.qualname(b) or "").endswith("Sequential")
                                   for b in cls.bases)


def _layers(script: Script, seq: ast.Call, env: dict,
            depth: int) -> Iterator[tuple[ast.AST, dict]]:
    """The layers of ``nn.Sequential(...)`` in order, each with the bindings its arguments
    are read under; a call of a factory of the file that returns a ``Sequential``
    (``conv_bn_relu(c, c, k=1)``) stands for that Sequential's layers, its parameters bound
    to the call's arguments (mmseg's ConvModule blocks)."""
    for layer in seq.args:
        func = script.callee(layer) if isinstance(layer, ast.Call) and depth > 0 else None
        built = _returned_sequential(script, func) if func is not None else None
        if built is None:
            yield layer, env
            continue
        names = [a.arg for a in func.args.posonlyargs + func.args.args]  # type: ignore[union-attr]
        inner = defaults(func)  # type: ignore[arg-type]
        inner.update(bind_arguments(names, layer))  # type: ignore[arg-type]
        # the caller's names are read where the caller wrote them
        inner = {k: v if not env else _bound_constant(v, env) for k, v in inner.items()}
        yield from _layers(script, built, inner, depth - 1)


def _returned_sequential(script: Script, func: ast.AST) -> ast.Call | None:
    """The ``nn.Sequential(...)`` call a function returns directly, when it has one return."""
    returns = [n for n in walk_local(func) if isinstance(n, ast.Return)]
    if len(returns) != 1 or not isinstance(returns[0].value, ast.Call):
        return None
    value = returns[0].value
    q = script.call_qualname(value) or ""
    return value if q.rsplit(".", 1)[-1] == "Sequential" else None


def _bound_constant(expr: ast.expr, env: dict) -> ast.expr:
    v = const_eval(expr, env=env)
    return expr if v is UNKNOWN else ast.Constant(v)


def _pointwise(conv: ast.AST, env: dict | None = None) -> bool:
    k = kwarg(conv, "kernel_size") if isinstance(conv, ast.Call) else None  # type: ignore
    if k is None and isinstance(conv, ast.Call) and len(conv.args) >= 3:
        k = conv.args[2]
    return const_eval(k, env=env or None) in (1, [1, 1])


def _possible_values(script: Script, expr: ast.AST) -> list:
    """The values ``expr`` may take: a constant, or a loop variable over a constant list
    (``for size in (1, 2, 3, 6)``)."""
    v = const_eval(expr)
    if v is not UNKNOWN:
        return [1] if v in (1, [1, 1]) else [v]
    if isinstance(expr, ast.Name):
        n = expr
        while (n := parent(n)) is not None:
            gens = n.generators if isinstance(n, (ast.ListComp, ast.GeneratorExp)) else \
                [n] if isinstance(n, (ast.For, ast.AsyncFor)) else []
            for g in gens:
                if isinstance(g.target, ast.Name) and g.target.id == expr.id:
                    values = const_eval(g.iter)
                    if values is UNKNOWN and isinstance(g.iter, ast.Name):
                        values = _parameter_values(script, g.iter)
                    return list(values) if isinstance(values, list) else []
    return []


def _parameter_values(script: Script, name: ast.Name, depth: int = 2) -> list | None:
    """Every value a parameter takes: its default, and what each call in the file passes
    (``PyramidPooling(width)`` keeps ``bins=(1, 2, 4)``), also through the caller's own
    parameter (``PyramidPooling(c, bins)`` in ``PSPNet.__init__``), an entry of a config
    dict spread into the call (``PSPNet(**cfg["arch"])``) or passed by the caller
    (``PSPNet(n, m["pool_sizes"])`` with ``m = cfg["model"]``); None when one is unknown."""
    func = script.enclosing_function(name)
    if func is None:
        return None
    params = [a.arg for a in func.args.posonlyargs + func.args.args]
    if name.id not in params:
        return None
    preset = defaults(func)
    cls = script.enclosing_class(func)
    callee = cls.name if cls is not None and func.name == "__init__" else func.name
    index = params.index(name.id) - (1 if cls is not None else 0)
    values: list = []
    passed = []
    for call in script.calls:
        if (dotted(call.func) or "").rsplit(".", 1)[-1] != callee:
            continue
        given = kwarg(call, name.id) or (call.args[index] if 0 <= index < len(call.args)
                                         else None)
        spread = [k.value for k in call.keywords if k.arg is None]
        if given is None and len(spread) == 1:  # PSPNet(**cfg["arch"])
            given = _dict_value(_literal(script, spread[0], 6), name.id)
            if given is None:
                return None
        if any(isinstance(a, ast.Starred) for a in call.args) or given is None and spread:
            return None
        passed.append(given)
    for given in passed + ([preset[name.id]] if name.id in preset and
                           (not passed or None in passed) else []):
        if given is None:
            continue
        v = const_eval(given)
        if v is UNKNOWN and isinstance(given, ast.Name) and depth > 0:
            v = _parameter_values(script, given, depth - 1)  # the caller's parameter
        elif v is UNKNOWN:
            v = resolve(script, given)  # the caller's m["pool_sizes"], m = cfg["model"]
            v = list(v) if isinstance(v, tuple) else v
        if not isinstance(v, list):
            return None
        values.extend(v)
    return values or None
