# Near-miss: the helper loads the model and puts it in eval mode itself.
import torch

from models import load_for_inference

model = load_for_inference("weights.pt")
test_loader = [(torch.randn(8, 8), torch.randint(0, 3, (8,)))]
with torch.no_grad():
    for x, y in test_loader:
        print((model(x).argmax(1) == y).sum().item())
