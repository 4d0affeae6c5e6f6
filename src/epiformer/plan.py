"""The run's plan: what a checked config asks the workflow to train, score and compare, decided once.

`RunPlan(config, cell_lines)` turns the config (after its schema filled in the defaults) and the
sample sheet's cell lines into the lists and answers the rules need: which models there are
(each span model beside its length control), which are pooled or replicated, which read spans,
which baselines are fitted pooled beside pooled models, what each training job reads of
`train:`, where each model's folder is, and what its scoring jobs ask for. It raises ValueError,
naming the key and the fix, for a config the workflow cannot run. workflow/rules/common.smk
builds one plan and hands its answers to the rules; nothing here reads a file. Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from epiformer.constants import POOLED_SUFFIX, SPAN_INPUT
from epiformer.data.splits import SplitSpec
from epiformer.data.windows import WindowSpec
from epiformer.model.configs import (
    MODEL_TRAIN_OVERRIDES,
    ModelConfig,
    TrainConfig,
    architecture,
    with_length_controls,
    with_span_positions,
)
from epiformer.training.replicates import replicate_names
from epiformer.training.schedule import training_priorities

SPAN_ONLY_TRAIN_KEYS = ("max_tokens_per_batch",)  # train: keys only span models read


@dataclass
class RunPlan:
    """The plan of one run (module docstring); `config` is the workflow's config, its `models` with length controls."""

    config: dict
    cell_lines: list[str]
    models: list[str] = field(init=False)

    def __post_init__(self):
        self.config = {**self.config, "models": with_length_controls(self.config["models"], self.length_control)}
        self.models = list(self.config["models"])
        self.check()

    @cached_property
    def length_control(self) -> bool:
        return bool(self.config.get("length_control", True))

    # What is trained and what is scored.
    @cached_property
    def baselines(self) -> list[str]:
        return list(self.config["baselines"]["names"])

    @cached_property
    def pooled_models(self) -> list[str]:
        """Models trained once on every cell line (results/pooled/{model}/) and evaluated on each."""
        return [name for name in self.models if self.entry(name).get("pooled", False)]

    @cached_property
    def pooled_baselines(self) -> list[str]:
        """Beside pooled models, each baseline fitted pooled too, so that they meet a peer that saw the same pairs."""
        return [name + POOLED_SUFFIX for name in self.baselines] if self.pooled_models else []

    @cached_property
    def evaluated(self) -> list[str]:
        """Every result a cell line gets: the models, then the baselines (tables and plots show them side by side)."""
        return self.models + self.baselines + self.pooled_baselines

    @cached_property
    def cell_models(self) -> list[str]:
        """Models trained per cell line."""
        return [name for name in self.models if name not in self.pooled_models]

    @cached_property
    def transfer_models(self) -> list[str]:
        """Models scored on every other cell line's test pairs: with one cell line that is its own test again."""
        return self.cell_models if len(self.cell_lines) > 1 else []

    @cached_property
    def span_models(self) -> list[str]:
        return [name for name in self.models if self.model_config(name).get("input") == SPAN_INPUT]

    @cached_property
    def element_models(self) -> list[str]:
        """Models of one cell line that read element windows (what explain and variants take)."""
        return [name for name in self.cell_models if name not in self.span_models]

    @cached_property
    def explained_span_models(self) -> list[str]:
        """Span models of one cell line explained over their whole span (rule span_attributions); not a length
        control, which reads shuffled sequence between its elements: nothing there to explain."""
        return [
            name
            for name in self.cell_models
            if name in self.span_models and self.model_config(name).get("between", "sequence") == "sequence"
        ]

    @cached_property
    def replicated_models(self) -> list[str]:
        return [name for name in self.models if self.replicate_count(name) > 1]

    @cached_property
    def replicates(self) -> list[str]:
        """The folder names of a replicated model's replicates (one count for every replicated model of a run)."""
        return replicate_names(max((self.replicate_count(name) for name in self.replicated_models), default=1))

    @cached_property
    def train_config(self) -> TrainConfig:
        return TrainConfig(**self.config["train"], reverse_complement=self.config["augment"]["reverse_complement"])

    @cached_property
    def training_priorities(self) -> dict[str, int]:
        """Snakemake priority of each model's training jobs (`training.schedule`)."""
        return training_priorities(self.config["models"], self.config["train"])

    # Each model.
    def entry(self, name: str) -> dict:
        """The model's entry in `models:` (a length control's as made by `with_length_controls`)."""
        return self.config["models"][name]

    def model_config(self, name: str) -> dict:
        """The model's architecture, as ModelConfig's keyword arguments; a span model's positions reach over the
        longest span windows.max_span allows."""
        return with_span_positions(architecture(self.entry(name)), self.config["windows"]["max_span"])

    def replicate_count(self, name: str) -> int:
        """How many times a model is trained: its own `replicates`, else train.replicates."""
        return int(self.entry(name).get("replicates", self.config["train"].get("replicates", 1)))

    def replicates_of(self, name: str) -> list[str]:
        """A model's replicate folders, relative to its folder: `replicates` if it is replicated, else none."""
        return self.replicates if name in self.replicated_models else []

    def train_params(self, name: str, replicate: int | str | None = None) -> dict:
        """The train: block one training job reads: span-only keys left out for element models, `replicates` left
        out (the count changes the folders, not a replicate's training), the model's own MODEL_TRAIN_OVERRIDES,
        and the replicate's seed (so changing any of them re-runs only what it changes)."""
        skip = ("replicates",) + (() if name in self.span_models else SPAN_ONLY_TRAIN_KEYS)
        params = {key: value for key, value in self.config["train"].items() if key not in skip}
        params.update({key: self.entry(name)[key] for key in MODEL_TRAIN_OVERRIDES if key in self.entry(name)})
        if replicate is not None:
            params["seed"] = self.train_config.replicate_seed(int(replicate))
        return params

    def model_dir(self, cell: str, name: str) -> str:
        """Where a model's weights and model.json are: its own per cell line, or the one pooled model."""
        return f"results/pooled/{name}" if name in self.pooled_models else f"results/{cell}/{name}"

    def shards_of(self, cell: str, name: str) -> str:
        """The shard folder a model reads: span shards for span models, window shards otherwise."""
        return f"results/{cell}/span_shards" if name in self.span_models else f"results/{cell}/shards"

    def scoring_tokens(self, name: str) -> int:
        """Model tokens a span batch may hold when scoring (TrainConfig.scoring_tokens); 0 for element models."""
        return self.train_config.scoring_tokens if name in self.span_models else 0

    def scoring_device(self, name: str) -> str:
        """Where a model is scored: a span model where it trained (train.device; long spans make scoring as costly
        as an epoch), an element model on the CPU."""
        return self.config["train"]["device"] if name in self.span_models else "cpu"

    def scoring_gpus(self, name: str) -> int:
        """GPUs a scoring job of the model asks the cluster for."""
        return 0 if self.scoring_device(name) == "cpu" else 1

    def sequence_only_twin(self, name: str) -> str | None:
        """The model that differs from `name` only in `distance`, if the config has one."""

        def settings(model):  # every setting, defaults included, what it is trained on and its own recipe
            entry = self.entry(model)
            recipe = {key: entry.get(key) for key in MODEL_TRAIN_OVERRIDES}
            architecture = ModelConfig(**self.model_config(model)).to_dict()
            return {**architecture, **recipe, "pooled": entry.get("pooled", False), "distance": False}

        twins = [other for other in self.models if settings(other) == settings(name)]
        return next((other for other in twins if not self.entry(other).get("distance", False)), None)

    def windows_params(self) -> dict:
        """The windows stage's settings (WindowSpec): `max_span` only when some model reads spans, so that without
        span models no pair is dropped for its span and changing windows.max_span re-runs nothing."""
        return {**self.config["windows"], "max_span": self.config["windows"]["max_span"] if self.span_models else None}

    # The checks.
    def check(self) -> None:
        """Raise ValueError, naming the key and the fix, for a config this plan cannot run."""
        clash = sorted(set(self.models) & set(self.baselines))
        if clash:
            raise ValueError(
                f"models: {', '.join(clash)} is also a baseline's name; rename the model (results/{{cell}}/{{name}}/ "
                "would hold both)."
            )
        counts = {name: self.replicate_count(name) for name in self.replicated_models}
        if len(set(counts.values())) > 1:
            raise ValueError(
                "models: replicated models must share one replicate count (a model's `replicates`, else "
                "train.replicates): " + ", ".join(f"{name} {count}" for name, count in counts.items())
                + ". Give each either that count or replicates: 1."
            )  # fmt: skip
        for name in self.models:
            try:
                ModelConfig(**self.model_config(name))
            except (TypeError, ValueError) as error:
                raise ValueError(f"models: {name}: {error}. Fix that model's settings in the config.") from None
        try:
            TrainConfig(**self.config["train"], reverse_complement=self.config["augment"]["reverse_complement"])
        except (TypeError, ValueError) as error:
            raise ValueError(f"train: {error}. Fix it in the config.") from None
        for name in self.pooled_models:
            if name in self.span_models:
                raise ValueError(
                    f"models: {name!r} reads spans and is pooled; span models are trained per cell line for now "
                    "(set pooled: false, or input: elements)."
                )
        try:
            WindowSpec(**self.windows_params())
            SplitSpec.from_config(self.config["split"]).check()
        except ValueError as error:
            raise ValueError(f"{error} (config)") from None
        for name in self.models:
            if self.entry(name).get("distance", False) and self.sequence_only_twin(name) is None:
                raise ValueError(
                    f"models: {name!r} is given the genomic distance, but no model has the same settings without it. "
                    "Add that sequence-only twin (e.g. a copy of the entry with distance: false): a distance-aware "
                    "model is reported only beside the sequence-only model, to show what the distance adds."
                )
