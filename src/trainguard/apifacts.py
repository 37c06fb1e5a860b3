"""Facts about PyTorch's API that the linter, the sanitizer and the instruments share.

Standard library only: ``trainguard lint`` imports this module and never imports torch.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

__all__ = ["FUNCTIONAL_LOSSES", "ModeRule", "MODE_RULES", "MODE_CLASSES", "READS_TRAINING",
           "mode_rule", "named_as_logits", "activation_of_itself", "training_read_matters"]

FUNCTIONAL_LOSSES = (
    "cross_entropy", "nll_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits",
    "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div",
)
"""The ``torch.nn.functional`` losses trainguard knows by name
(https://pytorch.org/docs/stable/nn.functional.html#loss-functions): the sanitizer's functional
probe wraps them, and a call of one in the user's source counts as a loss."""


@dataclass(frozen=True)
class ModeRule:
    """``torch.nn`` modules whose forward depends on ``module.training`` when ``attribute`` says so.

    Attributes:
        classes: the ``torch.nn`` class names the rule covers.
        attribute: the constructor argument, kept as an attribute of the same name, that decides.
        default: its value when the constructor is not given it.
        positive: the module depends on the mode when the value is > 0 (a probability); else when
            it is true (a flag).
        effect: what ``training`` changes, with ``{value}`` for the attribute's value.
    """

    classes: tuple[str, ...]
    attribute: str
    default: float | bool
    positive: bool
    effect: str

    def depends(self, value: object) -> bool:
        """Whether a module with this attribute value behaves differently in train and eval."""
        if self.positive:
            return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
        return bool(value)


MODE_RULES = (
    # https://pytorch.org/docs/stable/generated/torch.nn.Dropout.html (and AlphaDropout,
    # FeatureAlphaDropout): elements are zeroed only in training
    ModeRule(("Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout",
              "FeatureAlphaDropout"), "p", 0.5, True,
             "drops elements with p={value} in train, identity in eval"),
    # https://pytorch.org/docs/stable/generated/torch.nn.BatchNorm2d.html: batch statistics and
    # running-stat updates in training, the running estimates in eval
    ModeRule(("BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm", "LazyBatchNorm1d",
              "LazyBatchNorm2d", "LazyBatchNorm3d"), "track_running_stats", True, False,
             "batch statistics + running-stat updates in train, running stats in eval"),
    # https://pytorch.org/docs/stable/generated/torch.nn.InstanceNorm2d.html: the same, only with
    # track_running_stats=True (off by default)
    ModeRule(("InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "LazyInstanceNorm1d",
              "LazyInstanceNorm2d", "LazyInstanceNorm3d"), "track_running_stats", False, False,
             "instance statistics + running-stat updates in train, running stats in eval"),
    # https://pytorch.org/docs/stable/generated/torch.nn.LSTM.html: dropout between layers,
    # "on the outputs of each LSTM layer except the last", in training only
    ModeRule(("RNN", "LSTM", "GRU"), "dropout", 0.0, True,
             "dropout p={value} between layers in train only"),
    # https://pytorch.org/docs/stable/generated/torch.nn.MultiheadAttention.html: dropout on the
    # attention weights, in training only
    ModeRule(("MultiheadAttention",), "dropout", 0.0, True,
             "attention dropout p={value} in train only"),
)
"""The ``torch.nn`` modules whose behaviour depends on train/eval mode, and when. One definition
for the linter (constructor calls), the sanitizer (live modules) and ``trainguard explain``."""

MODE_CLASSES = frozenset(name for rule in MODE_RULES for name in rule.classes)
"""Every ``torch.nn`` class name some rule covers."""

READS_TRAINING = "training"
"""The attribute a user-defined module's ``forward`` reads when its behaviour depends on the mode
(``if self.training: ...``): such a module counts as mode-dependent too (at run time: the name in
``type(module).forward.__code__.co_names``)."""


def mode_rule(class_name: str) -> ModeRule | None:
    """The rule for a ``torch.nn`` class name (``"LSTM"``), or None."""
    for rule in MODE_RULES:
        if class_name in rule.classes:
            return rule
    return None


def named_as_logits(name: str) -> bool:
    """The user's own name for a value says it holds logits (``y_logits``, ``pred_logit``).

    Where a sigmoid's or softmax's output reaches a loss that applies it again and other code
    reads it too, the name decides which line to change: a value the author calls logits was
    meant to be raw scores, so the activation that made it is the mistake (the model's sigmoid,
    as in https://github.com/avBuffer/UNet3plus_pth/issues/23); under any other name (a focal
    loss's ``probs``) the probabilities are wanted there and the loss call is what to change.
    """
    return "logit" in name.lower()


def activation_of_itself(value: ast.AST | None, name: str, *activations: str) -> bool:
    """``value``, assigned to ``name``, applies one of ``activations`` to ``name`` itself
    (``preds = torch.sigmoid(preds)``, ``x = x.sigmoid()``).

    The same test as :func:`named_as_logits`, read from the code instead of the name: the name
    held the raw scores until the activation rebound it, and the rest of the function has no other
    name for them, so code that hands the name to a loss applying the activation again meant the
    scores; the activation is what to change
    (https://github.com/itakurah/focal-loss-pytorch/pull/5).
    """
    if not isinstance(value, ast.Call) or not any(a in ast.unparse(value.func)
                                                   for a in activations):
        return False
    inner = value.args[0] if value.args else (
        value.func.value if isinstance(value.func, ast.Attribute) else None)
    return isinstance(inner, ast.Name) and inner.id == name


# calls that draw random numbers or keep statistics: what a mode switch changes in a module of
# the user's (a hand-written dropout, stochastic depth, noise injection, a running average)
_RANDOM_OR_STATE = re.compile(r"rand|drop|bernoulli|noise|normal|uniform|multinomial|perm|"
                              r"shuffle|sample|batch_norm|instance_norm|momentum|update|track")

# batch statistics, which a hand-written norm layer uses in training instead of running ones
_BATCH_STATISTICS = frozenset({"mean", "var", "std", "var_mean", "std_mean"})
_REDUCTION_DIMS = ("dim", "axis")


def training_read_matters(forward: ast.FunctionDef) -> bool:
    """Whether the ``self.training`` reads of a user module's ``forward`` make its numbers depend
    on the mode: a read passed on (``F.dropout(x, p, self.training)``) or kept in a value does;
    an ``if`` on it does when the code it selects (with the rest of the function after an early
    ``return``) draws random numbers, keeps statistics (a call named like ``rand``, ``dropout``,
    ``bernoulli``, ``batch_norm``, ``update``...), takes batch statistics (``mean``, ``var``,
    ``std``) or writes state (an in-place method, an assignment to ``self.<attr>``). An ``if
    self.training:`` that only picks what to return (a torchvision-style detector that returns
    its loss dict in training, its boxes in eval; an auxiliary head's output added in training)
    does not: train mode changes what it returns, not
    the numbers, and its submodules are judged by their own rules."""
    reads = [n for n in ast.walk(forward) if isinstance(n, ast.Attribute)
             and n.attr == READS_TRAINING and isinstance(n.value, ast.Name)
             and n.value.id == "self"]
    if not reads:
        return False
    tests: dict[int, list[ast.AST]] = {}  # id(read) -> the code its `if` selects
    for node in ast.walk(forward):
        if isinstance(node, (ast.If, ast.IfExp)):
            governed = _selected(forward, node)
            for n in ast.walk(node.test):
                tests.setdefault(id(n), governed)
    for read in reads:
        governed = tests.get(id(read))
        if governed is None or any(_random_or_state(n) for part in governed
                                   for n in ast.walk(part)):
            return True
    return False


def _selected(forward: ast.FunctionDef, node: ast.AST) -> list[ast.AST]:
    """What an ``if`` (statement or expression) selects: both branches, and for a statement
    whose branch returns, the statements after it in the same block."""
    if isinstance(node, ast.IfExp):
        return [node.body, node.orelse]
    parts: list[ast.AST] = [*node.body, *node.orelse]
    if any(isinstance(n, ast.Return) for part in parts for n in ast.walk(part)):
        for block in ast.walk(forward):
            for field in ("body", "orelse", "finalbody"):
                stmts = getattr(block, field, None)
                if isinstance(stmts, list) and node in stmts:
                    parts += stmts[stmts.index(node) + 1:]
    return parts


def _random_or_state(node: ast.AST) -> bool:
    if isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else \
            func.id if isinstance(func, ast.Name) else ""
        return bool(_RANDOM_OR_STATE.search(name.lower())) or \
            (name in _BATCH_STATISTICS and _over_the_batch(node)) or \
            (name.endswith("_") and not name.startswith("_"))
    if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return any(isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
                   and n.value.id == "self" for t in targets for n in ast.walk(t))
    return False


def _over_the_batch(call: ast.Call) -> bool:
    """Whether a ``mean``/``var``/``std`` call may take per-feature statistics over the batch, as
    a hand-written BatchNorm does in training (``x.mean(0)``, ``x.var((0, 2, 3))``,
    ``torch.mean(x, dim=self.dims)``): its dims hold 0 or are not written as numbers. A call with
    no dims reduces the whole tensor to one number, as a loss or a metric does
    (``(1 - torch.cos(err)).mean()`` in the loss dict a detector returns in training, as
    efficientdet-pytorch's ``DetBenchTrain`` does: rwightman/efficientdet-pytorch#30); one over
    other numbered dims (``x.mean(-1)``, ``err.pow(2).mean(1)``) takes each sample's own
    statistics, which do not depend on the batch."""
    module = call.func.value if isinstance(call.func, ast.Attribute) else None
    function = not isinstance(call.func, ast.Attribute) or (
        isinstance(module, ast.Name) and module.id in ("torch", "np", "numpy"))
    dims = [k.value for k in call.keywords if k.arg in _REDUCTION_DIMS]
    if not dims:
        positional = call.args[1:] if function else call.args
        dims = positional[:1]
    if not dims or (isinstance(dims[0], ast.Constant) and dims[0].value is None):
        return False
    dim = dims[0]
    items = dim.elts if isinstance(dim, (ast.Tuple, ast.List)) else [dim]
    numbers = [_int_literal(n) for n in items]
    return any(n is None or n == 0 for n in numbers)


def _int_literal(node: ast.AST) -> int | None:
    """``node``'s value where it is an integer written out (``1``, ``-1``), else None."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _int_literal(node.operand)
        return None if inner is None else -inner
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None

