# Modelled on BatsResearch/labelmodels#4 (https://github.com/BatsResearch/labelmodels/issues/4):
# "You're holding on to the graph for each batch per epoch, since running_loss is the sum of
# non-detached tensors". The trainer hands its callbacks a `state` dict holding the batch's loss
# tensor; the tracker callback picks state["loss"] and sums it on itself. The callback chose what
# to keep, so its own line is reported (a generic meter storing whatever it is given is reported
# at the call that gives it the tensor).
import torch
import torch.nn as nn


class LossTracker:
    def on_epoch_start(self, state):
        self.total = 0.0
        self.n = 0

    def on_batch_end(self, state):
        self.total += state["loss"]  # expect: TG201
        self.n += 1

    def on_epoch_end(self, state):
        print(state["epoch"], float(self.total) / self.n)


def fit(model, data, callbacks, epochs=3):
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    state = {}
    for epoch in range(epochs):
        state["epoch"] = epoch
        for cb in callbacks:
            cb.on_epoch_start(state)
        for x, y in data:
            loss = nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            state.update(loss=loss)
            for cb in callbacks:
                cb.on_batch_end(state)
        for cb in callbacks:
            cb.on_epoch_end(state)


fit(nn.Linear(6, 1), [(torch.randn(8, 6), torch.randn(8, 1)) for _ in range(8)], [LossTracker()])
