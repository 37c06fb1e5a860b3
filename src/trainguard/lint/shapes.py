"""How many samples a dataset holds, when the file fixes it.

``TensorDataset(torch.randn(N, 8), y)`` holds ``N`` samples; so do ``x[:N]``,
``torch.arange(N)``, ``np.random.rand(N, 3)``, a ``Dataset`` whose ``__len__`` returns ``N`` or
the length of what its ``__init__`` stores (:mod:`trainguard.lint.dataset_len`),
``torch.cat([a, b])`` (their sum), each part of ``random_split(ds, [a, b])`` (or of fractions,
split as torch splits them), ``Subset(ds, idx)``, ``torch.randperm(N)``, ``list(range(N))``,
``perm.tolist()``, ``x[idx]`` for
an index array ``idx`` of known length and ``TensorDataset(*arrays)`` (the first of a tuple), with ``N``
computed by :func:`trainguard.lint.consts.const_eval` (module constants, arithmetic, a
function's arguments at one call site). A function of the file or project returns what its
``return`` builds from the arguments of the call (``tiles, masks = make_tiles(N_TILES)``), and a
function's parameter holds what every call of the function in the file passes.
NumPy random draws, matrix products and split bounds computed from lengths
(:mod:`trainguard.lint.counts`) are read too. scikit-learn's bundled datasets have fixed sizes
(``load_digits()`` holds 1797 samples), its sample generators the ``n_samples`` they are
given or default to (``make_classification(n_samples=cfg["n"])``), and
``train_test_split`` splits as scikit-learn does: ``ceil(test_size * n)`` test samples, the rest
for training (https://scikit-learn.org/stable/modules/generated/sklearn.model_selection.train_test_split.html).
Anything else is unknown. Nothing is run.
"""

from __future__ import annotations

import ast
import math
from typing import Any

from trainguard.lint.astutil import dotted, kwarg, parent, walk_local
from trainguard.lint.consts import UNKNOWN, const_eval, resolve
from trainguard.lint.counts import count, drawn_rows, value_at
from trainguard.lint.dataset_len import class_length, own_attribute
from trainguard.lint.script import Script

__all__ = ["samples", "batches", "binding"]

_SIZED = {"randn", "rand", "zeros", "ones", "empty", "full", "randint"}
# Sample counts of scikit-learn's bundled (not downloaded) datasets, from its user guide
# (https://scikit-learn.org/stable/datasets/toy_dataset.html).
_SKLEARN_TOY = {"load_iris": 150, "load_diabetes": 442, "load_digits": 1797,
                "load_linnerud": 20, "load_wine": 178, "load_breast_cancer": 569}
# scikit-learn's sample generators: the ``n_samples`` default of each (its first parameter
# where ``True``); ``X`` and ``y`` both hold that many rows, and a sequence of counts (per
# cluster, or outer and inner circle) sums
# (https://scikit-learn.org/stable/datasets/sample_generators.html).
_SKLEARN_MADE = {"make_classification": 100, "make_regression": 100, "make_blobs": 100,
                 "make_moons": 100, "make_circles": 100, "make_friedman1": 100,
                 "make_friedman2": 100, "make_friedman3": 100, "make_hastie_10_2": 12000,
                 "make_low_rank_matrix": 100, "make_multilabel_classification": 100,
                 "make_s_curve": 100, "make_swiss_roll": 100, "make_sparse_uncorrelated": 100,
                 "make_gaussian_quantiles": 100}
_SKLEARN_MADE_KEYWORD_ONLY = {"make_gaussian_quantiles"}  # (its first parameter is the mean)
_SKLEARN_MADE_ONE_ARRAY = {"make_low_rank_matrix"}
# scikit-learn transformers map each row to a row (StandardScaler().fit(X).transform(X)).
_ROW_PRESERVING = {"transform", "fit_transform", "inverse_transform"}
_PER_SAMPLE = {"data", "images", "target", "frame"}
_WRAP = {"torch.tensor", "torch.as_tensor", "torch.from_numpy", "torch.Tensor",
         "torch.FloatTensor", "torch.LongTensor", "numpy.array", "numpy.asarray"}
