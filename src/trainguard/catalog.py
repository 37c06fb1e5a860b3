"""The one table of finding codes, names and docs, read by the linter, the sanitizer and the docs.

Codes are stable: a code is never renumbered or reused; a retired code stays here marked retired.
Each entry's long-form docs live in ``docs/rules/<code>.md`` (What it does, Why is this bad,
Example, Use instead, References), which the wheel ships as ``trainguard/docs/rules/<code>.md``:
:func:`page` reads it, ``trainguard rule TG201`` prints it, and :attr:`Entry.help_uri` is its
published copy. This module imports nothing heavy: the linter uses it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

__all__ = ["Entry", "CATALOG", "lookup", "docs_path", "page"]

Layer = Literal["lint", "run"]


@dataclass(frozen=True, slots=True)
class Entry:
    """One pitfall.

    Attributes:
        code: stable code, e.g. ``"TG201"``.
        name: stable kebab-case name, e.g. ``"graph-kept-across-steps"``.
        summary: the pitfall in one line.
        why: why it matters, one sentence.
        fix: what to do instead, one sentence (a finding may give a more specific fix).
        static: the linter is expected to catch it.
        runtime: the sanitizer is expected to catch it.
        retired: the code is no longer emitted (kept so it is never reused).
    """

    code: str
    name: str
    summary: str
    why: str
    fix: str
    static: bool
    runtime: bool
    retired: bool = False

    @property
    def docs(self) -> str:
        """The command that prints this entry from the installed package."""
        return f"trainguard rule {self.code}"

    @property
    def help_uri(self) -> str | None:
        """The entry's published page (``[project.urls] Documentation``), or None if unset."""
        from trainguard.urls import rule_url

        return rule_url(self.code)

    @property
    def layers(self) -> tuple[str, ...]:
        """The layers expected to catch it: ``("lint", "run")``, ``("lint",)`` or ``("run",)``."""
        return tuple(name for name, on in (("lint", self.static), ("run", self.runtime)) if on)


def docs_path(code: str) -> str:
    """Where a code's docs entry lives in trainguard's repository, relative to its root."""
    return f"docs/rules/{code}.md"


def page(code_or_name: str) -> str:
    """The docs entry of a code or name as Markdown, read from the installed package.

    Example::

        from trainguard.catalog import page
        print(page("TG201"))   # or, in a shell: trainguard rule TG201

    Raises:
        KeyError: no such code or name.
        FileNotFoundError: the package was built without its rule pages (a broken install).
    """
    from importlib.resources import files

    code = lookup(code_or_name).code
    # an installed wheel: the copy made at build time (pyproject's force-include); a source
    # checkout or an editable install: the repository's docs/rules/ itself
    installed = files("trainguard").joinpath("docs", "rules", f"{code}.md")
    if installed.is_file():
        return installed.read_text(encoding="utf-8")
    checkout = Path(__file__).resolve().parents[2] / docs_path(code)
    if checkout.is_file():
        return checkout.read_text(encoding="utf-8")
    raise FileNotFoundError(f"{code}'s docs entry is not installed with trainguard "
                            f"({Path(__file__).parent}); reinstall trainguard")


