"""Where a loss's code can evaluate an op at a singular point of its derivative.

Used by TG405 once a gradient is already proven NaN/Inf while the loss was finite (or the first
non-finite loss comes from weights an earlier, unchecked step made NaN while its loss was finite),
and re-running the latest model call found no op at a singular point in it: the graph that held the
values is gone (backward freed it, and the step about to run writes NaN into the weights, so the
next cycle cannot show them), so the place is found in the source of the code that computed the loss
from the model's outputs. Its calls of ops whose derivative is infinite at a point their input can
reach are listed: ``torch.sqrt``/``x.sqrt()`` and ``rsqrt`` (at 0: a Euclidean distance of two equal
embeddings), ``acos``/``asin`` (at +-1: the angle of two equal unit vectors), ``x ** p``,
``torch.pow(x, p)`` and ``x.pow(p)`` with ``0 < p < 1`` (at 0: ``PowBackward0``); when none
is, ``log`` (at 0: ``log(1 - softmax(x))`` once a probability is exactly 1, its -inf left
out of the loss by ``nll_loss``'s pick but not out of the gradient). A call whose input is kept
off that point in the same expression (``+ eps``, ``.clamp(min=eps)``, a name with ``eps`` in it;
``1 - p`` is no guard) is not listed. Calls whose input is one local value of one function, as is
or as its complement (``p.log()`` and ``(1 - p).log()``), make one place.
``torch.norm`` is not listed: PyTorch gives a norm of a zero vector a zero subgradient.

The code read: the ``forward`` of each user module class given (a loss module such as a triplet
loss), the function that called backward, and what they call one level down: a function held in
an attribute of the module (``self.distance_metric``), a method of its class (of a trainer's
class, for the function that called backward: ``self.get_loss(...)``), or a function defined at
the top of the same file. Python's and NumPy's ``sqrt`` are not tensor ops and never
listed.

Cost: only at that finding: one parse per file (cached, ``bounds.parse_file``).

Reference: ``torch.sqrt`` backward is ``grad / (2 * sqrt(x))``
(``tools/autograd/derivatives.yaml`` in PyTorch); "Why does my sqrt give nan gradients"
https://discuss.pytorch.org/t/57128.
"""

from __future__ import annotations

import ast
from types import FunctionType, MethodType
from typing import Any

from trainguard.sanitize.core.bounds import parse_file
from trainguard.sanitize.core.frames import Location, is_user_file, short_location
from trainguard.sanitize.core.source import function_at, function_node

__all__ = ["singular_sites", "one_singular_site", "one_log_product", "live_models"]

_AT_ZERO = frozenset({"sqrt", "sqrt_", "rsqrt", "rsqrt_"})
_AT_ONE = frozenset({"acos", "asin", "arccos", "arcsin", "acos_", "asin_"})
_LOGS = frozenset({"log", "log_", "log2", "log10"})  # at 0: listed when nothing else is
_SINGULAR = _AT_ZERO | _AT_ONE
_POWS = frozenset({"pow", "pow_", "float_power"})  # with an exponent in (0, 1): a root, at 0
_NOT_TENSOR = frozenset({"math", "np", "numpy", "cmath"})
_GUARDS = frozenset({"clamp", "clamp_min", "clip", "maximum", "max", "abs"})


def singular_sites(modules: list[Any], backward_at: Location | None,
                   logs: bool = False) -> list[tuple[Location, str]]:
    """``(location, op)`` of each call of an op with a singular derivative, unguarded, in the
    ``forward`` of the user modules given, in the function holding ``backward_at``, and in what
    they call one level down (see the module doc); in source order, each place once. With
    ``logs``, the calls of ``log`` instead (whose derivative is infinite at 0)."""
    return [(at, op) for at, (op, _) in _sites(modules, backward_at, logs)]


def _sites(modules: list[Any], backward_at: Location | None,
           logs: bool) -> list[tuple[Location, tuple[str, tuple | None]]]:
    """:func:`singular_sites` with each op's input value: ``(file, function's line, name)`` when
    the input is a local name or its complement (``p``, ``1 - p``), else None."""
    found: dict[Location, tuple[str, tuple | None]] = {}
    for module in modules:
        forward = getattr(type(module), "forward", None)
        code = getattr(forward, "__code__", None)
        if code is None or not is_user_file(code.co_filename):
            continue
        node = function_node(code)
        if node is None:
            continue
        _collect(node, code.co_filename, found, logs)
        for callee, path in _callees(node, code.co_filename, module):
            _collect(callee, path, found, logs)
    if backward_at is not None:
        node = function_at(backward_at[0], backward_at[1])
        if node is not None:
            _collect(node, backward_at[0], found, logs)
            for callee, path in _callees(node, backward_at[0], None):
                _collect(callee, path, found, logs)
    return sorted(found.items())


