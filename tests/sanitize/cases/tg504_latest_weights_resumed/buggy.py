# Modelled on GitHub IntelLabs/distiller#145 (https://github.com/IntelLabs/distiller/issues/145):
# training paused and resumed with the same arguments restarted the learning rate at its initial
# value, because the checkpoint helper saved and loaded the weights only, never the optimizer or
# the schedule. Resuming restarts SGD's momentum and the MultiStepLR decay. The fix saves the
# optimizer's, the scheduler's state and the epoch with the weights and loads them back.
import os
import tempfile

import torch
import torch.nn.functional as F
from torch import nn

FOLDER = tempfile.mkdtemp()
LATEST = os.path.join(FOLDER, "latest.pth")


def build():
    net = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 3))
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[2, 4], gamma=0.1)
    return net, opt, sched


def save_checkpoint(net, opt, sched, epoch):
    torch.save(net.state_dict(), LATEST)  # expect: TG504


def load_checkpoint(net, opt, sched):
    net.load_state_dict(torch.load(LATEST, weights_only=True))
    return 0


def fit(net, opt, sched, first, last):
    g = torch.Generator().manual_seed(1)
    for epoch in range(first, last):
        for _ in range(4):
            x = torch.randn(16, 10, generator=g)
            loss = F.cross_entropy(net(x), (x[:, 0] > 0).long() + (x[:, 1] > 0).long())
            opt.zero_grad()
            loss.backward()
            opt.step()
        sched.step()
        save_checkpoint(net, opt, sched, epoch)
        print(f"epoch {epoch} lr {opt.param_groups[0]['lr']:.3g} loss {loss.item():.3f}")


torch.manual_seed(0)
fit(*build(), 0, 3)
net, opt, sched = build()  # the job was stopped; a new process resumes
start = load_checkpoint(net, opt, sched)
fit(net, opt, sched, start, 6)
