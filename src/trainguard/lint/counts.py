"""Sample counts that simulated data and split sizes carry, for :mod:`trainguard.lint.shapes`.

- NumPy's random draws (module functions, or methods of a ``np.random.default_rng()`` or
  ``RandomState`` generator): ``np.random.dirichlet(alpha, size=N)``, ``np.random.gamma(k, t,
  size=(N, G))`` hold ``N`` rows; a draw without ``size`` (``np.random.poisson(rate)``) has the
  shape of its array parameter ("If size is None (default), a single value is returned if lam
  is a scalar. Otherwise, np.array(lam).size samples are drawn":
  https://numpy.org/doc/stable/reference/random/generated/numpy.random.poisson.html).
- A matrix product ``a @ b`` has the rows of ``a``.
- An integer computed from lengths: ``n_train = int(cfg.train_frac * len(counts))``, with
  ``len(x)`` the samples of ``x`` and the rest by :func:`trainguard.lint.consts.resolve`, so a
  split written by hand (``x[perm[:n_train]]``) has a known size.

``samples`` is :func:`trainguard.lint.shapes.samples`, handed in (the two modules read each
other). Anything not fixed by the file is unknown.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

from trainguard.lint.astutil import kwarg
from trainguard.lint.consts import UNKNOWN, const_eval, resolve
from trainguard.lint.script import Script

__all__ = ["drawn_rows", "count", "value_at"]

Samples = Callable[..., Any]
_DRAWS = {"normal", "uniform", "gamma", "beta", "dirichlet", "poisson", "binomial",
          "exponential", "lognormal", "laplace", "multinomial", "negative_binomial",
          "standard_normal", "multivariate_normal", "random", "random_sample", "choice",
          "randint", "integers", "rand", "randn"}
_ARRAY_PARAM = {"poisson", "binomial", "normal", "uniform", "exponential", "gamma", "beta",
                "lognormal", "laplace", "negative_binomial"}
_INT_FUNCS = {"int": int, "round": round, "min": min, "max": max, "abs": abs}


def value_at(script: Script, expr: ast.AST | None, env: dict | None) -> Any:
    """``expr``'s value with ``env``'s names read where the caller wrote them, through the
    caller's own configuration (``size=cfg.n_cells`` with ``cfg`` passed down from a
    dataclass instance)."""
    if expr is None:
        return UNKNOWN
    v = const_eval(expr, env=env or None)
    if v is not UNKNOWN:
        return v
    if not env:
        return resolve(script, expr)
    bound: dict[str, ast.expr] = {}
    for name in {n.id for n in ast.walk(expr) if isinstance(n, ast.Name)} & set(env):
        value = const_eval(env[name])
        if value is UNKNOWN:
            value = resolve(script, env[name])
        if value is UNKNOWN:
            return UNKNOWN
        bound[name] = ast.Constant(value)
    return const_eval(expr, env=bound) if bound else UNKNOWN


def drawn_rows(script: Script, call: ast.Call, env: dict | None, samples: Samples,
               depth: int) -> Any:
    """The rows of a NumPy random draw (see the module), or UNKNOWN."""
    q = script.call_qualname(call) or ""
    name = q.rsplit(".", 1)[-1]
    if name not in _DRAWS or \
            not q.startswith("numpy.random.") and not _generator_method(script, call):
        return UNKNOWN
    size = kwarg(call, "size")
    if size is not None:
        v = value_at(script, size, env)
        if isinstance(v, list) and v and isinstance(v[0], int):
            return v[0]
        return v if isinstance(v, int) and not isinstance(v, bool) else UNKNOWN
    if name in ("rand", "randn") and call.args and not call.keywords:
        v = value_at(script, call.args[0], env)  # rng.rand(n, 3): n rows
        return v if isinstance(v, int) and not isinstance(v, bool) else UNKNOWN
    if name in _ARRAY_PARAM and call.args and len(call.args) <= 2:
        return samples(script, call.args[0], env, depth=depth)  # poisson(rate): rate's shape
    return UNKNOWN


def _generator_method(script: Script, call: ast.Call) -> bool:
    """``rng.normal(...)`` with ``rng = np.random.default_rng(0)`` (or a ``RandomState``)."""
    from trainguard.lint.shapes import binding

    f = call.func
    if not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)):
        return False
    bound = binding(f.value)
    if bound is None or bound[1] is not None or not isinstance(bound[0].value, ast.Call):  # type: ignore[attr-defined]
        return False
    return (script.call_qualname(bound[0].value) or "") in (  # type: ignore[attr-defined]
        "numpy.random.default_rng", "numpy.random.RandomState", "numpy.random.Generator")


def count(script: Script, expr: ast.AST | None, env: dict | None, samples: Samples,
          depth: int = 6) -> Any:
    """An integer the file computes from constants, its configuration and lengths of data
    (``int(0.9 * len(counts))``), or UNKNOWN."""
    if expr is None or depth <= 0:
        return UNKNOWN
    v = value_at(script, expr, env)
    if v is not UNKNOWN:
        return v
    d = depth - 1
    if isinstance(expr, ast.Name):
        if env and expr.id in env:
            return count(script, env[expr.id], None, samples, d)
        from trainguard.lint.shapes import binding

        bound = binding(expr)
        if bound is None or bound[1] is not None:
            return UNKNOWN
        return count(script, bound[0].value, None, samples, d)  # type: ignore[attr-defined]
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and not expr.keywords:
        if expr.func.id == "len" and len(expr.args) == 1:
            return samples(script, expr.args[0], env, depth=d)
        if expr.func.id in _INT_FUNCS and expr.args:
            args = [count(script, a, env, samples, d) for a in expr.args]
            if all(isinstance(a, (int, float)) and not isinstance(a, bool) for a in args):
                return _INT_FUNCS[expr.func.id](*args)
        return UNKNOWN
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Mult, ast.Add, ast.Sub,
                                                            ast.FloorDiv)):
        a = count(script, expr.left, env, samples, d)
        b = count(script, expr.right, env, samples, d)
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (a, b)):
            return UNKNOWN
        if isinstance(expr.op, ast.Mult):
            return a * b
        if isinstance(expr.op, ast.Add):
            return a + b
        if isinstance(expr.op, ast.Sub):
            return a - b
        return a // b if b else UNKNOWN
    return UNKNOWN
