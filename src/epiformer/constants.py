"""The names every stage shares, each defined once."""

ELEMENTS = ("enhancer", "promoter")  # the two elements of a pair, in the order of every table and tensor
SEGMENT_IDS = {"enhancer": 0, "promoter": 1, "between": 2}  # a span base's segment, as the model embeds it
# What a span model reads between its elements: the genome's sequence, or that sequence shuffled (the length
# control, `data.length_control`: same length, N runs and elements). Element models read "sequence".
BETWEEN = ("sequence", "shuffled")
SPLITS = ("train", "val", "test")
SCORED_SPLITS = SPLITS[1:]  # what a fitted model is scored on: validation picks the threshold, test reports
VAL_PREDICTIONS = "val_predictions.tsv"  # a model folder's validation scores from training (its best epoch)
ALPHABET = "ACGT"  # one-hot channel order; N and other codes are all-zero rows
BASELINES = ("distance", "kmer", "distance_kmer", "propensity")  # the baselines `baselines.names` may list
# What each baseline's features read (`evaluation.baselines`): a pair's distance, its elements' sequence, or its
# elements' positive rates in training; a model's peer baseline reads what it reads (`evaluation.summary`).
BASELINE_READS = {
    "distance": ("distance",),
    "kmer": ("sequence",),
    "distance_kmer": ("sequence", "distance"),
    "propensity": ("element_rates",),
}
# A baseline fitted once on every cell line's train split, as a pooled model is trained, and scored on each cell
# line's test pairs: results/{cell}/{baseline}_pooled/, beside the pooled models it is their peer for.
POOLED_SUFFIX = "_pooled"


def baseline_of(name: str) -> str | None:
    """The baseline a result's name is (`kmer` for `kmer` and `kmer_pooled`), or None for a model's name."""
    base = name.removesuffix(POOLED_SUFFIX)
    return base if base in BASELINES else None


SHARD_FORMAT = 3  # 2: shards carry `distance`; 3: the manifest holds the window spec once (`windows`, `flank`)
WINDOW_FIELDS = ("chrom", "start", "end")  # per element: `{element}_{field}` columns of pairs and windows tables
# What a model reads (ModelConfig.input): the two element windows, or one sequence from the first to the second.
# A shard manifest's `kind` is the input its shards serve, in the same word (element window manifests omit it).
INPUTS = (ELEMENTS_INPUT, SPAN_INPUT) = ("elements", "span")
# Span shards (`epiformer.data.spans`, manifest kind SPAN_INPUT), versioned apart from SHARD_FORMAT; 2: coordinates
# only, the sequence cut from the genome store.
SPAN_SHARD_FORMAT = 2
GENOME_STORE, GENOME_STORE_FORMAT = "genome", 1  # the genome encoded once (`epiformer.data.genome_store`): kind, format
# Scores (predictions, predict, variants, tracks, transfer) are written as pandas writes a float by default: the
# shortest text that reads back to the same value of its dtype (float32 up to 9 digits, float64 up to 17), so every
# metric recomputes exactly from the files; a fixed "%.6g" made ties and moved AUROC in the 6th digit.
SCORE_FORMAT = None  # pandas' to_csv float_format
DISTANCE_BINS, DISTANCE_STRATA = 5, 10  # evaluate.distance_bins and .distance_strata (evaluation.distance): quantiles
BOOTSTRAP_UNITS = ("promoter", "element", "pair")  # evaluate.bootstrap_unit's choices (metrics.dependence_groups)
BOOTSTRAP_UNIT = "promoter"  # and its default: all test pairs of a promoter are resampled together
