# Modelled on GitHub IntelLabs/distiller#145 (https://github.com/IntelLabs/distiller/issues/145):
# the fixed twin: the checkpoint holds the weights, the optimizer's and the scheduler's state and
# the epoch, and the resume loads them all, so the momentum and the schedule continue.
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
    torch.save({"net": net.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict(),
                "epoch": epoch}, LATEST)


def load_checkpoint(net, opt, sched):
    state = torch.load(LATEST, weights_only=True)
    net.load_state_dict(state["net"])
    opt.load_state_dict(state["opt"])
    sched.load_state_dict(state["sched"])
    return state["epoch"] + 1


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
