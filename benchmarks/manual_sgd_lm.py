"""What ``trainguard run`` costs on an LSTM language model trained by hand, without an optimizer.

The script it times has the shape of pytorch/examples' word_language_model
(https://github.com/pytorch/examples/blob/main/word_language_model/main.py): a word-level corpus
read from text files into a dictionary, the token stream laid out in ``batch_size`` columns, an
embedding - LSTM - linear model with dropout, truncated backpropagation through time (the hidden
state detached before each batch), ``clip_grad_norm_`` and the update ``p.data.add_(p.grad,
alpha=-lr)`` with no ``torch.optim`` optimizer, a validation pass in ``eval()`` under
``torch.no_grad()`` after each epoch, the learning rate divided by 4 when validation stops
improving, and the best model saved with ``torch.save``. Its text is generated here (a seeded
Zipf-like draw over ``--vocab`` words), so the run needs no download.

The script runs as ``python SCRIPT`` and as ``python -m trainguard run SCRIPT``, alternately,
``--pairs`` times (plain first in even pairs, watched first in odd ones, so drift in machine speed
hits both sides), each a whole process: interpreter start, imports, the run, the exit. Printed: the
wall time and the CPU time (user + system, of the process and its children) of each run
(seconds), each pair's ratio of each (watched / plain), and the median ratio with its minimum and
maximum. On a machine shared with other work the CPU ratio is the steadier of the two: wall time
also counts the time the process waited for a core. A loop updated by hand is sampled like an
optimizer loop once it repeats (the cycle boundary is its repeated backward), so the ratio should
stay near that of an optimizer loop of the same size.

Usage::

    python benchmarks/manual_sgd_lm.py                       # 3 pairs, about 25 s of CPU a plain run
    python benchmarks/manual_sgd_lm.py --pairs 5 --batches 300 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# The training script: word_language_model's loop, written for this benchmark.
SCRIPT = '''\
import math
import os
import sys

import torch
from torch import nn

DATA, EPOCHS = sys.argv[1], int(sys.argv[2])
EMSIZE, NHID, NLAYERS, BPTT, BATCH, EVAL_BATCH, CLIP = 200, 200, 2, 35, 20, 10, 0.25
torch.manual_seed(1111)


class Vocabulary:
    def __init__(self):
        self.index, self.words = {}, []

    def add(self, word):
        if word not in self.index:
            self.index[word] = len(self.words)
            self.words.append(word)
        return self.index[word]


def read_tokens(path, vocab):
    ids = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            ids.extend(vocab.add(w) for w in line.split() + ["<eos>"])
    return torch.tensor(ids, dtype=torch.int64)


def columns(stream, n):
    """The token stream (T,) as n columns: (T // n, n)."""
    rows = stream.size(0) // n
    return stream[:rows * n].view(n, rows).t().contiguous()


class LanguageModel(nn.Module):
    def __init__(self, ntokens):
        super().__init__()
        self.drop = nn.Dropout(0.2)
        self.embed = nn.Embedding(ntokens, EMSIZE)
        self.lstm = nn.LSTM(EMSIZE, NHID, NLAYERS, dropout=0.2)
        self.head = nn.Linear(NHID, ntokens)
        nn.init.uniform_(self.embed.weight, -0.1, 0.1)
        nn.init.zeros_(self.head.bias)
        nn.init.uniform_(self.head.weight, -0.1, 0.1)

    def forward(self, tokens, state):
        out, state = self.lstm(self.drop(self.embed(tokens)), state)
        logits = self.head(self.drop(out)).view(-1, self.head.out_features)
        return nn.functional.log_softmax(logits, dim=1), state

    def zero_state(self, n):
        w = next(self.parameters())
        return (w.new_zeros(NLAYERS, n, NHID), w.new_zeros(NLAYERS, n, NHID))


def detached(state):
    return state.detach() if isinstance(state, torch.Tensor) else tuple(detached(s) for s in state)


def chunk(source, i):
    n = min(BPTT, len(source) - 1 - i)
    return source[i:i + n], source[i + 1:i + 1 + n].reshape(-1)


vocab = Vocabulary()
train_data = columns(read_tokens(os.path.join(DATA, "train.txt"), vocab), BATCH)
valid_data = columns(read_tokens(os.path.join(DATA, "valid.txt"), vocab), EVAL_BATCH)
model = LanguageModel(len(vocab.words))
criterion = nn.NLLLoss()


def evaluate(source):
    model.eval()
    total, state = 0.0, model.zero_state(EVAL_BATCH)
    with torch.no_grad():
        for i in range(0, source.size(0) - 1, BPTT):
            tokens, targets = chunk(source, i)
            output, state = model(tokens, state)
            total += len(tokens) * criterion(output, targets).item()
    return total / (len(source) - 1)


def train_epoch(lr):
    model.train()
    total, state = 0.0, model.zero_state(BATCH)
    for batch, i in enumerate(range(0, train_data.size(0) - 1, BPTT)):
        tokens, targets = chunk(train_data, i)
        model.zero_grad()
        state = detached(state)  # truncated backpropagation through time
        output, state = model(tokens, state)
        loss = criterion(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
        total += loss.item()
    return total / (batch + 1)


lr, best = 20.0, None
for epoch in range(1, EPOCHS + 1):
    train_loss = train_epoch(lr)
    val_loss = evaluate(valid_data)
    print(f"epoch {epoch} train {train_loss:.3f} valid {val_loss:.3f} ppl {math.exp(val_loss):.1f}")
    if best is None or val_loss < best:
        torch.save(model.state_dict(), os.path.join(DATA, "best.pt"))
        best = val_loss
    else:
        lr /= 4.0
'''


def write_corpus(folder: Path, vocab: int, train_tokens: int, seed: int = 0) -> None:
    """``train.txt`` (``train_tokens`` words) and ``valid.txt`` (a tenth of that) in ``folder``:
    lines of 5-25 words drawn from ``vocab`` words with Zipf-like frequencies (seeded)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    weights = 1.0 / torch.arange(1, vocab + 1, dtype=torch.float64)
    for name, n in (("train.txt", train_tokens), ("valid.txt", train_tokens // 10)):
        ids = torch.multinomial(weights, n, replacement=True, generator=g).tolist()
        lines, i = [], 0
        while i < n:
            k = int(torch.randint(5, 26, (1,), generator=g))
            lines.append(" ".join(f"w{t}" for t in ids[i:i + k]))
            i += k
        (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(cmd: list[str], cwd: Path, timeout: float) -> tuple[float, float]:
    """Run ``cmd``; its wall time and CPU time (seconds). Exits with its stderr if it fails."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    start, cpu_start = time.perf_counter(), _children_cpu_s()
    proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    return time.perf_counter() - start, _children_cpu_s() - cpu_start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=3, help="plain/watched pairs (default 3)")
    parser.add_argument("--batches", type=int, default=120,
                        help="training batches per epoch (default 120: a plain run takes about 25 s of CPU)")
    parser.add_argument("--epochs", type=int, default=2, help="epochs (default 2)")
    parser.add_argument("--vocab", type=int, default=10000, help="words (default 10000)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per run")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        write_corpus(folder, args.vocab, train_tokens=args.batches * 35 * 20 + 1)
        (folder / "lm.py").write_text(SCRIPT, encoding="utf-8")
        run = ["lm.py", str(folder), str(args.epochs)]
        sides = {"plain": [sys.executable, *run],
                 "watched": [sys.executable, "-m", "trainguard", "run", *run]}
        wall: dict[str, list[float]] = {"plain": [], "watched": []}
        cpu: dict[str, list[float]] = {"plain": [], "watched": []}
        for i in range(args.pairs):
            for side in (("plain", "watched") if i % 2 == 0 else ("watched", "plain")):
                wall_s, cpu_s = timed(sides[side], folder, args.timeout)
                wall[side].append(wall_s)
                cpu[side].append(cpu_s)
            print(f"pair {i}: wall plain {wall['plain'][-1]:.2f} s, watched "
                  f"{wall['watched'][-1]:.2f} s, ratio {wall['watched'][-1] / wall['plain'][-1]:.3f}"
                  f"; CPU plain {cpu['plain'][-1]:.2f} s, watched {cpu['watched'][-1]:.2f} s, "
                  f"ratio {cpu['watched'][-1] / cpu['plain'][-1]:.3f}", flush=True)
    summary = {}
    for kind, seconds in (("wall", wall), ("cpu", cpu)):
        ratios = [w / p for p, w in zip(seconds["plain"], seconds["watched"])]
        summary[kind] = {"plain_s": seconds["plain"], "watched_s": seconds["watched"],
                         "ratios": ratios, "median_ratio": statistics.median(ratios),
                         "min_ratio": min(ratios), "max_ratio": max(ratios)}
        print(f"{kind} ratio watched/plain: median {statistics.median(ratios):.3f} (min "
              f"{min(ratios):.3f}, max {max(ratios):.3f}) over {args.pairs} pairs; median "
              f"plain {statistics.median(seconds['plain']):.2f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
