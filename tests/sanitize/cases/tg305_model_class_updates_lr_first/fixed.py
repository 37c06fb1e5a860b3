# Modelled on junyanz/pytorch-CycleGAN-and-pix2pix#1412
# (https://github.com/junyanz/pytorch-CycleGAN-and-pix2pix/issues/1412): a model class steps its
# schedulers in update_learning_rate() and its optimizer in optimize_parameters(); the epoch loop
# calls update_learning_rate() first, so PyTorch warns that lr_scheduler.step() ran before
# optimizer.step() and the first epoch trains with the second epoch's learning rate. Each helper
# is right in itself: the loop's order is the line to change.
import torch
from torch import nn


class Pix2PixLike:
    def __init__(self, n_epochs):
        self.net = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 6))
        self.optimizer = torch.optim.Adam(self.net.parameters(), lr=2e-3)
        decay = lambda epoch: 1.0 - epoch / float(n_epochs + 1)  # noqa: E731
        self.schedulers = [torch.optim.lr_scheduler.LambdaLR(self.optimizer, decay)]

    def update_learning_rate(self):
        for scheduler in self.schedulers:
            scheduler.step()

    def optimize_parameters(self, a, b):
        self.optimizer.zero_grad()
        loss = nn.functional.l1_loss(self.net(a), b)
        loss.backward()
        self.optimizer.step()
        return loss.item()


torch.manual_seed(5)
a, b = torch.randn(64, 6), torch.randn(64, 6)
model = Pix2PixLike(n_epochs=4)
for epoch in range(4):
    for i in range(0, 64, 16):
        loss = model.optimize_parameters(a[i:i + 16], b[i:i + 16])
    model.update_learning_rate()  # after the epoch's optimizer steps
    print(f"epoch {epoch} loss {loss:.4f}")
