"""The model and training settings, checked as soon as they are made (no PyTorch here).

Their defaults are the config schema's (workflow/schemas/config.schema.yaml, which fills in
what a config leaves out); tests/model/test_configs.py holds the two equal. The workflow builds
both from the config while it builds the DAG (workflow/rules/common.smk), so a bad setting
fails before any job runs, not hours later when training starts.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from epiformer.constants import BETWEEN, ELEMENTS_INPUT, INPUTS, SPAN_INPUT

# linear: M7's ELU+1 kernel; softmax: its twin; deltanet and gated_deltanet: the delta rule and the
# gated delta rule, each scanned forward and backward (model.delta_rule).
ATTENTIONS = ("linear", "softmax", "deltanet", "gated_deltanet")
DELTA_RULES = ("deltanet", "gated_deltanet")
# How bases become tokens: M7's linear projection, or filters and each channel's largest response
# in a patch, through ReLU (conv) or exp (conv_exp), or a tower of convolutions and pooling that
# reaches coarse tokens (32, 128 bp) at a fraction of a wide filter's cost (conv_tower).
STEMS = ("linear", "conv", "conv_exp", "conv_tower")
TOWER_FIRST_POOL = 8  # conv_tower: bases its first stage's filters are pooled over (the first stage's resolution)
# How a conv stem turns each filter's responses within a patch into one value: the largest ("max"), or a
# softmax-weighted mean (Enformer's attention pooling), which reaches the largest as the filter sharpens but
# gives every position gradient in proportion to its weight, so a filter that only faintly resembles a motif
# still learns from its sites; with a max over 32 bases it learns from them only when they win the patch.
PATCH_POOLS = ("max", "softmax")
# How tokens become one vector: M7's mean over valid tokens, each channel's maximum, or its softmax-weighted mean
# (a learned sharpness per channel, as the softmax patch pool): a max over a span's thousands of tokens gives one
# token a channel gradient, so a filter learns from a border only once the border is already its best match.
POOLS = ("mean", "max", "softmax")
# What tells tokens apart by place: sinusoids added to each token (Vaswani et al.), or nothing. A max pool over a
# span's tokens reads the span's length off the sinusoids (the longest wavelengths reach their peak only in long
# spans): at 128 bp a token, span models learned that shortcut, which the long demo's labels do not reward
# (their scores followed length, r -0.95), instead of the insulator.
POSITIONS = ("sinusoidal", "none")
# Training batches of more tokens than this (batch x tokens: a 262 kb span at 4 bp a token) keep
# only each block's input and recompute the rest in the backward pass (activation checkpointing),
# and run the conv stem in chunks of this many tokens: memory then grows with the span at a few
# activations a token, not all of them. Same values and gradients (tested); more compute, so only
# above the size where memory matters (element windows and the demos' spans stay below it).
RECOMPUTE_TOKENS = 65_536


@dataclass
class ModelConfig:
    """The Transformer's architecture: `models.<name>` of the config, less MODEL_TRAINING_KEYS (`architecture`)."""

    attention: str = "linear"  # "linear" (M7, ELU+1 kernel), "softmax" (the baseline), "deltanet", "gated_deltanet"
    d_model: int = 128
    n_layers: int = 4
    n_heads: int = 8
    d_ff: int = 512  # 4 x d_model, as in Vaswani et al.
    patch_size: int = 10
    kernel_size: int = 20
    dropout: float = 0.1
    distance: bool = False  # join the pair's log genomic distance to the pooled sequence representation
    input: str = "elements"  # "elements" (two windows) or "span" (everything from one window to the other)
    # "linear" (M7), "conv" (kernel_size-wide filters, ReLU, max per patch), "conv_exp" (exp), or "conv_tower"
    # (kernel_size-wide exp filters pooled over 8 bp, then convolution and pooling stages up to patch_size)
    stem: str = "linear"
    pool: str = "mean"  # "mean" (M7), "max" or "softmax" over valid tokens (POOLS)
    element_pool: bool = False  # the head also reads each element's tokens pooled on their own
    # Span models: each element window also read at this many bases a token by a stem of its own, those tokens
    # joined to the span's (patch_size) and read by each element's pool (element_pool); 0: the span's tokens only
    element_patch_size: int = 0
    # Conv stems: each filter's responses within a patch (conv_tower: within its first stage's 8 bp) pooled by
    # "max" or "softmax" (PATCH_POOLS; a learned sharpness per filter, starting at 2, as Enformer's pooling)
    patch_pool: str = "max"
    # Each block starts as the identity (its attention's and feed-forward's output projections zero), so the
    # stem's tokens reach the pool unchanged at first and the blocks grow in (ReZero, Fixup, T-Fixup)
    zero_init: bool = False
    positions: str = "sinusoidal"  # POSITIONS: sinusoids added to the tokens, or none (a bag of tokens and segments)
    # A span model's between segment: "sequence" (the genome's) or "shuffled", the length control
    # (`data.length_control`: same length, N runs and elements, its bases shuffled).
    between: str = "sequence"
    # Tokens over which positions must stay distinct: the workflow sets it for a span model to
    # the longest span windows.max_span allows, in tokens. 0: the standard table (base 10,000,
    # whose longest wavelength, 2 pi 10,000^((d - 2) / d) tokens, ~35k at d_model 32, is the
    # furthest it tells positions apart).
    max_positions: int = 0

    def __post_init__(self):
        if self.attention not in ATTENTIONS:
            raise ValueError(f"attention must be one of {', '.join(ATTENTIONS)}, not {self.attention!r}")
        if self.input not in INPUTS:
            raise ValueError(f"input must be one of {', '.join(INPUTS)}, not {self.input!r}")
        if self.stem not in STEMS:
            raise ValueError(f"stem must be one of {', '.join(STEMS)}, not {self.stem!r}")
        if self.between not in BETWEEN:
            raise ValueError(f"between must be one of {', '.join(BETWEEN)}, not {self.between!r}")
        if self.patch_pool not in PATCH_POOLS:
            raise ValueError(f"patch_pool must be one of {', '.join(PATCH_POOLS)}, not {self.patch_pool!r}")
        if self.patch_pool != "max" and self.stem == "linear":
            raise ValueError(
                f"patch_pool {self.patch_pool!r} pools a conv stem's filters: it needs stem conv, conv_exp, conv_tower"
            )
        if self.positions not in POSITIONS:
            raise ValueError(f"positions must be one of {', '.join(POSITIONS)}, not {self.positions!r}")
        if self.between != "sequence" and not self.reads_spans:
            raise ValueError(f"between {self.between!r} (the length control) needs input: span")
        if self.pool not in POOLS:
            raise ValueError(f"pool must be one of {', '.join(POOLS)}, not {self.pool!r}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")
        if self.max_positions < 0:
            raise ValueError(f"max_positions must be 0 or more, not {self.max_positions}")
        if self.element_patch_size:
            self.check_element_patch_size()
        # conv_tower's kernel_size is its first stage's, pooled over TOWER_FIRST_POOL bases, not over the patch.
        tower = self.stem == "conv_tower"
        if tower and not (self.patch_size >= TOWER_FIRST_POOL and self.patch_size & (self.patch_size - 1) == 0):
            raise ValueError(
                f"stem conv_tower pools by 2 and 4 from {TOWER_FIRST_POOL} bp: patch_size must be a power of two "
                f"of at least {TOWER_FIRST_POOL} (8, 16, 32, 64, 128, ...), not {self.patch_size}"
            )
        # A conv stem's kernel is its filters' width, pooled over the patch: any width reads any patch.
        if self.stem == "linear" and self.kernel_size < self.patch_size:
            raise ValueError(f"kernel_size ({self.kernel_size}) must be >= patch_size ({self.patch_size})")

    def check_element_patch_size(self) -> None:
        """element_patch_size: for span models only, and a patch the stem can read (as for patch_size)."""
        if not self.reads_spans:
            raise ValueError(f"element_patch_size {self.element_patch_size} reads a span's elements: needs input: span")
        if not self.element_pool:
            raise ValueError(
                f"element_patch_size {self.element_patch_size} gives each element's pool its own tokens: "
                "it needs element_pool: true"
            )
        if self.element_patch_size < 0:
            raise ValueError(f"element_patch_size must be 0 (off) or more, not {self.element_patch_size}")
        try:
            self.element_stem()
        except ValueError as error:
            raise ValueError(f"element_patch_size {self.element_patch_size}: {error}") from None

    @property
    def reads_spans(self) -> bool:
        """Whether the model reads a span (one sequence from one element to the other) or two element windows:
        the one place that tells, for the batches, the training loop and scoring alike."""
        return self.input == SPAN_INPUT

    def element_stem(self) -> ModelConfig:
        """The stem settings of a span model's element tokens: its own, at element_patch_size bases a token."""
        fine = {"patch_size": self.element_patch_size, "element_patch_size": 0}
        return replace(self, **fine, input=ELEMENTS_INPUT, between="sequence")

    def to_dict(self) -> dict:
        return asdict(self)


