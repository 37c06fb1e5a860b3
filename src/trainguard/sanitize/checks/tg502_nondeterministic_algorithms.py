"""TG502 nondeterministic-algorithms: a run that asks to be reproducible lets cuDNN or CUDA pick
nondeterministic algorithms.

What it watches: the seeding calls and determinism switches (``on_repro``: which call first asked
for a reproducible run, and the user's line that set ``torch.backends.cudnn.benchmark = True``),
and at optimizer steps 1, 2, 4, 8, ... and at the end of the run the flags themselves
(``torch.backends.cudnn.benchmark``/``deterministic``,
``torch.are_deterministic_algorithms_enabled()``) and the device and module types of the models
the run has called. It reads flags; it never sets one (calling ``use_deterministic_algorithms``
would change which kernels run, and so the numbers).

When it fires (once each):

- ``cudnn.benchmark`` is True in a run that asks for deterministic results
  (``use_deterministic_algorithms(True)``, ``cudnn.deterministic = True``, a non-default
  ``set_deterministic_debug_mode``) or is seeded so that it repeats (torch and numpy or
  ``random`` seeded with a value; braindecode/braindecode#360): cuDNN times
  several convolution algorithms for each new input shape and keeps the fastest, and the choice can
  differ between runs (it also overrides ``cudnn.deterministic = True``, pytorch/pytorch#6351).
  Reported at the line that set it (else at the first ask). It fires on a CPU-only run as well,
  where the flag has no effect, because the script asks for it: the same script run on a GPU is
  not reproducible; the message says which case was seen.
- a model the run called has its parameters on CUDA and contains modules whose CUDA kernels are
  nondeterministic (``use_deterministic_algorithms`` docs): convolutions while neither
  ``cudnn.deterministic`` nor deterministic algorithms are on; pooling/padding/upsampling/
  ``EmbeddingBag`` backward kernels (atomicAdd) while deterministic algorithms are off. Reported at
  the first ask, naming the module types found.

Silent on: runs that neither ask for deterministic results nor seed torch and another
generator (``benchmark = True`` for speed, unseeded or with torch alone seeded); the CUDA kernel
report needs an ask for deterministic kernels;
``cudnn.enabled = False``; runs where
benchmark is True only inside a block that ends before any step, or is set by the user's line
after the run's last optimizer step (a timing phase before or after training); CUDA models made
only of layers with deterministic kernels (``Linear``, ``Embedding``, normalization, activations);
runs with ``use_deterministic_algorithms(True)`` (and ``cudnn.deterministic`` for convolutions).

Cost: at optimizer steps 1, 2, 4, 8, ... and at exit, one pass over the models' modules (only while
a determinism flag is set).

Reference: PyTorch's reproducibility notes, "CUDA convolution benchmarking" and "Avoiding
nondeterministic algorithms" (https://pytorch.org/docs/stable/notes/randomness.html);
``torch.use_deterministic_algorithms``
(https://pytorch.org/docs/stable/generated/torch.use_deterministic_algorithms.html);
pytorch/pytorch#6351 and #45053.
"""

from __future__ import annotations

import itertools
from typing import Any

from trainguard.sanitize.core.check import Check
from trainguard.sanitize.core.seeding import SEEDS, asks_determinism, call_text, fixes_seed
from trainguard.sanitize.core.frames import Location, short_location, user_location

# Module types whose CUDA kernels are nondeterministic (torch.use_deterministic_algorithms docs).
_CONV = ("Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d")
_ATOMIC = ("ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d", "ReflectionPad1d",
           "ReflectionPad2d", "ReflectionPad3d", "MaxPool3d", "AvgPool3d", "AdaptiveAvgPool2d",
           "AdaptiveAvgPool3d", "AdaptiveMaxPool2d", "FractionalMaxPool2d", "FractionalMaxPool3d",
           "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d", "EmbeddingBag", "Upsample")
_INTERPOLATING = ("linear", "bilinear", "bicubic", "trilinear")


