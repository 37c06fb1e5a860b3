# Modelled on PyTorch's knowledge-distillation tutorial
# (https://pytorch.org/tutorials/beginner/knowledge_distillation_tutorial.html), whose soft targets
# are the teacher's softmax over the classes (dim=-1), here computed under bfloat16 autocast: the
# softmax is taken over the batch dimension instead, so each row of targets is not a distribution
# over the classes and cross_entropy, which does not check, trains on them.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
x, y = torch.randn(256, 12), torch.randint(0, 10, (256,))
teacher = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 10)).eval()
with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
    soft = F.softmax(teacher(x) / 4.0, dim=0)
student = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 10))
optimizer = torch.optim.Adam(student.parameters(), lr=1e-2)
for epoch in range(3):
    for idx in torch.arange(256).split(64):
        loss = F.cross_entropy(student(x[idx]), soft[idx].float())  # expect: TG402
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
