rule bench:
    output:
        table="results/benchmarks/scaling.tsv",
        plot=report(
            "results/plots/scaling.png",
            caption="../report/scaling.rst",
            category="Scaling",
            labels={"figure": "measured on this machine"},
        ),
    log:
        "logs/benchmarks/scaling.log",
    conda:
        "../../envs/train.yaml"
    threads: 1
    resources:
        mem_mb=8000,
        runtime=60,
    params:
        lengths=config["benchmark"]["lengths"],
        softmax_max_tokens=config["benchmark"]["softmax_max_tokens"],
        model_max_tokens=config["benchmark"]["model_max_tokens"],
        device=config["benchmark"]["device"],
    script:
        "../../scripts/scaling.py"
