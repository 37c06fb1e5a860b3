# Modelled on pytorch/pytorch#41329 "Random seed of numpy is reset to the same value inside
# DataLoader workers" (https://github.com/pytorch/pytorch/issues/41329), an IterableDataset that
# asks get_worker_info() for its worker, and huggingface/datasets#7567
# (https://github.com/huggingface/datasets/issues/7567), a seeded generator that every worker
# copies. The stream below splits its windows between workers with get_worker_info(), which only
# decides WHICH windows a worker reads; the jitter generator made in __init__ is copied into each
# worker with one state, so every worker adds the same noise sequence.
# Fixed twin: __iter__ makes the generator per worker from the worker's seed.
import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, IterableDataset, get_worker_info


class SensorWindows(IterableDataset):
    def __init__(self, series, window=16, seed=3):
        self.series = series
        self.window = window
        self.seed = seed
        self.jitter = np.random.default_rng(seed)

    def __iter__(self):
        starts = range(0, len(self.series) - self.window, self.window)
        info = get_worker_info()
        if info is not None:
            starts = starts[info.id::info.num_workers]
            self.jitter = np.random.default_rng(info.seed)
        for s in starts:
            x = self.series[s:s + self.window] + self.jitter.normal(0.0, 0.05, self.window)
            yield torch.tensor(x, dtype=torch.float32), torch.tensor(float(self.series[s + self.window]))


def train(model, loader, epochs=2):
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(epochs):
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x).squeeze(1), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    return loss.item()


if __name__ == "__main__":
    torch.manual_seed(0)
    series = np.sin(np.linspace(0, 20, 400))
    loader = DataLoader(SensorWindows(series), batch_size=4, num_workers=2)
    print(train(nn.Linear(16, 1), loader))