def one_singular_site(modules: list[Any], backward_at: Location | None
                      ) -> tuple[Location, str] | None:
    """``(location, clause for the finding)`` of the one site :func:`singular_sites` lists (when
    it lists none, of the one call of ``log``), or None when it lists none or several. Several
    sites whose input is one value of one function count as one, placed at the first: a
    Bernoulli log-likelihood's ``p.log()`` and ``(1 - p).log()`` leave ``p`` unguarded at both
    ends, and whichever end it reaches, one of them is the op (pytorch/pytorch#52248)."""
    sites = _sites(modules, backward_at, False) or _sites(modules, backward_at, True)
    values = {value for _, (_, value) in sites}
    if len(sites) == 1 or len(sites) > 1 and len(values) == 1 and None not in values:
        at, (op, value) = sites[0]
    else:
        return None
    if len(sites) == 1:
        return at, (f"; `{op}` at {short_location(at)} is the one op in the code computing the "
                    "loss whose derivative is infinite at a point its input can reach (sqrt or "
                    "log at 0, acos at +-1), with nothing keeping it off that point")
    name = value[2]  # type: ignore[index]
    rest = ", ".join(f"`{o}` at {short_location(a)}" for a, (o, _) in sites[1:])
    return at, (f"; `{op}` at {short_location(at)} and {rest} are the ops in the code computing "
                f"the loss whose derivative is infinite at a point their input can reach, all "
                f"taking `{name}` or its complement (`1 - {name}`), with nothing keeping "
                f"`{name}` off that point: whichever end it reaches, one of them is infinite")


def live_models(models: Any, skip: Any = frozenset()) -> list[Any]:
    """The models a watcher's model registry (weak references, ``models._refs``) still holds,
    but those whose id is in ``skip``."""
    return [m for m in (r() for r in list(models._refs.values()))
            if m is not None and id(m) not in skip]


def one_log_product(backward_at: Location | None) -> Location | None:
    """The one product in the loss's code (the function holding ``backward_at`` and what it
    calls one level down) with a log-probability factor: ``p * logp`` or ``exp(logp) * logp``
    with ``logp`` from ``log_softmax``/``log``, an entropy's ``0 * -inf`` once a probability is
    exactly 0 (a masked logit). None when there is none or several."""
    if backward_at is None:
        return None
    node = function_at(backward_at[0], backward_at[1])
    if node is None:
        return None
    found: list[Location] = []
    for fn, path in [(node, backward_at[0]), *_callees(node, backward_at[0], None)]:
        logs = {t.id for a in ast.walk(fn) if isinstance(a, ast.Assign) and _is_log(a.value)
                for t in a.targets if isinstance(t, ast.Name)}
        for sub in ast.walk(fn):
            if isinstance(sub, ast.BinOp) and isinstance(sub.op, ast.Mult) and any(
                    _is_log(side) or isinstance(side, ast.Name) and side.id in logs
                    for side in (sub.left, sub.right)):
                here = (path, sub.lineno, sub.col_offset + 1)
                if here not in found:
                    found.append(here)
    return found[0] if len(found) == 1 else None


def _is_log(expr: ast.AST) -> bool:
    """``F.log_softmax(x)``, ``torch.log(p)``, ``p.log()``, ``dist.log_prob(a)``."""
    return isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and \
        expr.func.attr in ("log_softmax", "log", "log_prob")


