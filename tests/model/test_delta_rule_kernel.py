"""The C++ delta rule (`EPIFORMER_DELTA_KERNEL=cpp`): the recurrence's numbers and gradients, both ways, and
what happens where it cannot be built."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from epiformer.model import delta_rule as delta_rule_module
from epiformer.model import delta_rule_kernel
from epiformer.model.configs import ModelConfig
from epiformer.model.delta_rule import bidirectional_delta_rule, gated_delta_rule
from tests.model.test_delta_rule import GATED, random_inputs, right_padding, rule_id, run

pytestmark = pytest.mark.skipif(
    not delta_rule_kernel.available(), reason="the C++ delta rule does not build here (a C++ compiler and ninja)"
)


@pytest.fixture
def cpp(monkeypatch):
    monkeypatch.setenv(delta_rule_module.KERNEL_VARIABLE, "cpp")


def masked_gradients(out, inputs, mask, seed=3):
    valid = ~mask[:, None, :, None]
    weights = torch.randn(out.shape, dtype=out.dtype, generator=torch.Generator().manual_seed(seed)) * valid
    return out * valid, torch.autograd.grad((out * weights).sum(), inputs)


# Lengths around the kept states' spacing (64 tokens); value sizes the kernel unrolls (8, 16, 64) and one it
# does not (5: the general loops).
@pytest.mark.parametrize("gated", GATED, ids=rule_id)
@pytest.mark.parametrize("length, dim", [(1, 8), (63, 8), (64, 16), (65, 5), (200, 16), (130, 64)])
def test_the_cpp_rule_equals_the_token_by_token_one_with_its_gradients(cpp, gated, length, dim):
    inputs = random_inputs((2, 3, length, dim), gated)
    mask = right_padding(2, length, [length, max(1, length - 5)])
    assert delta_rule_module.scan_kernel(torch.device("cpu")) == delta_rule_module.CPP_KERNEL
    out, gradients = masked_gradients(run(gated, inputs, mask), inputs, mask)
    reference, expected = masked_gradients(run(gated, inputs, mask, naive=True), inputs, mask)
    assert torch.allclose(out, reference, atol=1e-12, rtol=1e-10)
    for got, want in zip(gradients, expected):
        assert torch.allclose(got, want, atol=1e-12, rtol=1e-10)


@pytest.mark.parametrize("gated", GATED, ids=rule_id)
def test_both_ways_in_cpp_is_the_mean_of_the_two_scans_with_left_and_right_padding(cpp, gated):
    inputs = random_inputs((2, 2, 150, 8), gated, seed=11)
    mask = right_padding(2, 150, [150, 120])
    mask[0, :7] = True  # padding at the start too: reversed, it is the end
    out = bidirectional_delta_rule(*inputs[:4], inputs[4] if gated else None, mask)
    forward = run(gated, inputs, mask, naive=True)
    backward = run(gated, [x.flip(2) for x in inputs], mask.flip(1), naive=True).flip(2)
    out, gradients = masked_gradients(out, inputs, mask)
    expected, want = masked_gradients((forward + backward) / 2, inputs, mask)
    assert torch.allclose(out, expected, atol=1e-12)
    for got, wanted in zip(gradients, want):
        assert torch.allclose(got, wanted, atol=1e-12)


def test_the_cpp_rule_passes_gradcheck_in_float64(cpp):
    inputs = random_inputs((1, 2, 70, 4), True, seed=5)
    assert torch.autograd.gradcheck(lambda *x: bidirectional_delta_rule(*x), inputs)


@pytest.mark.parametrize("gated", GATED, ids=rule_id)
def test_in_float32_the_cpp_and_the_chunked_rule_agree_to_1e5(monkeypatch, gated):
    inputs = [x.detach().float().requires_grad_() for x in random_inputs((2, 2, 1000, 16), gated, seed=7)]
    mask = right_padding(2, 1000, [1000, 777])
    results = {}
    for kernel in ("torch", "cpp"):
        monkeypatch.setenv(delta_rule_module.KERNEL_VARIABLE, kernel)
        out = bidirectional_delta_rule(*inputs[:4], inputs[4] if gated else None, mask)
        assert out.dtype == torch.float32
        results[kernel] = masked_gradients(out, inputs, mask)
    (chunked, chunked_gradients), (recurrent, recurrent_gradients) = results.values()
    assert (chunked - recurrent).abs().max() < 1e-5
    for got, want in zip(recurrent_gradients, chunked_gradients):
        assert (got - want).abs().max() < 1e-5 * max(1.0, want.abs().max().item())


def test_the_cpp_rule_gives_the_same_bits_on_one_thread_and_on_two(cpp):
    inputs = [x.detach().float().requires_grad_() for x in random_inputs((1, 4, 300, 16), True, seed=13)]
    threads = torch.get_num_threads()
    results = []
    try:
        for count in (1, 2):
            torch.set_num_threads(count)
            out = bidirectional_delta_rule(*inputs)
            results.append((out, torch.autograd.grad(out.square().sum(), inputs)))
    finally:
        torch.set_num_threads(threads)
    (one, one_gradients), (two, two_gradients) = results
    assert torch.equal(one, two)
    assert all(torch.equal(a, b) for a, b in zip(one_gradients, two_gradients))


def test_under_bf16_autocast_the_cpp_rule_computes_in_float32(cpp):
    q, k, v, beta, decay = (x.detach().float() for x in random_inputs((1, 2, 50, 8), True, seed=17))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = gated_delta_rule(q.bfloat16(), k.bfloat16(), v.bfloat16(), beta, decay)
    assert out.dtype == torch.bfloat16
    reference = gated_delta_rule(q.bfloat16().float(), k.bfloat16().float(), v.bfloat16().float(), beta, decay)
    assert (out.float() - reference).abs().max() < 1e-2


@pytest.mark.parametrize("attention", ["deltanet", "gated_deltanet"])
def test_a_delta_rule_model_scores_alike_and_learns_with_either_kernel(monkeypatch, attention):
    from epiformer.model.transformer import EPITransformer

    config = ModelConfig(attention=attention, d_model=32, n_layers=2, n_heads=2, d_ff=64, patch_size=4, dropout=0.0)
    torch.manual_seed(0)
    model = EPITransformer(config)
    generator = torch.Generator().manual_seed(1)
    batch = {
        name: torch.nn.functional.one_hot(torch.randint(0, 4, (3, width), generator=generator), 4).float()
        for name, width in (("enhancer", 200), ("promoter", 120))
    }
    scores = {}
    for kernel in ("torch", "cpp"):
        monkeypatch.setenv(delta_rule_module.KERNEL_VARIABLE, kernel)
        logits = model(**batch)
        gradient = torch.autograd.grad(logits.sum(), model.blocks[0].attention.qkv.weight)[0]
        scores[kernel] = (logits.detach(), gradient)
    (logits, gradient), (cpp_logits, cpp_gradient) = scores.values()
    assert (logits - cpp_logits).abs().max() < 1e-5
    assert (gradient - cpp_gradient).abs().max() < 1e-5 * max(1.0, gradient.abs().max().item())
    assert gradient.abs().max() > 0


def test_on_another_device_the_cpp_kernel_is_refused_clearly(monkeypatch):
    monkeypatch.setenv(delta_rule_module.KERNEL_VARIABLE, "cpp")
    with pytest.raises(RuntimeError, match="cpp runs on the CPU; here the device is cuda"):
        delta_rule_module.scan_kernel(torch.device("cuda"))


def test_auto_takes_the_cpp_kernel_on_the_cpu(monkeypatch):
    monkeypatch.setenv(delta_rule_module.KERNEL_VARIABLE, "auto")
    assert delta_rule_module.scan_kernel(torch.device("cpu")) == delta_rule_module.CPP_KERNEL


WITHOUT_A_COMPILER = """
import os, torch
from epiformer.model import delta_rule
q = torch.randn(1, 2, 10, 4)
os.environ[delta_rule.KERNEL_VARIABLE] = "auto"
print("auto:", delta_rule.scan_kernel(q.device))
delta_rule.bidirectional_delta_rule(q, q, q, torch.rand(1, 2, 10))
os.environ[delta_rule.KERNEL_VARIABLE] = "cpp"
delta_rule.bidirectional_delta_rule(q, q, q, torch.rand(1, 2, 10))
"""


def test_without_a_compiler_auto_falls_back_and_cpp_says_what_is_missing(tmp_path):
    environment = {**os.environ, "CXX": str(tmp_path / "no-such-compiler"), "TORCH_EXTENSIONS_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_A_COMPILER], env=environment, capture_output=True, text=True, timeout=300
    )
    assert done.returncode != 0
    assert "auto: None" in done.stdout
    assert "the C++ delta rule could not be built here" in done.stderr
    assert "EPIFORMER_DELTA_KERNEL=cpp needs the C++ delta rule" in done.stderr
    assert "apt-get install g++ ninja-build" in done.stderr


def test_the_scan_a_model_json_records_is_the_one_that_ran(monkeypatch):
    cpu = torch.device("cpu")
    monkeypatch.delenv(delta_rule_module.KERNEL_VARIABLE, raising=False)
    assert delta_rule_module.scan_kernel_name(cpu) == "torch"
    for choice in ("cpp", "auto"):
        monkeypatch.setenv(delta_rule_module.KERNEL_VARIABLE, choice)
        assert delta_rule_module.scan_kernel_name(cpu) == "cpp"


def test_a_build_lock_left_by_a_killed_build_is_removed_and_the_kernel_builds(tmp_path):
    # torch waits for ever on the lock of a build that was killed, however recently it was killed.
    code = (
        "from epiformer.model import delta_rule_kernel as k; from torch.utils import cpp_extension as c; import torch;"
        "print(c._get_build_directory('epiformer_delta_rule_' + torch.backends.cpu.get_cpu_capability().lower(), "
        "False))"
    )
    environment = {**os.environ, "TORCH_EXTENSIONS_DIR": str(tmp_path)}
    build = subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True, text=True, check=True)
    lock = Path(build.stdout.strip()) / "lock"
    assert lock.parent.is_relative_to(tmp_path)
    lock.write_text("")
    built = subprocess.run(
        [sys.executable, "-c", "from epiformer.model import delta_rule_kernel as k; print(k.available())"],
        env=environment, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert built.stdout.strip() == "True", built.stderr[-2000:]
    assert "left by a build that did not finish" in built.stderr


def test_scoring_a_model_under_another_scan_than_it_trained_with_says_how_to_match_it(monkeypatch, caplog, tmp_path):
    from epiformer.inference.trained_model import warn_of_another_scan

    cpu = torch.device("cpu")
    monkeypatch.delenv(delta_rule_module.KERNEL_VARIABLE, raising=False)
    with caplog.at_level("WARNING"):
        warn_of_another_scan(tmp_path, {"delta_kernel": "torch"}, cpu)
        warn_of_another_scan(tmp_path, {"delta_kernel": None}, cpu)  # M7 runs no scan
        warn_of_another_scan(tmp_path, {}, cpu)  # a model.json from before the field
    assert caplog.text == ""
    with caplog.at_level("WARNING"):
        warn_of_another_scan(tmp_path, {"delta_kernel": "cpp"}, cpu)
    assert "trained with the cpp scan" in caplog.text and "Set EPIFORMER_DELTA_KERNEL=cpp" in caplog.text


def test_the_cpp_rules_output_is_its_own_tensor_and_keeps_no_states_without_a_gradient(cpp):
    from epiformer.model.delta_rule_kernel import recurrent_gated_delta_rule

    q, k, v, beta, decay = random_inputs((1, 2, 100, 8), True, seed=19)
    log_decay = decay.log()
    out = recurrent_gated_delta_rule(q, k, v, beta, log_decay, both_ways=True)
    out.add_(1.0)  # in place on the result: no view of the Function's own buffer
    torch.autograd.grad(out.sum(), q)
    with torch.no_grad():
        scored = recurrent_gated_delta_rule(q, k, v, beta, log_decay, both_ways=True)
    assert scored.grad_fn is None
    assert torch.allclose(scored + 1.0, out.detach())
