# Modelled on udacity/deep-learning-v2-pytorch#3 "Issue about model.train() and model.eval()"
# (https://github.com/udacity/deep-learning-v2-pytorch/issues/3): validation of a model with
# Dropout runs without model.eval(). Written here in the phase loop of PyTorch's transfer-learning
# tutorial (https://pytorch.org/tutorials/beginner/transfer_learning_tutorial.html), where one
# forward line serves both phases under `torch.set_grad_enabled(phase == "train")`, and the
# `model.eval()` of the validation phase is the line that went missing.
import torch
from torch import nn

torch.manual_seed(0)


def train_model(model, criterion, optimizer, loaders, num_epochs):
    for epoch in range(num_epochs):
        for phase in ["train", "val"]:
            if phase == "train":
                model.train()
            running_loss, running_corrects, seen = 0.0, 0, 0
            for inputs, labels in loaders[phase]:
                optimizer.zero_grad()
                with torch.set_grad_enabled(phase == "train"):
                    outputs = model(inputs)  # expect: TG101
                    _, preds = torch.max(outputs, 1)
                    loss = criterion(outputs, labels)
                    if phase == "train":
                        loss.backward()
                        optimizer.step()
                running_loss += loss.item() * inputs.size(0)
                running_corrects += torch.sum(preds == labels).item()
                seen += inputs.size(0)
            print(epoch, phase, round(running_loss / seen, 3), running_corrects / seen)


model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Dropout(0.5), nn.Linear(32, 4))
loaders = {"train": [(torch.randn(8, 10), torch.randint(0, 4, (8,))) for _ in range(6)],
           "val": [(torch.randn(8, 10), torch.randint(0, 4, (8,))) for _ in range(2)]}
train_model(model, nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.01), loaders, 2)
