# Report: https://github.com/openpifpaf/openpifpaf/issues/123
# A denoising autoencoder's trainer logs per-layer gradient norms from one batch before it trains.
# Its loop zeroes first thing in each step (zero_grad, forward, backward, step), so what the
# probe's backward left is cleared before the first update.
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(5)
clean = torch.rand(256, 1, 12, 12)
noisy = (clean + 0.2 * torch.randn_like(clean)).clamp(0, 1)


class DenoiseTrainer:
    def __init__(self):
        self.net = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(),
                                 nn.Conv2d(8, 1, 3, padding=1))
        self.opt = torch.optim.Adam(self.net.parameters(), lr=1e-3)
        self.loader = DataLoader(TensorDataset(noisy, clean), batch_size=32, shuffle=True)

    def probe_gradient_norms(self):
        x, y = next(iter(self.loader))
        nn.functional.mse_loss(self.net(x), y).backward()
        return {name: p.grad.norm().item() for name, p in self.net.named_parameters()}

    def fit(self, epochs=2):
        print(self.probe_gradient_norms())
        for _ in range(epochs):
            for x, y in self.loader:
                self.opt.zero_grad()
                nn.functional.mse_loss(self.net(x), y).backward()
                self.opt.step()
                self.opt.zero_grad()


DenoiseTrainer().fit()
