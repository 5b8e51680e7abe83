"""ENDX (ENDX paper, sections 3.3-3.5): a dual encoder trained together with a cross-attention
branch (the paper's "Cross-Encoders": each text refined by attention to its matched partner),
aligned by the Geometry Alignment Mechanism. Only the dual towers are exported, so retrieval
cost is unchanged.

Total loss (eq. 13): ``alpha_dual * L_dual + alpha_cross * L_cross + alpha_ga * L_GA`` with
``L_GA = sum_r w_r(epoch) KL(P^cross_r || P^dual_r)`` over r in q|q, a|a, a|q, q|a (eq. 12),
the weights ramping as in section 4.4. Every term is logged separately.
"""

from __future__ import annotations

from ..encoders.cross_attention_branch import build_cross_attention_branch
from ..losses import InBatchSoftmaxLoss
from ..losses.gam import RELATION_NAMES, GeometryAlignmentLoss
from .dual_encoder import DualEncoderModule
from .endx_schedule import EndxLossWeights, GamWeightSchedule

#: Checkpoints written before the branch was renamed keep its weights under this prefix.
_OLD_BRANCH_PREFIX = "cross_encoder."


def gam_schedule(cfg: dict) -> GamWeightSchedule:
    """The :class:`GamWeightSchedule` of the ``model.gam`` block.

    Args:
        cfg: ``model.gam`` (conf/model/endx.yaml): its ``ramp_epochs`` and its ``final``
            weights under the config names of the relations (``qq``, ``aa``, ``aq``, ``qa``:
            :data:`~retrieval_qa.losses.relations.RELATION_NAMES`); its other keys are ignored.

    Example:

        >>> gam_schedule({"ramp_epochs": 5, "final": {"qq": 1e4, "aa": 1e4, "aq": 0.5,
        ...                                           "qa": 0.5}})(2.5)["a|q"]
        0.25
    """
    return GamWeightSchedule.from_config({
        "ramp_epochs": cfg["ramp_epochs"],
        "final": {RELATION_NAMES[k]: v for k, v in cfg["final"].items()}})


