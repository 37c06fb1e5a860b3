"""Pseudo-label helpers shared by the semi-supervised recipes: the weakly augmented view is
labelled by the model itself in eval mode (BatchNorm on its running statistics)."""
import torch


def guess_labels(model, weak_view, threshold=0.6):
    model.eval()
    with torch.no_grad():
        probs = model(weak_view).softmax(-1)
    confidence, labels = probs.max(-1)
    return labels, confidence > threshold