# A config's `models:` entry may set these `train:` keys for itself: a budget, or a recipe of its own (candidate
# recipes as models of their own, among which the run chooses on validation: evaluation.selection).
MODEL_TRAIN_OVERRIDES = ("max_tokens", "learning_rate", "weight_decay")
# Keys of a config's `models:` entry that say how the model is trained, not what it is: `pooled` (on
# every cell line), `replicates` and MODEL_TRAIN_OVERRIDES (the model's own train.replicates, train.max_tokens,
# ...), `length_control` (the model's own top-level length_control: whether a span model gets one) and
# `train_first` (its training starts before the others when cores are short: training.schedule).
MODEL_TRAINING_KEYS = ("pooled", "replicates", *MODEL_TRAIN_OVERRIDES, "length_control", "train_first")


def architecture(entry: dict) -> dict:
    """A config's `models:` entry less MODEL_TRAINING_KEYS: ModelConfig's keyword arguments."""
    return {key: value for key, value in entry.items() if key not in MODEL_TRAINING_KEYS}


LENGTH_CONTROL_SUFFIX = "_length_control"  # the name of a span model's length control: `<name>_length_control`


def with_length_controls(models: dict, default: bool = True) -> dict:
    """A config's `models:` with, after each span model that reads the genome's between-sequence, its length
    control (`<name>_length_control`: the same entry with `between: shuffled`, `data.length_control`).

    `default` is the config's `length_control`; a model's own `length_control` overrides it. An entry of
    the control's name the config gives itself is kept as it is (say, with fewer replicates).
    """
    controlled = {}
    for name, entry in models.items():
        controlled.setdefault(name, entry)
        wanted = entry.get("length_control", default)
        if wanted and entry.get("input") == SPAN_INPUT and entry.get("between", "sequence") == "sequence":
            control = name + LENGTH_CONTROL_SUFFIX
            made = {key: value for key, value in entry.items() if key != "length_control"}
            controlled.setdefault(control, models.get(control, {**made, "between": "shuffled"}))
    return controlled


