"""Datasets trainguard builds: the bundled digits, a CSV of image paths and labels, an image
folder; the seeded stratified split and the epoch-seeded batch sampler."""
