# Modelled on PyTorch's knowledge-distillation tutorial
# (https://pytorch.org/tutorials/beginner/knowledge_distillation_tutorial.html), whose soft targets
# are the teacher's softmax over the classes (dim=-1), here computed under bfloat16 autocast: each
# row sums to 1 only within bfloat16's rounding (here up to 0.0015 from it), also once cast to
# float32, which cross_entropy takes as the distribution it is.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
x, y = torch.randn(256, 12), torch.randint(0, 10, (256,))
teacher = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 10)).eval()
with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
    soft = F.softmax(teacher(x) / 4.0, dim=1)
student = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 10))
optimizer = torch.optim.Adam(student.parameters(), lr=1e-2)
for epoch in range(3):
    for idx in torch.arange(256).split(64):
        loss = F.cross_entropy(student(x[idx]), soft[idx].float())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