def length_control_of(models: dict, name: str) -> str | None:
    """The name of model `name`'s length control among `models` (a config's, or ModelConfig dicts), if it has one:
    the model whose settings differ from its own only in `between: shuffled`, `<name>_length_control` first (two
    span models of one architecture and different recipes each have their own)."""

    def settings(entry: dict) -> dict:
        return {key: value for key, value in architecture(entry).items() if key != "between"}

    entry = models[name]
    if entry.get("between", "sequence") != "sequence":
        return None
    named = name + LENGTH_CONTROL_SUFFIX
    return next(
        (
            other
            for other, candidate in sorted(models.items(), key=lambda item: item[0] != named)
            if candidate.get("between") == "shuffled" and settings(candidate) == settings(entry)
        ),
        None,
    )


def with_span_positions(settings: dict, max_span: int) -> dict:
    """A model's settings (ModelConfig keywords) with, for a span model, `max_positions`: the tokens of the
    longest span `max_span` allows, so that its positions stay distinct over every span it can read."""
    if settings.get("input") != SPAN_INPUT:
        return settings
    patch = settings.get("patch_size", ModelConfig.patch_size)
    return {**settings, "max_positions": -(-max_span // patch)}


SCORING_BATCH_SIZE = 256  # element-window pairs in a batch when scoring (no backward pass to keep)


@dataclass
class TrainConfig:
    """How a model is trained: the config's `train:` block, plus `augment.reverse_complement`.

    The shift is not a config key here: training shifts each window by up to the flank its
    shards were encoded with (`augment.max_shift`, recorded once in the shard manifest).
    `max_shift` (Python callers only) asks for less; asking for more than the flank raises.
    """

    epochs: int = 10
    batch_size: int = 32
    learning_rate: float = 0.003
    weight_decay: float = 0.01
    warmup_fraction: float = 0.05
    grad_clip: float = 1.0
    reverse_complement: bool = True
    max_shift: int | None = None  # None: the shards' flank
    seed: int = 0
    device: str = "auto"
    threads: int = 1  # CPU threads of each training process
    loader_workers: int = 0
    compile: bool = False
    patience: int = 0  # epochs without a better validation AUPRC before stopping; 0 never stops early
    devices: int = 1  # data-parallel processes (DDP); batch_size is the global batch
    max_tokens_per_batch: int = 16384  # span models: model tokens in each process's batch, padding included
    # Training budget in model tokens (padding left out), all processes together; 0: none. It ends training
    # at the same step on any machine, and the learning-rate schedule ends there with it.
    max_tokens: int = 0
    max_minutes: float = 0.0  # training time budget; when spent, mid-epoch if need be, the best epoch so far is kept
    checkpoint_minutes: float = 10.0  # also checkpoint within an epoch this often (0: at epoch ends only)
    replicates: int = 1  # models trained per (cell line, model), seeds seed, seed + 1, ...; scored as their ensemble

    def replicate_seed(self, replicate: int) -> int:
        """The seed of replicate 1, 2, ...: replicate 1 is the model a run without replicates trains."""
        return self.seed + replicate - 1

    @property
    def scoring_tokens(self) -> int:
        """Model tokens a span batch may hold when scoring: 4 x the training budget (no backward pass to keep)."""
        return 4 * self.max_tokens_per_batch

    def __post_init__(self):
        if self.replicates < 1:
            raise ValueError(f"train.replicates must be 1 (one model) or more, not {self.replicates}")
        if self.max_tokens < 0:
            raise ValueError(f"train.max_tokens must be 0 (no budget) or more, not {self.max_tokens}")
        if self.max_minutes < 0:
            raise ValueError(f"train.max_minutes must be 0 (no budget) or more, not {self.max_minutes}")
        if self.max_tokens_per_batch < 1:
            raise ValueError(f"train.max_tokens_per_batch must be at least 1, not {self.max_tokens_per_batch}")
        if self.batch_size % self.devices:
            raise ValueError(
                f"train.batch_size ({self.batch_size}) must divide by train.devices ({self.devices}): "
                "each process takes an equal share of every batch."
            )


SCORING_TOKENS = TrainConfig().scoring_tokens  # model tokens in a span batch when scoring, at the default budget
