# Modelled on the PyTorch forum thread "Do I need to use softmax before nn.CrossEntropyLoss()?"
# (https://discuss.pytorch.org/t/do-i-need-to-use-softmax-before-nn-crossentropyloss/16739): a
# graph classifier (mean-aggregation GNN on a dense adjacency) ends its forward with an
# nn.Softmax module it built in __init__, and trains with CrossEntropyLoss, which applies
# log_softmax itself; the loss cannot approach zero. The module is called only there, so the line
# to change is the one that built it (drop it, or make it a LogSoftmax for NLLLoss).
# Fixed twin: forward returns the logits.
import torch
import torch.nn.functional as F
from torch import nn


class MeanGNN(nn.Module):
    def __init__(self, dim=8, hidden=16, classes=3):
        super().__init__()
        self.lin1 = nn.Linear(dim, hidden)
        self.lin2 = nn.Linear(hidden, hidden)
        self.readout = nn.Linear(hidden, classes)
        self.softmax = nn.Softmax(dim=-1)  # expect: TG401

    def forward(self, feats, adj):
        deg = adj.sum(-1, keepdim=True).clamp(min=1)
        h = F.relu(self.lin1(adj @ feats / deg))
        h = F.relu(self.lin2(adj @ h / deg))
        return self.softmax(self.readout(h.mean(1)))


def train(model, graphs, labels, epochs=4):
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    criterion = nn.CrossEntropyLoss()
    for _ in range(epochs):
        for (feats, adj), y in zip(graphs, labels):
            loss = criterion(model(feats, adj), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return loss.item()


if __name__ == "__main__":
    torch.manual_seed(0)
    graphs = [(torch.randn(4, 6, 8), (torch.rand(4, 6, 6) > 0.5).float()) for _ in range(3)]
    labels = [torch.randint(0, 3, (4,)) for _ in range(3)]
    print(train(MeanGNN(), graphs, labels))
