# The fixed twin of ade_during_training.py: the held-out helper switches the forecaster to eval
# mode, and training mode comes back at the top of each epoch. The error of the batch just
# trained on, measured inside the step under no_grad, is a training statistic and keeps the
# training mode on purpose.
import torch
import torch.nn.functional as F

from forecast import Forecaster


def displacement(net, obs, fut, chunk=64):
    net.eval()
    err, n = 0.0, 0
    with torch.no_grad():
        for s in range(0, len(obs), chunk):
            pred = net(obs[s:s + chunk])
            err += (pred - fut[s:s + chunk]).norm(dim=-1).mean().item() * len(pred)
            n += len(pred)
    return err / n


def batch_error(net, obs, fut):
    with torch.no_grad():
        err = (net(obs) - fut).norm(dim=-1).mean().item()
    return err


def run(model, train, held_out, epochs=3):
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    obs, fut = train
    for epoch in range(epochs):
        model.train()
        for s in range(0, len(obs), 32):
            loss = F.mse_loss(model(obs[s:s + 32]), fut[s:s + 32])
            opt.zero_grad()
            loss.backward()
            opt.step()
            print(f"batch ADE {batch_error(model, obs[s:s + 32], fut[s:s + 32]):.3f}")
        print(f"epoch {epoch}: ADE {displacement(model, *held_out):.3f}")


def tracks(n):
    return torch.randn(n, 8, 2).cumsum(1), torch.randn(n, 12, 2).cumsum(1)


if __name__ == "__main__":
    run(Forecaster(), tracks(256), tracks(64))