# elementwise functions: as many rows out as in
_ELEMENTWISE = {"sin", "cos", "exp", "log", "sigmoid", "tanh", "abs", "sqrt", "sign", "round"}
_SAME_LENGTH = {"to", "float", "long", "double", "half", "int", "cuda", "cpu", "clone", "detach",
                "contiguous", "unsqueeze", "squeeze", "requires_grad_", "astype", "copy"}


def _class_attribute(script: Script,
                     attr: ast.Attribute) -> tuple[ast.Assign, int | None] | None:
    """``self.x`` read in a method other than ``__init__``: the one assignment the class ever
    makes to it, in ``__init__`` (``self.ds = Table(n)``; ``self.tr, self.va = split(n)``, with
    the element of the tuple it takes), else None."""
    if not (isinstance(attr.value, ast.Name) and attr.value.id == "self"):
        return None
    cls = script.enclosing_class(attr)
    func = script.enclosing_function(attr)
    if cls is None or func is None or getattr(func, "name", "") == "__init__":
        return None
    found: list[tuple[ast.AST, int | None]] = []
    for node in ast.walk(cls):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
        for t in targets:
            for i, e in enumerate(t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]):
                if isinstance(e, ast.Attribute) and e.attr == attr.attr and \
                        isinstance(e.value, ast.Name) and e.value.id == "self":
                    found.append((node, i if isinstance(t, (ast.Tuple, ast.List)) else None))
    if len(found) != 1 or not isinstance(found[0][0], ast.Assign) or \
            getattr(script.enclosing_function(found[0][0]), "name", "") != "__init__":
        return None
    return found[0]  # type: ignore[return-value]


