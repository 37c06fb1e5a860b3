# Modelled on michuanhaohao/reid-strong-baseline#190
# (https://github.com/michuanhaohao/reid-strong-baseline/issues/190): an event-driven trainer
# runs the user's handlers for each event; the learning-rate handler is attached to the
# epoch-started event, so the scheduler steps before the epoch's first optimizer step and the
# schedule's first value is skipped. The engine fires its events at the right times: the line to
# change is the handler's own (attach it to the epoch-completed event instead).
import torch
from torch import nn

EPOCH_STARTED, ITERATION_COMPLETED, EPOCH_COMPLETED = "epoch_started", "iter_done", "epoch_done"


class Engine:
    def __init__(self, process_function):
        self.process_function = process_function
        self.handlers = {EPOCH_STARTED: [], ITERATION_COMPLETED: [], EPOCH_COMPLETED: []}
        self.epoch, self.output = 0, None

    def on(self, event, *args):
        def attach(func):
            self.handlers[event].append((func, args))
            return func
        return attach

    def fire(self, event):
        for func, args in self.handlers[event]:
            func(self, *args)

    def run(self, batches, max_epochs):
        for self.epoch in range(max_epochs):
            self.fire(EPOCH_STARTED)
            for batch in batches:
                self.output = self.process_function(self, batch)
                self.fire(ITERATION_COMPLETED)
            self.fire(EPOCH_COMPLETED)


torch.manual_seed(3)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[2], gamma=0.1)


def update(engine, batch):
    x, y = batch
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.item()


trainer = Engine(update)


@trainer.on(EPOCH_STARTED)
def adjust_learning_rate(engine):
    scheduler.step()  # expect: TG305


@trainer.on(EPOCH_COMPLETED)
def log_epoch(engine):
    lr = optimizer.param_groups[0]["lr"]
    print(f"epoch {engine.epoch} loss {engine.output:.4f} lr {lr:.4g}")


data = [(torch.randn(16, 8), torch.randint(0, 4, (16,))) for _ in range(4)]
trainer.run(data, max_epochs=3)
