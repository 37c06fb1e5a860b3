# Report: https://github.com/raphaelmemmesheimer/skeleton-dml/issues/10
# Modelled on raphaelmemmesheimer/skeleton-dml#10 ("IndexError: Target 83 is out of bounds"):
# a subset of an action dataset kept its original action ids while the classifier was sized for
# the number of actions in the subset. Here a trainer stores the clips' raw action ids as its
# labels tensor and slices a batch of them each step; its step logs a failing loss and raises it
# again. The labels stored without remapping are the line to change, not the loss.
import torch
from torch import nn

ACTION_IDS = [7, 19, 23, 41]  # ids of the four actions kept, as the full dataset numbers them


class ClipTrainer:
    def __init__(self, poses: torch.Tensor, action_ids: list[int]) -> None:
        self.poses = poses
        index = {action: i for i, action in enumerate(ACTION_IDS)}
        self.labels = torch.tensor([index[a] for a in action_ids])
        self.model = nn.Sequential(nn.Flatten(), nn.Linear(25 * 3, 32), nn.ReLU(),
                                   nn.Linear(32, len(ACTION_IDS)))
        self.crit = nn.CrossEntropyLoss()
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-3)

    def step(self, batch: torch.Tensor) -> float:
        logits = self.model(self.poses[batch])
        try:
            loss = self.crit(logits, self.labels[batch])
        except IndexError as err:
            print(f"step failed: {err}")
            raise
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return loss.item()


def main() -> None:
    torch.manual_seed(0)
    clips = 48
    ids = [ACTION_IDS[i % len(ACTION_IDS)] for i in range(clips)]
    trainer = ClipTrainer(torch.randn(clips, 25, 3), ids)
    for start in range(0, clips, 16):
        trainer.step(torch.arange(start, start + 16))


if __name__ == "__main__":
    main()