def samples(script: Script, expr: ast.AST | None, env: dict[str, ast.expr] | None = None, *,
            depth: int = 22) -> Any:
    """The number of samples (first dimension) of ``expr``, or ``UNKNOWN``."""
    if expr is None or depth <= 0:
        return UNKNOWN
    d = depth - 1
    if isinstance(expr, ast.Name):
        if env and expr.id in env:
            return samples(script, env[expr.id], None, depth=d)
        bound = _binding(expr)
        if bound is None:
            return _param_samples(script, expr, None, d)
        stmt, index = bound
        if index is not None:
            return _part(script, stmt, index, d, env)  # type: ignore[arg-type]
        return samples(script, stmt.value, env, depth=d)  # type: ignore[attr-defined]
    if isinstance(expr, ast.Subscript) and not isinstance(expr.slice, (ast.Slice, ast.Tuple)):
        # x[idx] with an index array of known length (train_test_split's indices): as many
        # samples as indices; a scalar or a boolean mask has no known length here
        rows = samples(script, expr.slice, env, depth=d)
        return rows if isinstance(rows, int) else UNKNOWN
    if isinstance(expr, ast.Subscript) and isinstance(expr.slice, ast.Slice):
        sl = expr.slice
        if sl.step is not None:
            return UNKNOWN
        total = samples(script, expr.value, env, depth=d)
        lo = 0 if sl.lower is None else count(script, sl.lower, env, samples, d)
        hi = total if sl.upper is None else count(script, sl.upper, env, samples, d)
        if not all(isinstance(v, int) for v in (lo, hi)):
            return UNKNOWN
        if (lo < 0 or hi < 0) and not isinstance(total, int):
            return UNKNOWN
        n = total if isinstance(total, int) else max(lo, hi)
        return len(range(n)[lo:hi])
    if isinstance(expr, ast.Attribute) and env is not None and \
            (own := own_attribute(expr)) is not None:  # self.users, set in this __init__
        return samples(script, own, env, depth=d)
    if isinstance(expr, ast.Attribute) and \
            (kept := _class_attribute(script, expr)) is not None:  # self.ds, set in __init__
        stmt, index = kept
        return samples(script, stmt.value, None, depth=d) if index is None else \
            _part(script, stmt, index, d)
    if isinstance(expr, ast.Attribute) and expr.attr in _PER_SAMPLE:
        return samples(script, expr.value, env, depth=d)  # digits.images, bunch.target
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.MatMult):
        return samples(script, expr.left, env, depth=d)  # a @ b: the rows of a
    if isinstance(expr, ast.BinOp) or \
            isinstance(expr, ast.Compare) and len(expr.ops) == 1:
        sides = (expr.left, expr.right) if isinstance(expr, ast.BinOp) else \
            (expr.left, expr.comparators[0])
        for side in sides:  # x / 16.0, x > 0: elementwise, same samples
            n = samples(script, side, env, depth=d)
            if n is not UNKNOWN:
                return n
        return UNKNOWN
    if not isinstance(expr, ast.Call):
        return UNKNOWN
    q = script.call_qualname(expr) or ""
    name = q.rsplit(".", 1)[-1]
    f = expr.func
    if q.startswith("sklearn.datasets.") and name in _SKLEARN_TOY:
        return _SKLEARN_TOY[name]
    if q.startswith("sklearn.datasets.") and name in _SKLEARN_MADE and \
            name in _SKLEARN_MADE_ONE_ARRAY:  # (the others return a tuple: X, y)
        return _generated(script, expr, name, env)
    if q in _WRAP and expr.args:
        return samples(script, expr.args[0], env, depth=d)
    if name == "Subset" and len(expr.args) >= 2:  # Subset(ds, indices): one per index
        return samples(script, expr.args[1], env, depth=d)
    if (q in ("list", "sorted", "tuple") or f is not None and isinstance(f, ast.Attribute) and
            f.attr == "tolist") and (expr.args or isinstance(f, ast.Attribute)):
        inner = expr.args[0] if expr.args else f.value  # type: ignore[union-attr]
        return samples(script, inner, env, depth=d)  # list(range(N)), perm.tolist()
    if q == "range" and expr.args and not expr.keywords:
        vals = [const_eval(a, env=env) for a in expr.args]
        return len(range(*vals)) if all(isinstance(v, int) for v in vals) else UNKNOWN
    if q in ("torch.randperm", "numpy.random.permutation") and len(expr.args) == 1:
        v = count(script, expr.args[0], env, samples, d)  # permutation(len(x))
        if isinstance(v, int) and not isinstance(v, bool):
            return v
        return samples(script, expr.args[0], env, depth=d)  # permutation(array)
    if name == "TensorDataset" and expr.args:
        if isinstance(expr.args[0], ast.Starred):  # TensorDataset(*tensors)
            return _element(script, expr.args[0].value, 0, env, d)
        return samples(script, expr.args[0], env, depth=d)
    if isinstance(f, ast.Attribute) and f.attr in _SAME_LENGTH:
        return samples(script, f.value, env, depth=d)
    if q.startswith(("torch.", "numpy.")) and name in _ELEMENTWISE and expr.args:
        return samples(script, expr.args[0], env, depth=d)  # torch.sin(x)
    if isinstance(f, ast.Attribute) and f.attr in _ROW_PRESERVING and len(expr.args) == 1:
        return samples(script, expr.args[0], env, depth=d)  # scaler.transform(X): same rows
    if q.startswith(("torch.", "numpy.")) and name in _SIZED:
        size = kwarg(expr, "size")
        if size is None and name == "randint":  # randint(high, size) / randint(low, high, size)
            size = next((a for a in reversed(expr.args) if isinstance(a, (ast.Tuple, ast.List))),
                        None)
            if size is None and q.startswith("numpy.") and len(expr.args) == 3:
                size = expr.args[2]  # np.random.randint(0, k, n): n draws
        elif size is None and expr.args:
            size = expr.args[0]
        v = _fixed(script, size, env)
        if isinstance(v, list) and v and isinstance(v[0], int):
            return v[0]
        if isinstance(v, int) and not isinstance(v, bool) and \
                (name != "randint" or q.startswith("numpy.")):  # torch's size is a tuple
            return v
        return UNKNOWN
    if q in ("torch.arange", "numpy.arange") and len(expr.args) == 1 and \
            isinstance(expr.args[0], ast.Call) and dotted(expr.args[0].func) == "len" and \
            len(expr.args[0].args) == 1:  # np.arange(len(x)): one index per sample of x
        return samples(script, expr.args[0].args[0], env, depth=d)
    if q in ("torch.arange", "numpy.arange") and expr.args and not expr.keywords:
        vals = [const_eval(a, env=env) for a in expr.args]
        if all(isinstance(v, int) for v in vals):
            return len(range(*vals))
        return UNKNOWN
    if q in ("torch.cat", "numpy.concatenate") and expr.args and \
            isinstance(expr.args[0], (ast.List, ast.Tuple)) and \
            const_eval(kwarg(expr, "dim") or kwarg(expr, "axis") or ast.Constant(0)) == 0 and \
            len(expr.args) == 1:
        parts = [samples(script, e, env, depth=d) for e in expr.args[0].elts]
        return sum(parts) if all(isinstance(p, int) for p in parts) else UNKNOWN
    drawn = drawn_rows(script, expr, env, samples, d)
    if drawn is not UNKNOWN:
        return drawn
    returned = _returned(script, expr, None, d)
    if returned is not UNKNOWN:
        return returned
    return class_length(script, expr, d)


