# Modelled on nianticlabs/monodepth2#24 (https://github.com/nianticlabs/monodepth2/issues/24):
# "element 0 of tensors does not require grad": the maintainers' answer was that the code under
# torch.no_grad() is the validation's, and the reporter was backpropagating through it. Here a
# depth trainer's predict() helper, decorated with @torch.no_grad() for validation, is reused in
# the training step, so the loss has no graph. The line to change is the step's call of it.
# Fixed twin: the training step calls the network itself.
import torch
import torch.nn.functional as F
from torch import nn


class DepthTrainer:
    def __init__(self):
        self.net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 1, 1))
        self.optimizer = torch.optim.Adam(self.net.parameters(), lr=1e-3)

    @torch.no_grad()
    def predict(self, images):
        return torch.sigmoid(self.net(images))

    def train_step(self, images, depth):
        pred = self.predict(images)  # expect: TG204
        loss = F.l1_loss(pred, depth)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()


torch.manual_seed(0)
trainer = DepthTrainer()
images, depth = torch.rand(2, 3, 16, 16), torch.rand(2, 1, 16, 16)
print(trainer.train_step(images, depth))
