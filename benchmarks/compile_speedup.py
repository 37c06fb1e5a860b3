"""Speed-up of ``fit(compile=True)`` on CPU: a training step with the model's forward through
``torch.compile`` (inductor, default mode), as ``fit`` runs it, against the same step eager.

Models: the digits CNN of ``trainguard train`` (batch 32 of 1x8x8 images) and a small
transformer encoder classifier (2 layers, d_model 64, 4 heads, feed-forward 128, sequences of 32
tokens from a vocabulary of 1,000, batch 16). A step is zero_grad, forward, cross-entropy,
backward, AdamW step. After the first steps (which compile: their time is printed as the compile
cost), rounds alternate eager and compiled blocks of ``--steps`` steps; prints the median ms/step
of each, the ratio eager/compiled (the speed-up) and its range over the rounds.

    python benchmarks/compile_speedup.py [--rounds 7] [--steps 50] [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch import nn

from trainguard.models import build_model


class TinyTransformer(nn.Module):
    """Token embedding, learned positions, a TransformerEncoder, mean pooling, a linear head.

    Shape:
        - Input: ``(N, T)`` token ids, ``T <= 32``
        - Output: ``(N, 10)`` logits
    """

    def __init__(self, vocab: int = 1000, d_model: int = 64, classes: int = 10) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.pos = nn.Parameter(torch.zeros(1, 32, d_model))
        layer = nn.TransformerEncoderLayer(d_model, nhead=4, dim_feedforward=128, dropout=0.1,
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.head = nn.Linear(d_model, classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) + self.pos[:, : tokens.shape[1]]
        return self.head(self.encoder(x).mean(dim=1))


def _cases():
    g = torch.Generator().manual_seed(0)
    cnn_batch = (torch.randn(32, 1, 8, 8, generator=g), torch.randint(0, 10, (32,), generator=g))
    tok_batch = (torch.randint(0, 1000, (16, 32), generator=g),
                 torch.randint(0, 10, (16,), generator=g))
    return [("digits CNN", lambda: build_model("cnn", input_shape=(1, 8, 8), num_classes=10),
             cnn_batch),
            ("small transformer", TinyTransformer, tok_batch)]


def _stepper(model: nn.Module, forward, batch):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    inputs, targets = batch

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        loss_fn(forward(inputs), targets).backward()
        opt.step()
    return step


def _time(step, steps: int) -> float:
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - t0) * 1000 / steps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, CPU, threads: {args.threads}, rounds: {args.rounds} x "
          f"{args.steps} steps")
    for name, build, batch in _cases():
        torch.manual_seed(0)
        eager_model, compiled_model = build(), build()
        compiled_model.load_state_dict(eager_model.state_dict())
        eager = _stepper(eager_model, eager_model, batch)
        compiled = _stepper(compiled_model, torch.compile(compiled_model), batch)
        t0 = time.perf_counter()
        for _ in range(3):  # compiles forward and backward
            compiled()
        compile_s = time.perf_counter() - t0
        for _ in range(3):
            eager()
        times: dict[str, list[float]] = {"eager": [], "compiled": []}
        for r in range(args.rounds):
            order = [("eager", eager), ("compiled", compiled)]
            for label, step in (order if r % 2 == 0 else order[::-1]):
                times[label].append(_time(step, args.steps))
        ratios = [e / c for e, c in zip(times["eager"], times["compiled"])]
        print(f"{name}: eager {statistics.median(times['eager']):.2f} ms/step, compiled "
              f"{statistics.median(times['compiled']):.2f} ms/step; speed-up eager/compiled "
              f"median {statistics.median(ratios):.2f}x (min {min(ratios):.2f}, max "
              f"{max(ratios):.2f}); first 3 compiled steps (compiling) {compile_s:.1f} s",
              flush=True)


if __name__ == "__main__":
    main()
