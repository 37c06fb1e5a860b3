# Average displacement error measured after every epoch by a helper that never calls eval(): the
# forecaster is handed over still in train mode, so Dropout perturbs the reported error and the
# numbers logged during training cannot be reproduced from the checkpoint (the mismatch reported
# in cunjunyu/STAR#4, "Test During Training without self.net.eval()").
import torch
import torch.nn.functional as F

from forecast import Forecaster


def displacement(net, obs, fut, chunk=64):
    err, n = 0.0, 0  # expect: TG101
    with torch.no_grad():
        for s in range(0, len(obs), chunk):
            pred = net(obs[s:s + chunk])
            err += (pred - fut[s:s + chunk]).norm(dim=-1).mean().item() * len(pred)
            n += len(pred)
    return err / n


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
        print(f"epoch {epoch}: ADE {displacement(model, *held_out):.3f}")


def tracks(n):
    return torch.randn(n, 8, 2).cumsum(1), torch.randn(n, 12, 2).cumsum(1)


if __name__ == "__main__":
    run(Forecaster(), tracks(256), tracks(64))