class NondeterministicAlgorithms(Check):
    code = "TG502"

    def __init__(self, bus: Any) -> None:
        super().__init__(bus)
        self.asked_at: Location | None = None
        self.asked_by = ""
        self.benchmark_at: Location | None = None
        self.benchmark_step = 0  # optimizer steps done when the user's line set it
        self.seeded: set[str] = set()  # generators seeded with a fixed seed so far
        self.seeded_at: Location | None = None  # where torch and another one were seeded
        self.seeded_by = ""
        self.done: set[str] = set()
        self.next_step = 1  # looked at steps 1, 2, 4, 8, ... (the first checked one from each)

    def on_repro(self, name: str, value: Any) -> None:
        if name == "cudnn.benchmark":
            self.benchmark_at = user_location() if value else None
            self.benchmark_step = self.state.step
        elif self.asked_at is None and asks_determinism(name, value):
            self.asked_at = user_location()
            self.asked_by = call_text(name, value)
        elif name in SEEDS and self.seeded_at is None:
            if not fixes_seed(name, value):
                self.seeded.discard(SEEDS[name])  # reseeded from the OS
                return
            self.seeded.add(SEEDS[name])
            if "torch" in self.seeded and len(self.seeded) > 1:  # every generator: a repeat
                self.seeded_at = user_location()
                self.seeded_by = f"it seeds {', '.join(sorted(self.seeded))}: " \
                                 f"{call_text(name, value)}"

    def on_step(self, optimizer: Any) -> None:
        step = self.state.step
        if step >= self.next_step:  # 1, 2, 4, 8, ... or the first checked step after one
            self.next_step = 1 << step.bit_length()
            self._check_benchmark()
            self._check_cuda(training=True)

    def on_exit(self) -> None:
        if self.benchmark_at is None or not 0 < self.state.step == self.benchmark_step:
            self._check_benchmark()  # (else: set after the run's last step, which it never ran)
        self._check_cuda(training=self.state.step > 0)

    def _check_benchmark(self) -> None:
        import torch

        cudnn = torch.backends.cudnn
        asked_at, asked_by = (self.asked_at, self.asked_by) if self.asked_at else \
            (self.seeded_at, self.seeded_by)
        if "benchmark" in self.done or asked_at is None or not cudnn.benchmark \
                or not cudnn.enabled:
            return
        self.done.add("benchmark")
        cuda = any(_on_cuda(m) for m in self.state.models)
        seen = ("this run's model is on CUDA" if cuda else
                "this run's models are not on CUDA, so the flag changes nothing here, but it will "
                "when the script runs on a GPU")
        where = self.benchmark_at or asked_at
        ask = f"{asked_by} here" if where == asked_at else \
            f"{asked_by} at line {asked_at[1]}" if where[0] == asked_at[0] else \
            f"{asked_by} at {short_location(asked_at)}"
        self.report(
            f"torch.backends.cudnn.benchmark is True in a run that asks to be reproducible ({ask}): "
            "cuDNN times several convolution algorithms for each new input shape and keeps the "
            f"fastest, which can differ between runs, so results differ even with the same seed "
            f"({seen})",
            fix="set torch.backends.cudnn.benchmark = False (and cudnn.deterministic = True) "
                "when the run must be reproducible",
            where=where)

    def _check_cuda(self, *, training: bool) -> None:
        import torch

        if "cuda" in self.done or self.asked_at is None:
            return
        algorithms = torch.are_deterministic_algorithms_enabled()
        cudnn_det = torch.backends.cudnn.deterministic
        if algorithms and cudnn_det:
            return
        found: dict[str, None] = {}
        for model in self.state.models:
            if not _on_cuda(model):
                continue
            for module in model.modules():
                kind = type(module).__name__
                if kind in _CONV and not (cudnn_det or algorithms):
                    found[kind] = None
                elif (training and not algorithms and kind in _ATOMIC
                      and (kind != "Upsample" or getattr(module, "mode", "") in _INTERPOLATING)):
                    found[kind] = None
        if not found:
            return
        self.done.add("cuda")
        flags = [f"torch.use_deterministic_algorithms is {'on' if algorithms else 'off'}",
                 f"cudnn.deterministic is {cudnn_det}"]
        self.report(
            f"this run asks to be reproducible ({self.asked_by} here) but runs "
            f"{', '.join(found)} on CUDA while {' and '.join(flags)}: their CUDA kernels "
            "(cuDNN's algorithm choice, atomicAdd in backward) can give different results on "
            "every run",
            fix="call torch.use_deterministic_algorithms(True) and set "
                "torch.backends.cudnn.deterministic = True (and CUBLAS_WORKSPACE_CONFIG=:4096:8) "
                "at the start of the run, or accept run-to-run differences and drop the seed's "
                "promise",
            where=self.asked_at)


def _on_cuda(model: Any) -> bool:
    """True when the model's first parameter (or buffer) lives on a CUDA device."""
    for tensor in itertools.chain(itertools.islice(model.parameters(), 1),
                                  itertools.islice(model.buffers(), 1)):
        return tensor.device.type == "cuda"
    return False
