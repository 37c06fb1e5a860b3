# Modelled on the GitHub issue "Loss becomes nan after training for ~2000 iterations"
# (https://github.com/karpathy/nanoGPT/issues/136) and the GitHub issue "Guard against division by
# zero" (zero embeddings normalized to NaN, https://github.com/huggingface/sentence-transformers/issues/625): an embedding head
# divides by the L2 norm by hand; one batch holds an all-zero row, 0/0 gives NaN, and the loss,
# then every weight, turns NaN without an error.
import torch
from torch import nn


class L2Normalize(nn.Module):
    def forward(self, x):
        return x / x.norm(dim=1, keepdim=True)  # expect: TG405


class Embedder(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(6, 4, bias=False)
        self.normalize = L2Normalize()

    def forward(self, x):
        return self.normalize(self.encoder(x))


torch.manual_seed(13)
model = Embedder()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
targets = nn.functional.normalize(torch.randn(8, 4), dim=1)
for step in range(5):
    x = torch.randn(8, 6)
    if step == 2:
        x[3] = 0.0  # a padded sample
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), targets)
    loss.backward()
    optimizer.step()
print(f"loss {loss.item()}")
