"""Where a finding about a helper function belongs, read from the helper's source.

Standard library only, shared by the linter and the sanitizer so that both layers place a
finding at the same line (TG102: a helper that leaves the model in eval mode; TG101: where the
missing ``model.eval()`` of an evaluation function goes).
"""

from __future__ import annotations

import ast

__all__ = ["MODE_CALLS", "body_statement", "initial_value", "return_line", "sets_modes_only",
           "setup_start", "stretch_apart"]

MODE_CALLS = frozenset(("eval", "train", "requires_grad_"))
"""The ``nn.Module`` methods that switch a module's mode."""


def sets_modes_only(func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether ``func`` does nothing but switch modules' modes (``def val_start(self):
    self.img_enc.eval(); self.txt_enc.eval()``, a callback's ``on_validation_begin`` calling
    ``model.eval()``, a loop of ``m.eval()`` over ``modules()``): a mode setter, whose caller
    chooses when the mode changes back."""
    loops = {id(n.iter) for n in ast.walk(func) if isinstance(n, (ast.For, ast.AsyncFor))}
    for stmt in func.body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue  # the docstring
        if isinstance(stmt, ast.Assert):
            continue  # (a check of the mode asked for: ``assert mode in ["train", "eval"]``)
        if not isinstance(stmt, (ast.Expr, ast.For, ast.AsyncFor, ast.If, ast.Pass)):
            return False
        for n in ast.walk(stmt):
            if isinstance(n, (ast.Return, ast.Assign, ast.AugAssign, ast.With, ast.While)):
                return False
            if isinstance(n, ast.Call) and id(n) not in loops and not (
                    isinstance(n.func, ast.Attribute) and n.func.attr in MODE_CALLS):
                return False
    return True


def return_line(func: ast.FunctionDef | ast.AsyncFunctionDef) -> int | None:
    """The line where ``func`` returns after its last statement: that ``return``, else the last
    line of its last statement (after which a call restoring what the function changed goes).
    None for an empty body."""
    if not func.body:
        return None
    last = func.body[-1]
    return last.lineno if isinstance(last, ast.Return) else (last.end_lineno or last.lineno)


_EMPTY_CALLS = frozenset(("list", "dict", "set", "tuple", "defaultdict", "Counter", "OrderedDict"))


def initial_value(value: ast.AST) -> bool:
    """A value an accumulator starts from: a constant, a container of constants (``[]``,
    ``(0, 0)``), or an empty container made by a call (``defaultdict(list)``)."""
    if isinstance(value, ast.Constant):
        return True
    if isinstance(value, ast.UnaryOp):
        return initial_value(value.operand)
    if isinstance(value, (ast.List, ast.Tuple, ast.Set)):
        return all(initial_value(e) for e in value.elts)
    if isinstance(value, ast.Dict):
        return not value.keys
    if isinstance(value, ast.Call):
        f = value.func
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
        return name in _EMPTY_CALLS and all(
            isinstance(a, (ast.Name, ast.Attribute, ast.Constant)) for a in value.args)
    return False


def body_statement(body: list[ast.stmt], line: int) -> ast.stmt | None:
    """The statement of ``body`` (a function's or a module's) whose lines hold ``line``: the
    loop or ``with`` block a call on that line runs in; None when none does."""
    return next((s for s in body if s.lineno <= line <= (s.end_lineno or s.lineno)), None)


def stretch_apart(body: list[ast.stmt], line: int, avoid: int
                  ) -> tuple[list[ast.stmt], ast.stmt | None]:
    """The outermost statement of ``body``, or of a block nested in it, that holds ``line`` but
    not ``avoid``, with the body it is in: inside an epoch loop whose batches train (``avoid``,
    a ``backward`` or ``train()`` line), the ``with torch.no_grad():`` block of its validation;
    past an ``if`` that holds both, or one entered that way, into its branch. ``None`` when
    ``line`` is in a header (the ``for`` line itself), or when the innermost loop entered runs a
    backward of its own outside its nested loops: a test batch scored inside the training step's
    iteration, whose own line is the place."""
    stmt, entered, in_step = body_statement(body, line), False, False
    while stmt is not None and (body_statement([stmt], avoid) is not None
                                or entered and isinstance(stmt, ast.If)):
        blocks = [getattr(stmt, f, None) or [] for f in ("body", "orelse", "finalbody")]
        blocks += [h.body for h in getattr(stmt, "handlers", ())]
        body = next((b for b in blocks if body_statement(b, line) is not None), [])
        if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
            in_step = _backward_in(body)
        stmt, entered = body_statement(body, line), True
    return body, None if in_step else stmt


def _backward_in(nodes: list[ast.AST]) -> bool:
    """Whether ``nodes`` call ``backward`` outside the loops nested in them."""
    for node in nodes:
        if isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            continue
        func = node.func if isinstance(node, ast.Call) else None
        if isinstance(func, ast.Attribute) and func.attr in ("backward", "manual_backward"):
            return True
        if _backward_in(list(ast.iter_child_nodes(node))):
            return True
    return False


_NO_CALL = (ast.Name, ast.Attribute, ast.Subscript, ast.Slice, ast.Tuple, ast.Constant,
            ast.expr_context)


def _prepares(prev: ast.stmt, keep: set[str]) -> bool:
    """``prev`` only prepares what a stretch reads, binding none of ``keep``: an accumulator
    (:func:`initial_value`), inputs unpacked or aliased with no call (``src, tgt = data``,
    ``batches = self.val_batches``), or a fresh object built with no arguments (``meter =
    LossMeter()``)."""
    if isinstance(prev, ast.Expr):
        return isinstance(prev.value, ast.Constant)  # a docstring
    if not isinstance(prev, (ast.Assign, ast.AnnAssign)) or prev.value is None:
        return False
    if initial_value(prev.value):
        return True
    targets = prev.targets if isinstance(prev, ast.Assign) else [prev.target]
    if any(isinstance(n, ast.Name) and n.id in keep for t in targets for n in ast.walk(t)):
        return False  # (it binds the model the stretch runs: the call goes after it)
    value = prev.value
    if isinstance(value, ast.Call):
        name = value.func.attr if isinstance(value.func, ast.Attribute) else \
            getattr(value.func, "id", "")
        return not value.args and not value.keywords and name[:1].isupper()
    return all(isinstance(n, _NO_CALL) for n in ast.walk(value))


def setup_start(body: list[ast.stmt], stmt: ast.stmt, *, models: tuple[str, ...] = ()
                ) -> ast.stmt:
    """The first of the statements right before ``stmt`` in ``body`` that only set up what it
    reads (``total, correct = 0, 0``, ``preds = []``, ``src, tgt = data``, ``meter =
    LossMeter()``, a docstring: :func:`_prepares`), else ``stmt``: a call meant for the
    stretch that ``stmt`` starts (an evaluation's missing ``model.eval()``) goes before its
    set-up, at the top of that stretch. A statement binding one of ``models``, or a name
    ``stmt`` calls (``model = trainer.model`` before ``model(x)``), stays before it."""
    if stmt not in body:
        return stmt
    keep = set(models) | {n.func.id for n in ast.walk(stmt)
                          if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    i = end = body.index(stmt)
    while i > 0 and _prepares(body[i - 1], keep):
        i -= 1
    while i < end and isinstance(body[i], ast.Expr):
        i += 1  # (not the docstring itself)
    return body[i]