_ENTRIES = [
    # TG0xx: trainguard itself
    Entry("TG001", "syntax-error",
          "a file could not be parsed",
          "trainguard cannot check a file it cannot parse, so the file was skipped.",
          "fix the syntax error; Python reports the same position", True, False),
    Entry("TG002", "check-failed",
          "a check raised internally; the user's run went on",
          "a check that fails internally sees nothing, so its pitfall may have gone unreported.",
          "report the message and traceback to trainguard; your run was not affected", True, True),
    # TG1xx: module mode and grad mode
    Entry("TG101", "eval-in-train-mode",
          "evaluation or inference runs while model.training is True",
          "Dropout still drops and BatchNorm uses batch statistics and updates its running stats, "
          "so metrics are noisy and differ from run to run.",
          "call model.eval() before evaluating and model.train() before training again", True, True),
    Entry("TG102", "train-in-eval-mode",
          "optimizer steps run after model.eval() without model.train()",
          "BatchNorm stops learning its statistics and Dropout stops regularizing for the rest of "
          "training.",
          "call model.train() at the start of every training epoch, after any evaluation",
          True, True),
    Entry("TG103", "eval-with-grad",
          "evaluation forwards run with grad enabled and no backward follows",
          "every forward records a graph and keeps its activations alive for nothing: slower, and "
          "memory can run out.",
          "wrap evaluation in `with torch.no_grad():` (or torch.inference_mode())", True, True),
    Entry("TG104", "grad-reenabled",
          "torch.enable_grad() or torch.set_grad_enabled(True) inside an evaluation region",
          "outputs inside it carry a grad_fn again and build graphs that evaluation never uses.",
          "remove the enable_grad/set_grad_enabled(True) from the evaluation code", True, True),
    Entry("TG105", "functional-dropout-ignores-mode",
          "F.dropout in forward without training=self.training",
          "F.dropout defaults to training=True, so dropout stays on after model.eval().",
          "pass training=self.training, or use an nn.Dropout module", True, True),
    # TG2xx: the autograd graph and memory
    Entry("TG201", "graph-kept-across-steps",
          "a tensor with a grad_fn is accumulated across iterations",
          "every iteration's graph and saved activations stay alive through the accumulator, so "
          "memory grows step after step.",
          "accumulate loss.item() or loss.detach() instead of the tensor", True, True),
    Entry("TG202", "backward-twice",
          "backward through a graph whose saved buffers were already freed",
          "the first backward frees the graph's saved tensors; the second cannot run.",
          "compute a fresh forward for each backward, or detach state carried between steps "
          "(e.g. an RNN hidden state)", False, True),
    Entry("TG203", "retain-graph-leak",
          "retain_graph=True on a step's last backward",
          "the step's saved activations outlive the step and pile up while anything still "
          "references the graph.",
          "drop retain_graph=True unless a second backward through the same graph follows",
          True, True),
    Entry("TG204", "backward-without-grad",
          "backward on a tensor that has no grad_fn",
          "nothing that requires grad reaches the tensor, so no gradient can be computed.",
          "build the loss with grad enabled from tensors that require grad (no no_grad, detach, "
          "argmax or integer casts on the way)", False, True),
    Entry("TG205", "gradient-cut",
          "parameters given to the optimizer never receive a gradient",
          "the path from the loss to these parameters was cut or never existed, so they never "
          "learn.",
          "remove the detach/.data/.item()/numpy round trip on the path, or leave the parameters "
          "out of the optimizer on purpose", True, True),
    Entry("TG206", "data-attribute",
          ".data used to read or write a tensor",
          "autograd does not see reads or writes through .data, so gradients can be silently wrong.",
          "use .detach() to read, and `with torch.no_grad():` for in-place writes", True, False),
    Entry("TG207", "inplace-on-saved",
          "an in-place op changed a tensor saved for backward",
          "backward needs the saved value; PyTorch raises when its version counter changed.",
          "use the out-of-place op (x = x + y, F.relu(x) instead of inplace=True), or clone() "
          "before modifying", False, True),
    # TG3xx: the optimizer step
    Entry("TG301", "grads-accumulate",
          "consecutive optimizer.step() calls without zeroing gradients in between",
          "each step uses the sum of all earlier gradients, which grows without bound.",
          "call optimizer.zero_grad(set_to_none=True) once per step", True, True),
    Entry("TG302", "zero-grad-before-step",
          "gradients are zeroed between backward() and step()",
          "the step sees zero (or no) gradients, so nothing learns.",
          "call zero_grad() before backward() or after step(), never between them", True, True),
    Entry("TG303", "step-missing",
          "backward runs but the optimizer never steps",
          "the parameters never change, so the model does not learn.",
          "call optimizer.step() after backward()", True, True),
    Entry("TG304", "params-not-in-optimizer",
          "trainable parameters the optimizer does not hold, or frozen ones it does",
          "parameters outside the optimizer never change although they receive gradients.",
          "build the optimizer after the model is final, from model.parameters(), or add a "
          "param group", False, True),
    Entry("TG305", "scheduler-before-optimizer",
          "lr_scheduler.step() before optimizer.step(), or an epoch scheduler stepped per batch",
          "the first learning rate of the schedule is skipped, or the schedule runs many times "
          "too fast.",
          "call scheduler.step() after optimizer.step(), once per epoch for epoch schedulers",
          True, True),
    Entry("TG306", "clip-before-unscale",
          "gradients clipped before scaler.unscale_(optimizer)",
          "with a GradScaler the gradients are still multiplied by the loss scale, so the "
          "clipping threshold is applied to the wrong numbers.",
          "call scaler.unscale_(optimizer) before clip_grad_norm_", True, True),
    # TG4xx: loss, labels and batches
    Entry("TG401", "softmax-before-cross-entropy",
          "softmax output fed to CrossEntropyLoss, which applies log_softmax itself",
          "the softmax is applied twice: gradients shrink and training stalls.",
          "pass the raw logits to the loss", True, True),
    Entry("TG402", "label-dtype",
          "class targets of the wrong dtype or range",
          "float class indices, out-of-range classes or unnormalized probabilities give errors "
          "or a wrong loss.",
          "give class indices as int64 in [0, C), or probabilities that sum to 1 per row",
          False, True),
    Entry("TG403", "loss-broadcast",
          "input and target shapes differ and broadcast in an elementwise loss",
          "(N, 1) against (N,) broadcasts to (N, N): the loss averages over every pair.",
          "make the shapes equal, e.g. output.squeeze(1) or target.unsqueeze(1)", False, True),
    Entry("TG404", "batchnorm-batch-of-one",
          "a training batch gives BatchNorm one value per channel",
          "batch statistics of one value are undefined; PyTorch raises, or the statistics are "
          "meaningless.",
          "use DataLoader(drop_last=True), a larger batch, or GroupNorm/LayerNorm", True, True),
    Entry("TG405", "non-finite-loss",
          "a loss or gradient becomes NaN or Inf",
          "one non-finite value spreads to every parameter on the next step.",
          "lower the learning rate, clip gradients, or check the inputs and the first module "
          "named", False, True),
    Entry("TG406", "sigmoid-before-bce-with-logits",
          "sigmoid output fed to BCEWithLogitsLoss",
          "the sigmoid is applied twice: predictions are squeezed into (0.5, 0.73) and gradients "
          "vanish.",
          "pass the raw logits to BCEWithLogitsLoss", True, True),
    # TG5xx: reproducibility and checkpoints
    Entry("TG501", "unseeded-run",
          "random state used without seeding torch, numpy and random",
          "each run starts from different weights and batches, so results cannot be reproduced.",
          "call trainguard.seed_everything(seed) (or seed random, numpy and torch) first",
          True, True),
    Entry("TG502", "nondeterministic-algorithms",
          "cudnn.benchmark=True or nondeterministic ops in a run that asks to be reproducible",
          "the kernel choice or atomic adds differ between runs, so seeded runs still differ.",
          "set torch.backends.cudnn.benchmark = False and "
          "torch.use_deterministic_algorithms(True)", True, True),
    Entry("TG503", "rng-copied-to-workers",
          "an RNG created in Dataset.__init__ is copied into every DataLoader worker",
          "every worker draws the same random numbers, so augmentations repeat across workers.",
          "create the RNG in worker_init_fn, or draw from torch's RNG, which DataLoader seeds per "
          "worker", True, True),
    Entry("TG504", "incomplete-checkpoint",
          "a resume checkpoint without optimizer, scheduler, scaler, RNG state or step",
          "resuming from it is not the same run: momentum, schedule and randomness start over.",
          "save optimizer.state_dict(), the scheduler, the scaler, RNG states and the step beside "
          "the model", True, True),
    Entry("TG505", "best-on-train-metric",
          "the best model is chosen on a training metric",
          "the training metric keeps improving while the model overfits; the saved 'best' is not.",
          "choose the best checkpoint on a validation metric", True, False),
    # TG6xx: distributed
    Entry("TG601", "sampler-epoch-not-set",
          "DistributedSampler without set_epoch(epoch)",
          "the shuffle is seeded by the epoch, so every epoch sees the same order.",
          "call sampler.set_epoch(epoch) at the start of every epoch", True, True),
    Entry("TG602", "save-on-every-rank",
          "every rank writes the same checkpoint or log file",
          "ranks overwrite each other's files, which can leave a corrupt file.",
          "write only on rank 0 (if dist.get_rank() == 0:)", True, True),
    Entry("TG603", "batchnorm-not-synced",
          "BatchNorm under DDP with small per-rank batches and no SyncBatchNorm",
          "each rank normalizes with statistics of its own small batch (a hint, not an error).",
          "convert with torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)", False, True),
    Entry("TG604", "replicas-diverged",
          "parameters differ across ranks",
          "the ranks no longer train one model.",
          "wrap the model in DistributedDataParallel and step every rank the same way",
          False, True),
    # TG7xx: security and environment
    Entry("TG701", "unsafe-torch-load",
          "torch.load with weights_only=False on a file that may come from elsewhere",
          "unpickling a checkpoint can run arbitrary code.",
          "pass weights_only=True (the default from torch 2.6)", True, True),
    Entry("TG702", "device-mismatch",
          "tensors on different devices meet in one op",
          "PyTorch cannot compute across devices and raises.",
          "move the model and every input to the same device (model.to(device), x.to(device))",
          False, True),
]

CATALOG: dict[str, Entry] = {e.code: e for e in _ENTRIES}
_BY_NAME: dict[str, Entry] = {e.name: e for e in _ENTRIES}


def lookup(code_or_name: str) -> Entry:
    """Return the entry for a code (``"TG201"``) or a name (``"graph-kept-across-steps"``).

    Raises:
        KeyError: no such code or name.
    """
    entry = CATALOG.get(code_or_name.upper()) or _BY_NAME.get(code_or_name)
    if entry is None:
        raise KeyError(f"unknown finding code or name: {code_or_name!r}")
    return entry