def _callees(node: ast.AST, path: str, module: Any) -> list[tuple[ast.AST, str]]:
    """``(function node, its file)`` for what ``node`` calls one level down: ``self.<attr>(...)``
    holding a user function or method (looked up on ``module``; without one, a method of the
    class defining ``node``), and ``name(...)`` defined at the top of ``path``."""
    tree = parse_file(path)
    top = {n.name: n for n in (tree.body if tree is not None else [])
           if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    # a method's own class (a trainer whose step() calls self.get_loss()), when not a module's
    methods = {} if module is not None else next(
        ({n.name: n for n in c.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
         for c in (tree.body if tree is not None else [])
         if isinstance(c, ast.ClassDef) and node in c.body), {})
    out: list[tuple[ast.AST, str]] = []
    for call in ast.walk(node):
        if not isinstance(call, ast.Call):
            continue
        func = call.func
        if isinstance(func, ast.Name) and func.id in top:
            out.append((top[func.id], path))
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
                and func.value.id == "self" and func.attr in methods:
            out.append((methods[func.attr], path))
        elif module is not None and isinstance(func, ast.Attribute) \
                and isinstance(func.value, ast.Name) and func.value.id == "self":
            held = getattr(module, func.attr, None) if func.attr in _own_names(module) else None
            if isinstance(held, MethodType):
                held = held.__func__
            code = getattr(held, "__code__", None) if isinstance(held, FunctionType) else None
            if code is not None and is_user_file(code.co_filename):
                callee = function_node(code)
                if callee is not None:
                    out.append((callee, code.co_filename))
    return out


def _own_names(module: Any) -> set[str]:
    """Names reachable on ``module`` without running a property: its instance attributes and
    the plain functions of its classes."""
    names = set(vars(module))
    for klass in type(module).__mro__:
        names |= {k for k, v in vars(klass).items() if isinstance(v, FunctionType)}
    return names


def _collect(node: ast.AST, path: str, found: dict[Location, tuple[str, tuple | None]],
             logs: bool) -> None:
    for sub in ast.walk(node):
        op = _singular_call(sub, _LOGS if logs else _SINGULAR)
        if op is not None:
            name = _value_name(sub)
            value = (path, getattr(node, "lineno", 0), name) if name is not None else None
            at = (path, sub.lineno, sub.col_offset + 1)  # type: ignore[attr-defined]
            found.setdefault(at, (op, value))


def _value_name(call: ast.AST) -> str | None:
    """The local name an op's input is, as is or as a complement (``p``, ``1 - p``), or None."""
    if isinstance(call, ast.BinOp):  # x ** 0.5
        arg: ast.AST | None = call.left
    elif isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute):
        torch_fn = isinstance(call.func.value, ast.Name) and call.func.value.id == "torch"
        arg = (call.args[0] if call.args else None) if torch_fn else call.func.value
    else:
        return None
    if isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Sub) \
            and isinstance(arg.left, ast.Constant):
        arg = arg.right  # (1 - p)
    return arg.id if isinstance(arg, ast.Name) else None


def _singular_call(node: ast.AST, ops: frozenset[str]) -> str | None:
    """The op's name when ``node`` calls one of ``ops`` (``** p`` with ``0 < p < 1`` when they
    are the ops with a singular derivative) on an unguarded input."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow) \
            and isinstance(node.right, ast.Constant) and isinstance(node.right.value, float) \
            and 0 < node.right.value < 1 and ops is _SINGULAR:
        return None if _guarded(node.left) else f"** {node.right.value}"
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        return None
    name = node.func.attr
    if name in _POWS and ops is _SINGULAR and _root_exponent(node) is not None:
        base = node.args[0] if _on_torch(node) and node.args else node.func.value
        return None if _guarded(base) else f"{name.rstrip('_')}(.., {_root_exponent(node)})"
    if name not in ops:
        return None
    receiver = node.func.value
    if isinstance(receiver, ast.Name) and receiver.id in _NOT_TENSOR:
        return None
    if isinstance(receiver, ast.Name) and receiver.id == "torch":
        arg = node.args[0] if node.args else None  # torch.sqrt(x)
    else:
        arg = receiver  # x.sqrt()
    return None if arg is None or _guarded(arg) else name.rstrip("_")


def _on_torch(call: ast.Call) -> bool:
    """Whether ``call`` is ``torch.<op>(x, ...)`` (else a method, ``x.<op>(...)``)."""
    receiver = call.func.value  # type: ignore[attr-defined]
    return isinstance(receiver, ast.Name) and receiver.id == "torch"


def _root_exponent(call: ast.Call) -> float | None:
    """The exponent of ``torch.pow(x, p)``/``x.pow(p)`` when a float constant in (0, 1): a
    root, whose derivative ``p * x ** (p - 1)`` is infinite at 0 (``PowBackward0``); else None."""
    receiver = call.func.value  # type: ignore[attr-defined]
    if isinstance(receiver, ast.Name) and receiver.id in _NOT_TENSOR:
        return None
    args = call.args[1:] if _on_torch(call) else call.args
    exponent = next((k.value for k in call.keywords if k.arg == "exponent"),
                    args[0] if args else None)
    if isinstance(exponent, ast.Constant) and isinstance(exponent.value, float) and \
            0 < exponent.value < 1:
        return exponent.value
    return None


def _guarded(expr: ast.AST) -> bool:
    """Whether ``expr`` keeps its value off a singular point: an added constant or
    ``eps``-named value (a subtracted one only when so named: ``1 - p`` reaches 0), or a clamp."""
    for sub in ast.walk(expr):
        if isinstance(sub, ast.BinOp) and isinstance(sub.op, (ast.Add, ast.Sub)) and any(
                isinstance(side, ast.Constant) and isinstance(sub.op, ast.Add)
                or "eps" in ast.unparse(side).lower() for side in (sub.left, sub.right)):
            return True
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) \
                and sub.func.attr in _GUARDS:
            return True
    return False
