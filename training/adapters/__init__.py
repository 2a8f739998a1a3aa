"""LoRA adapters on megatron's linear layers: accuracy recovery for palettized models, adapter-only
checkpoints, attach/detach/swap on a running model, PEFT export."""