class EndxModule(DualEncoderModule):
    """``model`` config = the dual encoder's, plus ``cross`` (the cross-attention branch,
    :mod:`retrieval_qa.encoders.cross_attention_branch`: ``encoder``, ``pooler``,
    ``cross_attention``), ``cross_loss`` (similarity and scale of eq. 5; default:
    the dual loss's), ``gam`` (kernel, sigma, exclude_self, detach_cross, ramp_epochs, final
    weights per relation) and ``weights`` (dual, cross, ga: eq. 13).

    GAM sees each side's embeddings in the space of that side's scoring function
    (:meth:`InBatchSoftmaxLoss.score_space`), so its inner-product kernel (eq. 10) gives each
    side's own retrieval logits: with the paper's plain inner product on both sides this is
    the identity; with cosine and a scale, the neighbour distributions of GAM are exactly the
    in-batch softmax distributions that each side is trained with. Under DDP the two
    retrieval losses take their negatives from the global batch; GAM's B x B neighbour
    distributions are those of each process's own batch.

    Args:
        towers: the ``model.towers`` block (the dual encoder).
        loss: the dual side's ``model.loss`` block (eq. 1).
        optimizer: the ``model.optimizer`` block.
        cross: the cross-attention branch's block (``encoder``, ``pooler``,
            ``cross_attention``); its ``num_heads`` must divide the encoder's hidden size.
        gam: GAM's block (``kernel``, ``sigma``, ``exclude_self``, ``detach_cross``, the ramp
            and the final weight of each relation).
        weights: the ``dual``, ``cross`` and ``ga`` weights of eq. 13.
        cross_loss: the cross side's loss settings, over the dual ``loss`` key by key.
        gradient_cache: must hold ``mini_batch_size: null`` (ENDX needs the whole batch).
        evaluation: the ``eval`` group's settings.

    Example:

        >>> from retrieval_qa.registry import config_values, instantiate
        >>> from retrieval_qa.config import compose_group
        >>> tiny = {"towers": {"encoder": {"type": "gru", "vocab_size": 50,
        ...                                 "embedding_dim": 12, "hidden_size": 12},
        ...                     "pooler": {"type": "mean"}}}
        >>> model = compose_group("model", "endx", tiny)  # conf/model/endx.yaml
        >>> evaluation = config_values(compose_group("eval", "default"))
        >>> module = instantiate(model, "model", evaluation=evaluation)
        >>> type(module).__name__, module.towers.output_dim, module.gam.kernel
        ('EndxModule', 12, 'inner_product')
    """

    #: the divergence check watches the dual towers' in-batch loss: the total grows by design as
    #: GAM's weights ramp up (to 250x its start in results/endx/endx_gru_cpu_seed1_metrics.csv)
    divergence_term = "train/dual_loss"

    def __init__(self, towers: dict, loss: dict, optimizer: dict, cross: dict, gam: dict,
                 weights: dict, *, cross_loss: dict, gradient_cache: dict,
                 evaluation: dict) -> None:
        if (gradient_cache or {}).get("mini_batch_size") is not None:
            raise ValueError("model.gradient_cache is for the dual encoders' in-batch softmax; "
                             "ENDX's cross branch and GAM need the whole batch: set "
                             "model.gradient_cache.mini_batch_size=null")
        super().__init__(towers, loss, optimizer, gradient_cache=gradient_cache,
                         evaluation=evaluation)
        self.save_hyperparameters()
        self.cross_loss = InBatchSoftmaxLoss.from_config({**loss, **cross_loss})
        self.cross_branch = build_cross_attention_branch(cross)
        self.gam = GeometryAlignmentLoss(kernel=gam["kernel"], sigma=gam["sigma"],
                                         exclude_self=gam["exclude_self"],
                                         detach_cross=gam["detach_cross"])
        self.schedule = gam_schedule(gam)
        self.weights = EndxLossWeights.from_config(weights)
        self.train()  # the branch's from_pretrained model too (else no dropout in its training)

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        """Read checkpoints written while the branch was called ``cross_encoder``."""
        super().on_load_checkpoint(checkpoint)
        state = checkpoint.get("state_dict", {})
        for key in [k for k in state if k.startswith(_OLD_BRANCH_PREFIX)]:
            state["cross_branch." + key[len(_OLD_BRANCH_PREFIX):]] = state.pop(key)

    def losses(self, batch: dict, epoch: float) -> tuple:
        """Eq. 13 on one batch with the GAM weights of (fractional) ``epoch``:
        ``(total loss, {log name: term})``."""
        q, a, dual_penalty = self.towers.encode_pair(batch["question"], batch["answer"])
        weight = batch.get("weight")
        l_dual = self.loss(q, a, weight)
        cq, ca, cross_penalty = self.cross_branch.encode_pair(batch["question"], batch["answer"])
        l_cross = self.cross_loss(cq, ca, weight)
        gam_weights = self.schedule(epoch)
        l_ga, terms = self.gam.compute_loss_from_embeddings(
            self.loss.score_space(q), self.loss.score_space(a),
            self.cross_loss.score_space(cq), self.cross_loss.score_space(ca), gam_weights)
        loss = self.weights.total(l_dual, l_cross, l_ga)
        logs = {"train/dual_loss": l_dual, "train/cross_loss": l_cross, "train/gam_loss": l_ga}
        logs.update({f"train/kl_{k}": terms[v] for k, v in RELATION_NAMES.items()})
        logs.update({f"train/w_{k}": gam_weights[v] for k, v in RELATION_NAMES.items()})
        # embedding scales: an inner product over large norms saturates the softmax
        logs.update({"train/dual_q_norm": q.detach().norm(dim=-1).mean(),
                     "train/cross_q_norm": cq.detach().norm(dim=-1).mean()})
        loss = self.add_penalty(loss, dual_penalty + cross_penalty, logs)
        logs["train/loss"] = loss
        return loss, logs

    def training_step(self, batch, batch_idx):
        loss, logs = self.losses(batch, self.epoch_progress(batch_idx))
        return self.log_training(loss, logs, batch_idx, batch["question"]["input_ids"].shape[0])
