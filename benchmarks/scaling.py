"""How M7 and the softmax Transformer scale with sequence length: time and peak memory, side by side.

The measuring code is the package's (`epiformer.model.scaling`, which `snakemake scaling` runs too);
its docstring says what each component and column is. Usage:
    python benchmarks/scaling.py --lengths 1000 5000 20000 --out scaling.tsv
"""

from epiformer.model.scaling import main

if __name__ == "__main__":
    main()
