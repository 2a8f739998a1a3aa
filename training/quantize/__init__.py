"""Post-training compression of trained checkpoints: palettization (k-means LUTs, mixed 2/4-bit, int8
embedding) and the loader that dequantizes into the megatron model."""
