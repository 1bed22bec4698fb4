"""benchmarks/cost/gpu_scale.py at the tiny shape on the CPU: every phase runs and its figures are sane."""

from __future__ import annotations

import importlib
import json

import pytest
import torch


def load_script():
    return importlib.import_module("benchmarks.cost.gpu_scale")


def test_shapes_are_the_qwen2_5_configs():
    shapes = load_script().SHAPES
    assert shapes["0.5b"] == dict(hidden_size=896, num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2, intermediate_size=4864)
    assert shapes["1.5b"] == dict(hidden_size=1536, num_hidden_layers=28, num_attention_heads=12, num_key_value_heads=2, intermediate_size=8960)
    assert shapes["7b"] == dict(hidden_size=3584, num_hidden_layers=28, num_attention_heads=28, num_key_value_heads=4, intermediate_size=18944)


def test_tiny_shape_runs_every_phase_on_cpu(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path / "cache"))
    out_json = tmp_path / "result.json"
    result = load_script().main(["--shape", "tiny", "--epochs", "2", "--device", "cpu", "--workdir", str(tmp_path / "work"),
                                 "--checkpoint-every", "2", "--decode-bench", "--compare-no-cache", "--json", str(out_json)])
    printed = capsys.readouterr().out
    for phase in ("generate", "agent", "env_update", "checkpoint"):
        assert f"phase={phase} seconds=" in printed
    assert "frac_of_bw_limit=" in printed and "mfu=" in printed and "decode=static" in printed
    last = printed.strip().splitlines()[-1]
    written = json.loads(out_json.read_text())  # benchmarks.frame.write_result's shape: the RESULT object is its figures
    assert last.startswith("RESULT ") and json.loads(last[len("RESULT "):]) == written["figures"]
    assert written["script"] == "benchmarks/cost/gpu_scale.py" and written["settings"]["shape"] == "tiny"
    assert written["machine"]["cpu"] and written["machine"]["torch_threads"] >= 1 and written["finished_at"]

    assert result["hardware"]["copy_bandwidth_gb_per_s"] > 0.1 and result["hardware"]["peak_tflops"] > 0.001
    assert result["params"]["env"] == result["params"]["agent"] > 50_000
    assert [e["epoch"] for e in result["epochs"]] == [1, 2]
    for epoch in result["epochs"]:
        assert epoch["valid"] == epoch["candidates"] == 8, "every synthetic generation is a valid task"
        assert len(set(epoch["p_hat"])) > 1, "scores vary, so the curriculum has something to weigh"
        assert epoch["agent_steps"] > 0 and epoch["env_examples"] > 0, "GRPO and RWR both trained"
        phases = epoch["phases"]
        assert sum(p["share_of_epoch"] for p in phases.values()) <= 1.0 + 1e-6
        gen = phases["generate"]
        assert gen["seconds"] > 0 and gen["tokens"] > 0 and 0 < gen["frac_of_bw_limit"] < 1
        for name in ("agent", "env_update"):
            assert phases[name]["tokens_per_s"] > 0 and 0 < phases[name]["mfu"] < 1, name
        assert "max_allocated_mib" not in gen, "no CUDA memory figures on the CPU"
    checkpoints = tmp_path / "work" / "run" / "checkpoints"
    assert sorted(p.name for p in checkpoints.glob("epoch_*")) == ["epoch_0002"], "checkpoint_every 2: only epoch 2"
    assert result["epochs"][0]["phases"]["checkpoint"]["seconds"] < result["epochs"][1]["phases"]["checkpoint"]["seconds"]
    decode = result["decode"]
    for name in ("dynamic", "static", "no_cache"):
        assert decode[name]["tokens_per_s"] > 0 and 0 < decode[name]["frac_of_bw_limit"] < 1


