"""Where a model call's output goes, read from the source of the function that made the call.

A runtime check sees that a model ran, not what the caller did with its output (``correct +=
(model(x).argmax(1) == y).sum().item()`` runs no hook). :func:`output_uses` reads it from the
caller's source, once per call site (``linecache``; no source: None), following the value through
attributes, methods, ``torch``/NumPy functions, operators, assignments and list ``append`` within
the function, until it reaches:

- a *metric*: an ``==``/``!=`` comparison with a non-constant (``pred == y``, ``.eq(y)``), a call
  whose name says metric (``accuracy_score``, ``metric.update``), a ``+=`` of a value that went
  through ``.item()``, or a ``return`` from a function named for evaluation (``validate``); never
  through a read of the value's shape, dtype or device (``out.shape == (n, vocab)`` in a smoke
  test), which no mode changes;
- a *loss*: a call whose name says loss (``criterion``, ``loss_fn``, ``F.cross_entropy``);
- nothing of either: the output is discarded, or goes to code whose name does not tell.

Whether the output is *used* at all: not when the call is a statement of its own (``model(x)``,
``model(x).mean()``, BatchNorm recalibration) or only assigned to names nothing reads.

It also says whether the call runs in a *training iteration*: the innermost loop around the call
(or the function) calls ``backward``, ``torch.autograd.grad`` or a ``step``, not only in loops that
end before the call (an epoch's validation after its batches), and no ``if``/``with`` block around
the call within it reads evaluation data without training (a test batch). A :class:`SiteReader`
caches the answer per ``(path, line, column)``: one dict look-up.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any

from trainguard.apifacts import FUNCTIONAL_LOSSES
from trainguard.sanitize.core.loops import after_the_passes
from trainguard.sanitize.core.source import SourceFile, trains

__all__ = ["SiteReader", "Uses", "dotted", "output_uses"]


@dataclass(frozen=True)
class Uses:
    """What the output of one call site feeds.

    Attributes:
        metric: how it feeds a metric (``"compared with `y` (==)"``), or None.
        loss: the loss call it feeds (``"criterion()"``), or None.
        trains: the call sits in a training iteration (its loop calls backward or a step).
        used: something reads the output (False: a statement of its own, or assigned to names
            nothing reads).
        partners: the names passed to that loss beside the output (``h1`` in ``loss(h1, z2)``).
    """

    metric: str | None
    loss: str | None
    trains: bool
    used: bool = True
    partners: tuple[str, ...] = ()


_METRIC = frozenset((
    "acc", "accuracy", "metric", "metrics", "score", "scores", "f1", "fbeta", "precision",
    "recall", "auc", "auroc", "roc", "iou", "miou", "jaccard", "dice", "correct", "confusion",
    "top1", "top5", "psnr", "ssim", "bleu", "rouge", "wer", "cer", "mae", "rmse",
))
_LOSS = frozenset(("loss", "losses", "criterion", "nll", "nllloss", "crossentropy"))
_EQ_CALLS = frozenset(("eq", "ne", "equal", "__eq__", "__ne__"))
_PASS_ROOTS = frozenset(("torch", "F", "nn", "np", "numpy", "math", "functional"))
_PASS_BUILTINS = frozenset((
    "max", "min", "sum", "abs", "round", "float", "int", "bool", "list", "tuple", "sorted",
    "reversed", "zip", "enumerate", "map", "iter", "next",
))
_CONTAINER_ADD = frozenset(("append", "extend", "add", "insert", "appendleft"))
_EVAL_FUNCTION = re.compile(
    r"(^|_)(eval|evaluate|evaluation|valid|validate|validation|val|test|testing|predict|"
    r"prediction|predictions|infer|inference|score|accuracy|metrics?)(_|$)")
_SHAPE_READS = frozenset(("shape", "size", "numel", "dim", "ndim", "ndimension", "dtype",
                          "device"))
_MAX_HOPS = 6


class SiteReader:
    """Answers :meth:`uses` for call sites, parsing each file once (one reader per watcher, so an
    edited script is read afresh on the next run)."""

    def __init__(self) -> None:
        self._sites: dict[tuple[str, int, int], Uses | None] = {}
        self._files: dict[str, SourceFile | None] = {}

    def uses(self, where: tuple[str, int, int] | None) -> Uses | None:
        """What the value of the call at ``where`` (``(path, line, 1-based column)``) feeds.

        Returns None when the source is not available or no call starts at that line and column.
        """
        if where is None:
            return None
        try:
            return self._sites[where]
        except KeyError:
            pass
        try:
            found = self._analyse(where)
        except (RecursionError, ValueError, SyntaxError):
            found = None
        self._sites[where] = found
        return found

    def _analyse(self, where: tuple[str, int, int]) -> Uses | None:
        path, line, col = where
        if path not in self._files:
            self._files[path] = SourceFile.load(path)
        file = self._files[path]
        if file is None:
            return None
        call = file.call_at(line, col - 1)
        if call is None:
            return None
        return _Flow(file, call).uses()


def output_uses(where: tuple[str, int, int] | None) -> Uses | None:
    """:meth:`SiteReader.uses` with a fresh reader (no caching across calls)."""
    return SiteReader().uses(where)


def dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _tokens(name: str) -> set[str]:
    return {t for t in re.split(r"[._]", name.lower()) if t}


def _short(node: ast.AST, limit: int = 30) -> str:
    text = ast.unparse(node)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _not_constant(nodes: list[ast.AST]) -> ast.AST | None:
    return next((node for node in nodes if not isinstance(node, ast.Constant)), None)


def _module_method(file: "SourceFile", scope: ast.AST) -> bool:
    """True when ``scope`` is a method of a model class (its class derives from something named
    ``...Module`` or defines ``forward``): ``ActorCritic.evaluate`` in PPO code returns values for
    the policy update, not a metric."""
    cls = file.parents.get(scope)
    if not isinstance(cls, ast.ClassDef):
        return False
    if any((dotted(b) or "").rsplit(".", 1)[-1].endswith("Module") for b in cls.bases):
        return True
    return any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == "forward"
               for n in cls.body)


class _Flow:
    """Follows the value of one call through its function."""

    def __init__(self, file: SourceFile, call: ast.Call) -> None:
        self.file = file
        self.call = call
        self.scope = file.scope(call)
        self.metric: str | None = None
        self.loss: str | None = None
        self.partners: tuple[str, ...] = ()
        self.seen: set[tuple[str, int]] = set()

    def uses(self) -> Uses:
        self._follow(self.call, 0)
        return Uses(self.metric, self.loss, self._trains(), not self._discarded(), self.partners)

    def _discarded(self) -> bool:
        """The value is dropped: the call is a statement of its own, only its shape is read
        (``self.features(torch.zeros(1, 3, 32, 32)).numel()`` to size a layer), or it is assigned
        only to names that nothing reads afterwards, or reads only for their shape."""
        return self._dropped(self.call, 0)

    def _dropped(self, node: ast.AST, hops: int) -> bool:
        parents = self.file.parents
        cur: ast.AST = node
        while True:
            p = parents.get(cur)
            if isinstance(p, ast.Attribute) and p.attr in _SHAPE_READS:
                return True
            if isinstance(p, ast.Call) and cur is not p.func and dotted(p.func) == "len":
                return True
            if isinstance(p, ast.Attribute) or (isinstance(p, ast.Call) and cur is p.func) or (
                    isinstance(p, ast.Subscript) and cur is p.value):
                cur = p
                continue
            break
        if isinstance(p, ast.Expr):
            return True
        if not isinstance(p, ast.Assign) or hops >= _MAX_HOPS:
            return False
        names: list[str] = []
        for target in p.targets:
            elts = target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]
            if not all(isinstance(e, ast.Name) for e in elts):
                return False
            names.extend(e.id for e in elts if e.id != "_")
        return all(self._dropped(read, hops + 1) for name in names for read in self._reads(name, p))

    def _trains(self) -> bool:
        region = self.file.loop(self.call, self.scope)
        if region is None and isinstance(self.scope, ast.Module):
            return False
        region = region or self.scope
        return (not self.file.in_eval_block(self.call, region) and trains(region)
                and not after_the_passes(self.file, region, self.call))

    def _follow(self, node: ast.AST, hops: int, scalar: bool = False) -> None:
        """Walk up from ``node`` (an expression holding the value) to where the value ends."""
        parents = self.file.parents
        cur = node
        while True:
            p = parents.get(cur)
            if p is None:
                return
            if isinstance(p, ast.Attribute):
                if p.attr in _SHAPE_READS:  # (a shape, dtype or device: the same in either mode)
                    return
                if p.attr == "item":
                    scalar = True
                cur = p
                continue
            if isinstance(p, ast.Call):
                if cur is p.func:
                    if isinstance(cur, ast.Attribute) and cur.attr in _EQ_CALLS:
                        other = _not_constant([*p.args, *(k.value for k in p.keywords)])
                        if other is not None:
                            self._note_metric(f"compared with `{_short(other)}` (.{cur.attr})")
                            return
                    cur = p
                    continue
                if not self._argument(p, cur, hops):
                    return
                cur = p
                continue
            if isinstance(p, ast.keyword):
                cur = p
                continue
            if isinstance(p, ast.Subscript):
                if cur is not p.value:
                    return
                cur = p
                continue
            if isinstance(p, (ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.IfExp, ast.Starred,
                              ast.ListComp, ast.GeneratorExp, ast.Await)):
                cur = p
                continue
            if isinstance(p, (ast.Tuple, ast.List)) and isinstance(p.ctx, ast.Load):
                cur = p
                continue
            if isinstance(p, ast.Compare):
                if any(isinstance(op, (ast.Eq, ast.NotEq)) for op in p.ops):
                    other = _not_constant([x for x in [p.left, *p.comparators] if x is not cur])
                    if other is not None:
                        self._note_metric(f"compared with `{_short(other)}` (==)")
                        return
                cur = p
                continue
            if isinstance(p, (ast.Assign, ast.AnnAssign, ast.NamedExpr)):
                targets = p.targets if isinstance(p, ast.Assign) else [p.target]
                for target in targets:
                    self._follow_target(target, p, hops)
                if isinstance(p, ast.NamedExpr):
                    cur = p
                    continue
                return
            if isinstance(p, ast.AugAssign):
                if cur is p.value:
                    if scalar:
                        self._note_metric(f"accumulated into `{_short(p.target)}` (+= .item())")
                        return
                    self._follow_target(p.target, p, hops)
                return
            if isinstance(p, (ast.Return, ast.Yield, ast.YieldFrom)):
                name = getattr(self.scope, "name", "")
                if (name and _EVAL_FUNCTION.search(name.lower())
                        and not _module_method(self.file, self.scope)):
                    self._note_metric(f"returned from {name}()")
                return
            return

    def _note_metric(self, how: str) -> None:
        if self.metric is None:
            self.metric = how

    def _note_loss(self, name: str, call: ast.Call, arg: ast.AST) -> bool:
        if self.loss is None:
            self.loss = f"{name}()"
            self.partners = tuple(a.id for a in call.args
                                  if isinstance(a, ast.Name) and a is not arg)
        return False

    def _argument(self, call: ast.Call, arg: ast.AST, hops: int) -> bool:
        """The value is an argument of ``call``: note a metric or loss, follow a container it is
        added to; True when the value flows on through the call's result."""
        name = dotted(call.func)
        if name is None:
            return False
        root, _, _ = name.partition(".")
        last = name.rsplit(".", 1)[-1]
        last_tokens = _tokens(last)
        if last in _EQ_CALLS and root in _PASS_ROOTS:
            others = [a for a in call.args if a is not arg]
            other = _not_constant(others)
            if other is not None:
                self._note_metric(f"compared with `{_short(other)}` ({name})")
            return False
        if last in FUNCTIONAL_LOSSES or last_tokens & _LOSS:
            return self._note_loss(name, call, arg)
        if last_tokens & _METRIC:
            self._note_metric(f"passed to {name}()")
            return False
        if root in _PASS_ROOTS or name in _PASS_BUILTINS:
            return True
        tokens = _tokens(name)
        if tokens & _METRIC:
            self._note_metric(f"passed to {name}()")
            return False
        if tokens & _LOSS:
            return self._note_loss(name, call, arg)
        if last in _CONTAINER_ADD and isinstance(call.func, ast.Attribute):
            statement = self._statement(call)
            if statement is not None:
                self._follow_target(call.func.value, statement, hops)
        return False

    def _statement(self, node: ast.AST) -> ast.stmt | None:
        cur: ast.AST | None = node
        while cur is not None and not isinstance(cur, ast.stmt):
            cur = self.file.parents.get(cur)
        return cur

    def _follow_target(self, target: ast.AST, statement: ast.AST, hops: int) -> None:
        """Follow every later read of the names (or attributes) that ``target`` binds."""
        if hops >= _MAX_HOPS:
            return
        if isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self._follow_target(element, statement, hops)
            return
        if isinstance(target, ast.Starred):
            self._follow_target(target.value, statement, hops)
            return
        if isinstance(target, ast.Subscript):
            self._follow_target(target.value, statement, hops)
            return
        if isinstance(target, ast.Name):
            if target.id == "_":
                return
            key = target.id
        elif isinstance(target, ast.Attribute):
            key = ast.unparse(target)
        else:
            return
        mark = (key, id(statement))
        if mark in self.seen:
            return
        self.seen.add(mark)
        for use in self._reads(key, statement):
            self._follow(use, hops + 1)

    def _reads(self, key: str, statement: ast.AST) -> list[ast.AST]:
        """Reads of ``key`` in the scope after ``statement``, or anywhere in the loop around it."""
        end = (getattr(statement, "end_lineno", 0) or 0, getattr(statement, "end_col_offset", 0) or 0)
        loop = self.file.loop(statement, self.scope)
        attr = key.rsplit(".", 1)[-1] if "." in key else None
        found = []
        for node in ast.walk(self.scope):
            if attr is None:
                if not (isinstance(node, ast.Name) and node.id == key
                        and isinstance(node.ctx, ast.Load)):
                    continue
            elif not (isinstance(node, ast.Attribute) and node.attr == attr
                      and isinstance(node.ctx, ast.Load) and ast.unparse(node) == key):
                continue
            if (node.lineno, node.col_offset) >= end or (loop is not None
                                                         and self._inside(node, loop)):
                found.append(node)
        found.sort(key=lambda n: (n.lineno, n.col_offset))
        return found

    def _inside(self, node: ast.AST, outer: ast.AST) -> bool:
        cur: Any = node
        while cur is not None:
            if cur is outer:
                return True
            cur = self.file.parents.get(cur)
        return False