def _returned(script: Script, call: ast.Call, index: int | None, depth: int) -> Any:
    """The samples of what a function of the file or project returns (element ``index`` of a
    returned tuple), its parameters bound to this call's arguments and its defaults."""
    from trainguard.lint.callgraph import bind_arguments, defaults

    found = [t for t in script.targets(call) if not t.instance]
    if len(found) != 1 or isinstance(found[0].func, ast.Lambda):
        return UNKNOWN
    target = found[0]
    func = target.func
    rets = [r for r in walk_local(func) if isinstance(r, ast.Return) and r.value is not None]
    if len(rets) != 1:
        return UNKNOWN
    value = rets[0].value
    names = [a.arg for a in func.args.posonlyargs + func.args.args]
    if target.bound and names:
        names = names[1:]
    env: dict[str, ast.expr] = defaults(func)
    env.update(bind_arguments(names, call))
    if index is not None:
        if isinstance(value, ast.Call):  # return train_test_split(x, y, ...)
            return _call_part(target.script, value, index, env, depth - 1)
        if not isinstance(value, (ast.Tuple, ast.List)) or index >= len(value.elts):
            return UNKNOWN
        value = value.elts[index]
    return samples(target.script, value, env, depth=depth)


def _element(script: Script, expr: ast.AST, index: int, env: dict[str, ast.expr] | None,
             depth: int) -> Any:
    """The samples of element ``index`` of a tuple: a literal, what a function returns, or a
    name bound (through a parameter's call sites) to either."""
    if depth <= 0:
        return UNKNOWN
    if isinstance(expr, (ast.Tuple, ast.List)):
        return samples(script, expr.elts[index], env, depth=depth - 1) \
            if index < len(expr.elts) else UNKNOWN
    if isinstance(expr, ast.Call):
        return _returned(script, expr, index, depth - 1)
    if isinstance(expr, ast.Name):
        if env and expr.id in env:
            return _element(script, env[expr.id], index, None, depth - 1)
        bound = _binding(expr)
        if bound is not None and bound[1] is None:
            return _element(script, bound[0].value, index, None, depth - 1)  # type: ignore
        if bound is None:
            return _param_samples(script, expr, index, depth - 1)
    return UNKNOWN


