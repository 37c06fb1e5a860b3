# Modelled on the training loops discussed in GitHub princeton-vl/RAFT#104
# (https://github.com/princeton-vl/RAFT/issues/104) and PyTorch's AMP note on gradient clipping
# (https://pytorch.org/docs/stable/notes/amp_examples.html#gradient-clipping): clip_grad_norm_
# runs right after the scaled backward and scaler.step unscales afterwards, so the threshold
# meets gradients multiplied by the scale. Fresh batches each step make the clip factor change
# from step to step; the one fault is reported once, at the clip call.
import torch
from torch import nn

torch.manual_seed(5)


class FlowHead(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(4, 16, 3, padding=1), nn.ReLU(),
                                 nn.Conv2d(16, 2, 3, padding=1))

    def forward(self, pair: torch.Tensor) -> torch.Tensor:
        return self.net(pair)


def main() -> None:
    model = FlowHead()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cpu")
    for step in range(12):
        pair, flow = torch.randn(4, 4, 12, 12), torch.randn(4, 2, 12, 12)
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            pred = model(pair)
        loss = (pred.float() - flow).abs().mean()
        scaler.scale(loss).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # expect: TG306
        scaler.step(optimizer)
        scaler.update()
    print(f"epe {loss.item():.3f}")


main()
