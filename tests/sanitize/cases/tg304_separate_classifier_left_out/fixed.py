# Fixed twin of buggy.py (https://r2d.info/2019/01/15/pytorch/): the optimizer holds both modules.
# Beside it, a loss network applied to the prediction (which is itself a loss's input) and a
# perceptual network in eval mode on the decoded output stay silent, though both are left
# trainable and receive gradients.
import torch
from torch import nn

torch.manual_seed(3)
encoder = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 16), nn.ReLU())
classifier = nn.Linear(16, 4)
penalty_net = nn.Linear(4, 2)
perceptual = nn.Sequential(nn.Linear(16, 8), nn.Tanh()).eval()
decoder = nn.Linear(16, 16)
optimizer = torch.optim.SGD([*encoder.parameters(), *classifier.parameters(),
                             *decoder.parameters()], lr=0.1, momentum=0.9)
x, y = torch.randn(64, 12), torch.randint(0, 4, (64,))
target = torch.randn(64, 16)
for step in range(40):
    optimizer.zero_grad()
    z = encoder(x)
    logits = classifier(z.flatten(1))
    loss = nn.CrossEntropyLoss()(logits, y) + 0.01 * penalty_net(logits).pow(2).mean()
    loss = loss + 0.1 * nn.functional.mse_loss(perceptual(decoder(z)), perceptual(target))
    loss.backward()
    optimizer.step()
print(f"loss {loss.item():.3f}")