def _param_samples(script: Script, name: ast.Name, index: int | None, depth: int) -> Any:
    """A function parameter's samples (of element ``index``), when every call of the function
    in the file passes arguments of the same known size (``fit(tensors(idx_tr))``)."""
    from trainguard.lint.callgraph import bind_arguments

    func = script.enclosing_function(name)
    if func is None or depth <= 0:
        return UNKNOWN
    params = [a.arg for a in func.args.posonlyargs + func.args.args]
    if name.id not in params:
        return UNKNOWN
    if script.enclosing_class(func) is not None and params[0] in ("self", "cls"):
        params = params[1:]
    sites = script.call_sites(func)[:8]
    found = set()
    for call in sites:
        bound = bind_arguments(params, call)
        if name.id not in bound:
            return UNKNOWN
        arg = bound[name.id]
        found.add(samples(script, arg, None, depth=depth) if index is None else
                  _element(script, arg, index, None, depth))
    return found.pop() if len(found) == 1 else UNKNOWN


def _binding(name: ast.Name) -> tuple[ast.stmt, int | None] | None:
    """The statement that gave ``name`` the value read here, and the element of a tuple it
    unpacks (None: the whole value): the one binding of its scope, or the last one above the
    read in a block that holds the read (``x = torch.tensor(x); x = (x - m) / s``). Item
    stores (``images[i] = ...``) change no tensor's length and are not bindings here."""
    from trainguard.lint.dataflow import scope_of

    scope = scope_of(name)
    while True:
        found = _bindings(scope, name.id)
        if found or isinstance(scope, ast.Module) or scope is name:
            break
        if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and \
                name.id in {a.arg for a in scope.args.posonlyargs + scope.args.args +
                            scope.args.kwonlyargs}:
            return None
        scope = scope_of(scope)
    if not found:  # an import, or no binding in reach
        return None
    if len(found) > 1:
        if any(stmt is None for stmt, _ in found):  # a loop target or ``+=`` among them
            return None
        here = (name.lineno, name.col_offset)
        above = [b for b in found if (b[0].lineno, b[0].col_offset) < here and
                 not any(a is b[0] for a in _ancestors(name))]
        if not above:
            return None
        last = max(above, key=lambda b: (b[0].lineno, b[0].col_offset))
        block = parent(last[0])
        if not any(a is block for a in _ancestors(name)) or \
                isinstance(block, (ast.If, ast.For, ast.AsyncFor, ast.While, ast.Try)) and \
                not any(a is block for a in _ancestors(name)):
            return None
        found = [last]
    stmt, index = found[0]
    return None if stmt is None else (stmt, index)


# augmented assignments that keep the rows of what they change (an in-place array op; on a list
# they raise), unlike ``+=`` and ``*=``, which grow a list
_SAME_ROWS_OPS = (ast.Sub, ast.Div, ast.FloorDiv, ast.Pow, ast.Mod)


def _bindings(scope: ast.AST, name: str) -> list | None:
    """(statement, tuple index or None) per binding of ``name`` in ``scope``; None when one is
    not an assignment (a loop target, ``+=``, ``global``)."""
    found: list = []
    for node in walk_local(scope):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name) and t.id == name:
                    found.append((node, None))
                elif isinstance(t, (ast.Tuple, ast.List)) and any(
                        isinstance(e, ast.Name) and e.id == name for e in ast.walk(t)):
                    flat = [e.id if isinstance(e, ast.Name) else None for e in t.elts]
                    found.append((node, flat.index(name)) if name in flat else (None, None))
        elif isinstance(node, ast.AugAssign) and isinstance(node.op, _SAME_ROWS_OPS):
            continue  # ``depths /= depths.sum(1, keepdims=True)``: in place, same rows
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and \
                isinstance(node.target, ast.Name) and node.target.id == name:
            found.append((None, None))  # (``x[:, 2] += 1`` is an item store: no binding)
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension, ast.NamedExpr)) and any(
                isinstance(e, ast.Name) and e.id == name for e in ast.walk(node.target)):
            found.append((None, None))
        elif isinstance(node, ast.withitem) and node.optional_vars is not None and any(
                isinstance(e, ast.Name) and e.id == name for e in ast.walk(node.optional_vars)):
            found.append((None, None))
        elif isinstance(node, (ast.Global, ast.Nonlocal)) and name in node.names:
            return [(None, None)]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and \
                node.name == name:
            found.append((None, None))
    return found


