rule scaling:
    output:
        table="results/scaling.tsv",
        plot=report(
            "results/plots/scaling.png",
            caption="../report/scaling.rst",
            category="Scaling",
            labels={"figure": "measured on this machine"},
        ),
    log:
        "logs/scaling.log",
    conda:
        "../../envs/pytorch.yaml"
    threads: 1
    resources:
        mem_mb=8000,
        runtime=60,
    params:
        lengths=config["scaling"]["lengths"],
        softmax_max_tokens=config["scaling"]["softmax_max_tokens"],
        model_max_tokens=config["scaling"]["model_max_tokens"],
        device=config["scaling"]["device"],
    script:
        "../../scripts/scaling.py"
