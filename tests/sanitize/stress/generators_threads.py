"""Batches from a generator, made by a producer thread that feeds a queue (a prefetching input
pipeline), and an evaluation run in a worker thread of a ThreadPoolExecutor while the main thread
trains (the model is copied for it). https://docs.python.org/3/library/queue.html,
https://pytorch.org/docs/stable/notes/multiprocessing.html."""

import copy
import queue
import threading
from concurrent.futures import ThreadPoolExecutor

import torch
from torch import nn

from _weights import save

torch.manual_seed(0)
STEPS = 300


def producer(out: queue.Queue) -> None:
    g = torch.Generator().manual_seed(1)
    for _ in range(STEPS):
        out.put((torch.randn(16, 8, generator=g), torch.randint(0, 3, (16,), generator=g)))
    out.put(None)


def batches(source: queue.Queue):
    while (item := source.get()) is not None:
        yield item


def evaluate(model: nn.Module) -> float:
    g = torch.Generator().manual_seed(2)
    model.eval()
    with torch.no_grad():
        x, y = torch.randn(256, 8, generator=g), torch.randint(0, 3, (256,), generator=g)
        return (model(x).argmax(1) == y).float().mean().item()


model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
feed: queue.Queue = queue.Queue(maxsize=8)
threading.Thread(target=producer, args=(feed,), daemon=True).start()
scores = []
with ThreadPoolExecutor(max_workers=1) as pool:
    for step, (x, y) in enumerate(batches(feed)):
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        if step % 50 == 49:
            scores.append(pool.submit(evaluate, copy.deepcopy(model)))
print([round(f.result(), 3) for f in scores])
save(model)
