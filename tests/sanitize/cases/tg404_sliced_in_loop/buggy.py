# Modelled on scverse/scvi-tools#2314 (https://github.com/scverse/scvi-tools/issues/2314):
# "ValueError: Expected more than 1 value per channel when training, got input size
# torch.Size([1, 128])" because "the last batch of the training set contains one observation".
# A class-based trainer slices its mini-batches itself from the cell-by-gene matrix: 65 cells in
# steps of 16 leave one cell for the last step of every epoch.
import torch
from torch import nn


class Encoder(nn.Module):
    def __init__(self, n_genes=30, n_hidden=32):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(n_genes, n_hidden), nn.BatchNorm1d(n_hidden),
                                 nn.ReLU(), nn.Linear(n_hidden, n_genes))

    def forward(self, x):
        return self.net(x)


class Trainer:
    def __init__(self, module, data, batch_size=16):
        self.module = module
        self.data = data
        self.batch_size = batch_size
        self.opt = torch.optim.Adam(module.parameters(), lr=1e-3)

    def train(self, max_epochs):
        for epoch in range(max_epochs):
            perm = torch.randperm(self.data.shape[0])
            for start in range(0, self.data.shape[0], self.batch_size):  # expect: TG404
                x = self.data[perm[start:start + self.batch_size]]
                loss = nn.functional.mse_loss(self.module(x), x)
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()


torch.manual_seed(0)
Trainer(Encoder(), torch.rand(65, 30)).train(max_epochs=2)