def test_a_bounded_mixture_and_a_decode_only_run(tmp_path, capsys, monkeypatch):
    """The options the H100 run needed: one task an epoch (random weights never stop early, so
    every rollout runs to its cap), and --epochs 0 for the decode benchmark and the profile alone."""
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path / "cache"))
    script = load_script()
    work = ["--shape", "tiny", "--device", "cpu", "--workdir", str(tmp_path / "work")]
    bounded = script.main(work + ["--epochs", "1", "--tasks", "2", "--max-new", "1", "--pool-base", "0", "--pool-history", "0",
                                  "--agent-batch", "2", "--agent-accumulation", "2", "--agent-cache-implementation", "static",
                                  "--find-nonfinite"])
    epoch = bounded["epochs"][0]
    assert epoch["agent_steps"] == 1, "one task x num_generations 4 = one GRPO step of two micro-batches of 2"
    assert epoch["candidates"] == 2

    profile = tmp_path / "profile.txt"
    only = script.main(work + ["--epochs", "0", "--decode-bench", "--decode-compile", "--profile-generate", str(profile)])
    assert only["epochs"] == [], "--epochs 0 runs no epoch"
    assert {"dynamic", "static", "static_compiled"} <= set(only["decode"])
    assert only["profile"]["new_tokens"] > 0 and "aten::" in profile.read_text()
    with pytest.raises(SystemExit):
        script.main(work + ["--epochs", "0"])  # nothing to measure


def test_bad_arguments_are_refused():
    with pytest.raises(SystemExit):
        load_script().main(["--shape", "13b"])


@pytest.mark.slow  # about 25 s: the benchmark harness end to end
def test_checkpoint_overlap_compares_foreground_and_background_checkpoints(tmp_path, capsys, monkeypatch):
    """benchmarks/cost/checkpoint_overlap.py: both modes run the same epochs; the background run's
    measured epochs all write in the background, and its last write is waited for and reported."""
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path / "cache"))
    overlap = importlib.import_module("benchmarks.cost.checkpoint_overlap")
    result = overlap.main(["--shape", "tiny", "--device", "cpu", "--epochs", "2", "--workdir", str(tmp_path / "work")])
    printed = capsys.readouterr().out
    assert "background write of epoch 1:" in printed and "background write of epoch 2:" in printed
    fg, bg = result["runs"]["foreground"], result["runs"]["background"]
    assert "background_write_seconds" not in fg and bg["background_write_seconds"] > 0
    assert set(result["ratios"]) == {"epoch_seconds", "checkpoint_seconds", "training_seconds"}
    assert all(value > 0 for value in result["ratios"].values())
    checkpoints = tmp_path / "work" / "run" / "checkpoints"
    assert sorted(p.name for p in checkpoints.glob("epoch_*")) == ["epoch_0001", "epoch_0002"], "both background writes completed"
    assert printed.strip().splitlines()[-1].startswith("RESULT ")
    with pytest.raises(SystemExit):
        overlap.main(["--shape", "tiny", "--checkpoint-background"])


def test_find_nonfinite_names_the_first_module_whose_output_is_not_finite():
    """--find-nonfinite: where an inf/NaN starts (the tiny shape's CUDA failure was not diagnosed)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    script = load_script()
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(vocab_size=64, **script.SHAPES["tiny"])).eval()
    script.watch_nonfinite(model, "agent")
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        model(input_ids=ids)  # finite: no complaint
        model.model.layers[1].mlp.down_proj.weight[0, 0] = float("inf")
        with pytest.raises(script.NonFiniteOutput, match=r"agent: model\.layers\.1\.mlp\.down_proj \(Linear\) produced .* finite True"):
            model(input_ids=ids)


def test_find_nonfinite_names_where_a_backward_pass_first_makes_a_nan():
    """On the H200 the forward hooks fired at `model.embed_tokens` with no float input: the weights
    were already NaN, so an earlier backward pass made them so. The backward hooks name the module
    that turned finite output gradients into NaN input gradients, or the weight whose gradient is NaN."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    class SiluWithNanGradient(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return torch.nn.functional.silu(x)

        @staticmethod
        def backward(ctx, grad):
            return grad * float("nan")

    class BrokenSilu(torch.nn.Module):  # finite forward, NaN backward: a kernel bug, as on the GPU
        def forward(self, x):
            return SiluWithNanGradient.apply(x)

    script = load_script()
    ids = torch.tensor([[1, 2, 3, 4]])

    def tiny_model():
        torch.manual_seed(0)
        return Qwen2ForCausalLM(Qwen2Config(vocab_size=64, **script.SHAPES["tiny"]))

    model = tiny_model()
    script.watch_nonfinite(model, "agent")
    model(input_ids=ids, labels=ids).loss.backward()  # finite both ways: no complaint

    model = tiny_model()
    model.model.layers[1].mlp.act_fn = BrokenSilu()
    script.watch_nonfinite(model, "agent")
    with pytest.raises(script.NonFiniteOutput, match=r"agent: backward through model\.layers\.1\.mlp\.act_fn \(BrokenSilu\) turned finite"):
        model(input_ids=ids, labels=ids).loss.backward()

    model = tiny_model()
    weight = model.model.layers[0].self_attn.q_proj.weight
    weight.register_hook(lambda grad: grad * float("nan"))  # before the watch's own hook: it sees the NaN
    script.watch_nonfinite(model, "agent")
    with pytest.raises(script.NonFiniteOutput, match=r"agent: the gradient of model\.layers\.0\.self_attn\.q_proj\.weight holds 4096 non-finite"):
        model(input_ids=ids, labels=ids).loss.backward()


