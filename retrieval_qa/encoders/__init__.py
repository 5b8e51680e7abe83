"""Networks of the dual-encoder family: token encoders, poolers, towers, sharing, builders."""

from .builders import (
    TOWER_SECTIONS,
    build_dual_towers,
    build_pooler,
    build_projection,
    build_token_embedder,
    build_token_encoder,
    build_tower,
    exported_towers,
)
from .dual_towers import SHARING_MODES, DualTowers
from .poolers import (
    ClsPooler,
    MeanPooler,
    MultiHopSelfAttentionPooler,
    Pooler,
    attention_penalty,
)
from .pretrained_encoder import PretrainedTokenEncoder
from .projection import Projection
from .recurrent_encoder import RecurrentTokenEncoder
from .token_embedder import TokenEmbedder
from .token_encoder import TokenEncoder
from .tower import Tower
from .transformer_encoder import TransformerTokenEncoder

__all__ = [
    "TOWER_SECTIONS",
    "SHARING_MODES",
    "ClsPooler",
    "DualTowers",
    "MeanPooler",
    "MultiHopSelfAttentionPooler",
    "Pooler",
    "PretrainedTokenEncoder",
    "Projection",
    "RecurrentTokenEncoder",
    "TokenEmbedder",
    "TokenEncoder",
    "Tower",
    "TransformerTokenEncoder",
    "attention_penalty",
    "build_dual_towers",
    "build_pooler",
    "build_projection",
    "build_token_embedder",
    "build_token_encoder",
    "build_tower",
    "exported_towers",
]
