"""An ensemble of replicates: the same model trained with different seeds, scored as their mean probability.

The field averages replicates before computing metrics (Borzoi averages 4, ChromBPNet 5 folds):
one seed decides too much. `EnsembleModel` is a module with the replicates' interface, so
every tool that scores, explains or transfers a model takes an ensemble unchanged. Its logit
is that of the replicates' mean probability,

    logit(mean_i p_i) = log(mean_i p_i) - log(mean_i (1 - p_i))
                      = logsumexp_i(logsigmoid(l_i)) - logsumexp_i(logsigmoid(-l_i)),

computed from the replicates' logits l_i without leaving log space (the 1/N cancels), so a
sigmoid of it is the mean probability even where every p_i rounds to 0 or 1 in float32. It
is computed in float32 whatever the replicates' precision (bf16 under autocast on a GPU), so
the ensemble scores as evaluation's mean of the probabilities does, to 1e-6.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


class EnsembleModel(nn.Module):
    """Replicates of one architecture; forward gives the logit of their mean probability (module docstring)."""

    def __init__(self, replicates: list[nn.Module]):
        super().__init__()
        if not replicates:
            raise ValueError("an ensemble needs at least one replicate")
        if any(replicate.config != replicates[0].config for replicate in replicates):
            raise ValueError("the replicates of an ensemble must share one model config")
        self.replicates = nn.ModuleList(replicates)

    @property
    def config(self):
        return self.replicates[0].config

    def forward(self, *args, **kwargs) -> torch.Tensor:
        logits = torch.stack([replicate(*args, **kwargs) for replicate in self.replicates]).float()  # (N, B)
        return torch.logsumexp(F.logsigmoid(logits), dim=0) - torch.logsumexp(F.logsigmoid(-logits), dim=0)
