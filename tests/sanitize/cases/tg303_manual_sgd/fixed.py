# Near miss for TG303: parameters updated by hand (manual SGD, as in the "Learning PyTorch with
# Examples" tutorial, https://pytorch.org/tutorials/beginner/pytorch_with_examples.html) while an
# optimizer object exists only to zero the gradients; and an input-gradient saliency loop that calls
# backward with model.zero_grad() and no optimizer at all.
import torch
from torch import nn

torch.manual_seed(6)
x = torch.randn(32, 5)
y = x.sum(dim=1, keepdim=True)
model = nn.Linear(5, 1)
holder = torch.optim.SGD(model.parameters(), lr=0.05)

for step in range(5):
    holder.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            p -= 0.05 * p.grad

image = torch.randn(1, 5, requires_grad=True)
for step in range(4):
    model.zero_grad()
    score = model(image).sum()
    score.backward()
    with torch.no_grad():
        image += 0.1 * image.grad.sign()
    image.grad = None
print(f"loss {loss.item():.4f}")
