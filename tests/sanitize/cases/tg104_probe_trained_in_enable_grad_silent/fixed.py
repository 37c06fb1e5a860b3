# Modelled on https://github.com/determined-ai/determined/issues/7043: a harness runs validation
# under torch.no_grad(); the self-supervised encoder's embeddings are scored by training a
# linear probe, so the validation re-enables grad around the probe. Its last prediction forward
# keeps a graph nobody backpropagates, but the region needs grad (its backward trains the probe):
# silent.
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
encoder = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 8))
optimizer = torch.optim.Adam(encoder.parameters(), lr=1e-3)
x = torch.randn(96, 12)
y = (x[:, 0] > 0).long()


def probe_accuracy(z, y, epochs=30):
    probe = nn.Linear(z.shape[1], 2)
    probe_opt = torch.optim.SGD(probe.parameters(), lr=0.5)
    for _ in range(epochs):
        probe_opt.zero_grad()
        F.cross_entropy(probe(z[:64]), y[:64]).backward()
        probe_opt.step()
    pred = probe(z[64:]).argmax(1)
    return (pred == y[64:]).float().mean().item()


for epoch in range(3):
    encoder.train()
    noisy = x + 0.1 * torch.randn_like(x)
    loss = F.mse_loss(encoder(noisy), encoder(x).detach())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    encoder.eval()
    with torch.no_grad():
        z = encoder(x)
        with torch.enable_grad():
            acc = probe_accuracy(z, y)
    print(epoch, round(loss.item(), 4), acc)