binding = _binding


def _ancestors(node: ast.AST) -> list[ast.AST]:
    out, n = [], node
    while (n := parent(n)) is not None:
        out.append(n)
    return out


def _fixed(script: Script, node: ast.expr | None, env: dict[str, ast.expr] | None) -> Any:
    """The value the file fixes for ``node``, a size or count: a constant, or a name, config
    entry or argument that holds one (``torch.randn(self.cfg["n"], 8)``,
    ``make_split(args.train_size)`` running ``randn(n, d)``)."""
    v = const_eval(node, env=env)
    if v is UNKNOWN and not env and node is not None:
        v = resolve(script, node)
    elif v is UNKNOWN and node is not None and not isinstance(node, (ast.Tuple, ast.List)):
        v = value_at(script, node, env)
    return v


def _generated(script: Script, call: ast.Call, name: str,
               env: dict[str, ast.expr] | None) -> Any:
    """The rows of what a scikit-learn sample generator returns (``make_classification(
    n_samples=cfg["n_samples"])``): its ``n_samples``, written or by default."""
    n = kwarg(call, "n_samples")
    if n is None and call.args and name not in _SKLEARN_MADE_KEYWORD_ONLY:
        n = call.args[0]
    if any(isinstance(a, ast.Starred) for a in call.args) or \
            n is None and any(k.arg is None for k in call.keywords):
        return UNKNOWN  # (n_samples may come in through the spread)
    v = _SKLEARN_MADE[name] if n is None else _fixed(script, n, env)
    if isinstance(v, (list, tuple)) and v and all(type(x) is int for x in v):
        return sum(v)  # make_blobs(n_samples=[60, 40]): per cluster
    return v if type(v) is int else UNKNOWN


def _part(script: Script, node: ast.Assign, index: int, depth: int,
          env: dict | None = None) -> Any:
    """Element ``index`` of a tuple assignment: ``a, b = random_split(ds, [900, 125])``,
    ``x_tr, x_te, y_tr, y_te = train_test_split(x, y)``, ``x, y = load_digits(return_X_y=True)``,
    ``images, masks = make_tiles(64)``, ``a, b = 97, 23``."""
    value = node.value
    if isinstance(value, (ast.Tuple, ast.List)):
        return samples(script, value.elts[index], env, depth=depth) \
            if index < len(value.elts) else UNKNOWN  # (``tr, va = p[:n], p[n:]``, n bound)
    if not isinstance(value, ast.Call):
        return UNKNOWN
    return _call_part(script, value, index, None, depth)


