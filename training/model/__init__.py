"""AFM architecture on megatron-core: named shapes and the GPTModel built from a layer spec."""

from .gpt import afm_layer_spec, build_model, count_parameters, transformer_config
from .shapes import SHAPES, ModelShape, get_shape

__all__ = ["SHAPES", "ModelShape", "afm_layer_spec", "build_model", "count_parameters", "get_shape",
           "transformer_config"]
