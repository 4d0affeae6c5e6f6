"""Linear (M7) against softmax attention as the sequence grows: time and peak memory.

The attention alone, the whole model and the model without attention, side by side in one
run; prints the ratios (speed-up, time per token, attention overhead). The same code runs
as `snakemake scaling`, which also draws results/plots/scaling.png. Options as in
`python -m epiformer.scaling --help`, e.g.
    python benchmarks/scaling.py --lengths 1000 5000 20000 --out scaling.tsv
"""

from epiformer.scaling import main

if __name__ == "__main__":
    main()
