# A correct look-alike modelled on pytorch/examples mnist_hogwild
# (https://github.com/pytorch/examples/tree/main/mnist_hogwild, discussed in
# https://github.com/pytorch/examples/commit/05ed879d1922757a648d80b6c099905360556a18): several
# processes train one model in shared memory (Hogwild), each with its own optimizer and
# DataLoader; the parent evaluates the shared model after the workers finish. Nothing here is a
# bug: several processes stepping one set of parameters is the method, not a race to report.
import torch
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(10, 16)
        self.drop = nn.Dropout(0.2)
        self.fc2 = nn.Linear(16, 3)

    def forward(self, x):
        return F.log_softmax(self.fc2(self.drop(F.relu(self.fc1(x)))), dim=1)


def train(rank, model, dataset, epochs):
    torch.manual_seed(1 + rank)
    loader = DataLoader(dataset, batch_size=8, shuffle=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.5)
    model.train()
    for epoch in range(epochs):
        for data, target in loader:
            optimizer.zero_grad()
            loss = F.nll_loss(model(data), target)
            loss.backward()
            optimizer.step()


def test(model, dataset):
    model.eval()
    correct = 0
    with torch.no_grad():
        for data, target in DataLoader(dataset, batch_size=16):
            correct += (model(data).argmax(1) == target).sum().item()
    return correct / len(dataset)


if __name__ == "__main__":
    torch.manual_seed(0)
    dataset = TensorDataset(torch.randn(64, 10), torch.randint(0, 3, (64,)))
    model = Net()
    model.share_memory()  # gradients are allocated lazily, so each process keeps its own
    context = mp.get_context("spawn")  # a fresh interpreter per worker: no OpenMP state forked
    processes = []
    for rank in range(2):
        p = context.Process(target=train, args=(rank, model, dataset, 2))
        p.start()
        processes.append(p)
    for p in processes:
        p.join()
    print(f"accuracy {test(model, dataset):.3f}")