def _call_part(script: Script, value: ast.Call, index: int, env: dict | None,
               depth: int) -> Any:
    q = script.call_qualname(value) or ""
    if q.endswith("train_test_split"):
        return _train_test_part(script, value, index, env, depth)
    if q.startswith("sklearn.datasets.") and q.rsplit(".", 1)[-1] in _SKLEARN_TOY:
        return _SKLEARN_TOY[q.rsplit(".", 1)[-1]]
    if q.startswith("sklearn.datasets.") and q.rsplit(".", 1)[-1] in _SKLEARN_MADE:
        return _generated(script, value, q.rsplit(".", 1)[-1], env) if index < 2 else UNKNOWN
    if q.endswith("random_split"):
        lengths = value.args[1] if len(value.args) > 1 else kwarg(value, "lengths")
        v = const_eval(lengths, env=env)
        if isinstance(v, list) and index < len(v) and all(isinstance(x, int) for x in v):
            return v[index]
        if isinstance(v, list) and index < len(v) and v and \
                all(isinstance(x, float) for x in v) and abs(sum(v) - 1) < 1e-6:
            return _fraction_part(samples(script, value.args[0] if value.args else
                                          kwarg(value, "dataset"), env, depth=depth),
                                  v, index)
        return UNKNOWN
    return _returned(script, value, index, depth)


def _fraction_part(n: Any, fractions: list[float], index: int) -> Any:
    """Part ``index`` of ``random_split(ds, [0.9, 0.1])`` over ``n`` samples, as torch
    splits: ``floor(n * f)`` each, then the remainder one by one to the first parts
    (https://pytorch.org/docs/stable/data.html#torch.utils.data.random_split)."""
    if not isinstance(n, int):
        return UNKNOWN
    parts = [math.floor(n * f) for f in fractions]
    for i in range(n - sum(parts)):
        parts[i % len(parts)] += 1
    return parts[index]


def _train_test_part(script: Script, call: ast.Call, index: int, env: dict | None,
                     depth: int) -> Any:
    """Part ``index`` of ``a_train, a_test, b_train, b_test = train_test_split(a, b, ...)``."""
    arrays = [a for a in call.args if not isinstance(a, ast.Starred)]
    if not arrays or len(arrays) != len(call.args):
        return UNKNOWN
    n = samples(script, arrays[0], env, depth=depth)
    test, train = kwarg(call, "test_size"), kwarg(call, "train_size")
    test_v = 0.25 if test is None and train is None else \
        None if test is None else const_eval(test, env=env)
    train_v = None if train is None else const_eval(train, env=env)
    if not isinstance(n, int) or test_v is UNKNOWN or train_v is UNKNOWN:
        return UNKNOWN
    n_test = None if test_v is None else \
        math.ceil(test_v * n) if isinstance(test_v, float) else test_v
    n_train = None if train_v is None else \
        math.floor(train_v * n) if isinstance(train_v, float) else train_v
    if n_train is None and isinstance(n_test, int):
        n_train = n - n_test
    if n_test is None and isinstance(n_train, int):
        n_test = n - n_train
    if not (isinstance(n_train, int) and isinstance(n_test, int)):
        return UNKNOWN
    return n_train if index % 2 == 0 else n_test


def batches(script: Script, loader: ast.AST) -> Any:
    """Batches per epoch of a ``DataLoader`` the file builds with sizes it fixes:
    ``ceil(N / batch_size)``, or ``N // batch_size`` with ``drop_last=True``; else UNKNOWN."""
    if isinstance(loader, ast.Name):
        bound = _binding(loader)
        if bound is None or bound[1] is not None:
            return UNKNOWN
        loader = bound[0].value  # type: ignore[attr-defined]
    if not (isinstance(loader, ast.Call) and
            (script.call_qualname(loader) or "").endswith("DataLoader")) or \
            kwarg(loader, "batch_sampler") is not None or kwarg(loader, "sampler") is not None:
        return UNKNOWN
    dataset = loader.args[0] if loader.args else kwarg(loader, "dataset")
    size_node = kwarg(loader, "batch_size") or (loader.args[1] if len(loader.args) > 1 else None)
    size = 1 if size_node is None else const_eval(size_node)
    n = samples(script, dataset)
    drop = kwarg(loader, "drop_last")
    drop_v = False if drop is None else const_eval(drop)
    if not (isinstance(n, int) and isinstance(size, int) and size > 0 and
            isinstance(drop_v, bool)):
        return UNKNOWN
    return n // size if drop_v else -(-n // size)
