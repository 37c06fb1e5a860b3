"""What a module does differently in train and eval mode, and which of its parameters train.

``nn.Module.train()``/``eval()`` only flip ``training`` flags; the modules that read them are listed
in the ``Module.eval`` docs (https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.eval):
Dropout zeroes elements only in training
(https://pytorch.org/docs/stable/generated/torch.nn.Dropout.html); BatchNorm normalizes with batch
statistics and updates its running estimates in training, and uses the running estimates in eval
(https://pytorch.org/docs/stable/generated/torch.nn.BatchNorm2d.html); InstanceNorm does the same
only with ``track_running_stats=True``; RNN/LSTM/GRU apply their ``dropout`` between layers only in
training; MultiheadAttention applies its attention ``dropout`` only in training. The one
definition of these is ``trainguard.apifacts.MODE_RULES``, with user modules whose ``forward``
reads ``self.training``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from torch import nn

from trainguard.apifacts import ModeRule
from trainguard.sanitize.core.modes import depends_on_mode, rule_of

__all__ = ["ModeEntry", "ModuleReport", "explain_module"]


@dataclass
class ModeEntry:
    """One submodule whose behaviour depends on ``training``."""

    name: str
    type: str
    training: bool
    effect: str  # what training=True/False changes for this module


@dataclass
class ModuleReport:
    """``explain(module)``: mode-dependent submodules and parameter counts.

    Attributes:
        type: the module's class name.
        training: the module's own ``training`` flag.
        mode_dependent: every submodule that behaves differently in train and eval.
        mixed: names of mode-dependent submodules whose flag differs from the root's (a BatchNorm
            frozen on purpose with ``bn.eval()`` shows here; so does a forgotten ``train()``).
        trainable_params / frozen_params: element counts of parameters with and without
            ``requires_grad``; ``frozen_names`` lists the frozen tensors.
    """

    type: str
    training: bool
    mode_dependent: list[ModeEntry] = field(default_factory=list)
    mixed: list[str] = field(default_factory=list)
    trainable_params: int = 0
    frozen_params: int = 0
    trainable_tensors: int = 0
    frozen_names: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        mode = "train" if self.training else "eval"
        lines = [f"{self.type} in {mode} mode (training={self.training})",
                 f"  parameters: {self.trainable_params:,} trainable in {self.trainable_tensors} "
                 f"tensors, {self.frozen_params:,} frozen in {len(self.frozen_names)} tensors"]
        if self.frozen_names:
            shown = ", ".join(self.frozen_names[:8])
            more = f" and {len(self.frozen_names) - 8} more" if len(self.frozen_names) > 8 else ""
            lines.append(f"  frozen: {shown}{more}")
        if not self.mode_dependent:
            lines.append("  no mode-dependent submodules: train() and eval() give the same outputs")
        else:
            lines.append(f"  mode-dependent submodules ({len(self.mode_dependent)}):")
            for entry in self.mode_dependent:
                flag = "train" if entry.training else "eval "
                lines.append(f"    {flag}  {entry.name or '(root)'}  {entry.type}: {entry.effect}")
        if self.mixed:
            lines.append(f"  note: {', '.join(self.mixed)} in {'eval' if self.training else 'train'}"
                         f" mode while the model is in {mode} mode (fine if frozen on purpose)")
        return "\n".join(lines)


def _effect(module: nn.Module) -> str | None:
    """What ``training`` changes for ``module`` (the rules of ``trainguard.apifacts``, as the
    sanitizer applies them), or None when it behaves the same in both modes."""
    if not depends_on_mode(module):
        return None
    rule = rule_of(module)
    if isinstance(rule, ModeRule):
        return rule.effect.format(value=getattr(module, rule.attribute, rule.default))
    return "its forward reads self.training"


def explain_module(module: nn.Module) -> ModuleReport:
    """Build the :class:`ModuleReport` of ``module`` (reads flags only; runs nothing)."""
    report = ModuleReport(type=type(module).__name__, training=module.training)
    for name, sub in module.named_modules():
        effect = _effect(sub)
        if effect is None:
            continue
        report.mode_dependent.append(ModeEntry(name, type(sub).__name__, sub.training, effect))
        if sub.training != module.training:
            report.mixed.append(name or "(root)")
    for name, param in module.named_parameters():
        if param.requires_grad:
            report.trainable_params += param.numel()
            report.trainable_tensors += 1
        else:
            report.frozen_params += param.numel()
            report.frozen_names.append(name)
    return report