def test_the_decode_table_with_lora_has_merged_static_and_continuous_rows(tmp_path, monkeypatch):
    """The H200 run's decode rows with adapters: merged for the call on the dynamic and the static
    cache, and through continuous batching, each a rate of the tokens it decoded, against the same
    bandwidth limit."""
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path / "cache"))
    script = load_script()
    result = script.main(["--shape", "tiny", "--device", "cpu", "--workdir", str(tmp_path / "work"), "--epochs", "0", "--lora",
                          "--decode-bench", "--decode-batch", "4", "--decode-tokens", "8"])
    decode = result["decode"]
    for name in ("dynamic", "dynamic_lora_merged", "dynamic_lora_off", "static", "static_lora_merged", "continuous_lora_merged"):
        assert "error" not in decode[name], decode[name]
        assert decode[name]["tokens"] == 4 * 8, f"{name}: every sequence decodes its 8 tokens (random weights, eos off)"
        assert decode[name]["tokens_per_s"] > 0 and 0 < decode[name]["frac_of_bw_limit"] < 1
    assert "continuous_lora_merged_cuda" not in decode, "transformers' CUDA choices only on a GPU"


def test_a_nan_out_of_sdpa_s_backward_is_named_with_its_inputs_and_replayed_per_backend(tmp_path, monkeypatch):
    """--find-nonfinite's SDPA watch: where the kernel's backward turns a finite output gradient
    into a NaN query gradient (faked here: the H200's kernel cannot run on a CPU), the error names
    the call's shapes and its mask's empty rows, the inputs are saved, and the probe replays them
    through the real backends (finite here: the fake is gone)."""
    import torch.nn.functional as F

    probe = importlib.import_module("benchmarks.cost.sdpa_padding_probe")
    script = load_script()
    real = F.scaled_dot_product_attention

    class NanQueryGradient(torch.autograd.Function):
        @staticmethod
        def forward(ctx, query):  # noqa: ANN001, ANN205
            return query.view_as(query)

        @staticmethod
        def backward(ctx, grad):  # noqa: ANN001, ANN205
            return grad * float("nan")

    monkeypatch.setattr(F, "scaled_dot_product_attention",
                        lambda q, k, v, attn_mask=None, *a, **kw: real(NanQueryGradient.apply(q), k, v, attn_mask, *a, **kw))
    dump = tmp_path / "sdpa.pt"
    restore = script.watch_sdpa(dump)
    try:
        q, k, v = (torch.randn(2, 4, 8, 16, requires_grad=True) for _ in range(3))
        mask = torch.tril(torch.ones(8, 8, dtype=torch.bool))[None, None].repeat(2, 1, 1, 1)
        mask[0, :, :, :3] = False  # row 0 left-padded by 3: its first 3 queries attend to nothing
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=0.25)
        with pytest.raises(script.NonFiniteOutput) as caught:
            out.sum().backward()
    finally:
        restore()
    message = str(caught.value)
    assert "finite output gradient into 1024 non-finite query-gradient values" in message
    assert "3 query rows attending to nothing" in message and "(2, 4, 8, 16)" in message and "'scale': 0.25" in message
    assert F.scaled_dot_product_attention is not real, "the watch put back what it wrapped: the fake"
    monkeypatch.undo()
    replayed = probe.replay(str(dump), torch.device("cpu"))
    math = next(r for r in replayed if r["backend"] == "math" and r["mask_variant"] == "as_dumped")
    assert math["out_finite"] and math["q_grad_finite"] and math["mask"] == "[2, 1, 8, 8] bool"
    assert math["empty_query_rows"] == 3
    assert {r["mask_variant"] for r in replayed} == {"as_dumped", "empty_rows_opened", "additive_float"}
    assert all(r["q_grad_finite"] for r in replayed if "error" not in r)
