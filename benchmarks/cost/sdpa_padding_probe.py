"""Does scaled-dot-product attention's backward turn a left-padded batch's gradients non-finite?

The H200 run of 2026-11-29 (docs/scale-out.md section 6) found the tiny shape's agent gradient NaN
first at an attention projection's weight with SDPA, and finite with eager attention. This probe
narrows it down on whatever device it runs on, with nothing but torch and transformers:

1. raw `torch.nn.functional.scaled_dot_product_attention`, per backend (math, efficient, cuDNN),
   head size 16 (the tiny shape's) and 64 (the 0.5B shape's), bf16 and fp32, on a batch whose first
   row is left-padded (the padded query rows attend to nothing): are the output and the query's
   gradient finite?
2. a random-weight Qwen2 at the tiny shape (and with head size 64), SDPA against eager attention,
   forward and backward under bf16 autocast on the same left-padded batch: are the weight
   gradients finite?

3. with `--replay DUMP`: the inputs `gpu_scale.py --find-nonfinite --dump-nonfinite DUMP` saved
   where SDPA's backward went non-finite in a real step (query, key, value, mask, output gradient),
   through each backend again, with the mask as dumped, with its empty query rows opened
   (`workbench.engine.attention`, the `sdpa_padding_safe` implementation) and as an additive float
   mask: which kernel makes the NaN, on this device, from those inputs, and which mask avoids it.

    python benchmarks/cost/sdpa_padding_probe.py [--device cuda] [--replay DUMP] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import torch
import torch.nn.functional as F


def _finite(t: torch.Tensor | None) -> bool | None:
    return None if t is None else bool(torch.isfinite(t).all())


def raw_probe(device: torch.device) -> list[dict[str, Any]]:
    from torch.nn.attention import sdpa_kernel

    rows = []
    backends = _backends(device)
    batch, heads, length, pad = 2, 4, 32, 8
    keep = torch.ones(batch, length, dtype=torch.bool, device=device)
    keep[0, :pad] = False  # row 0: 8 left-padding tokens
    causal = torch.tril(torch.ones(length, length, dtype=torch.bool, device=device))
    mask = causal[None, None] & keep[:, None, None, :]  # (batch, 1, query, key): padded queries attend to nothing
    for head_dim in (16, 64):
        for dtype in (torch.bfloat16, torch.float32):
            for name, backend in backends.items():
                gen = torch.Generator(device="cpu").manual_seed(0)
                q, k, v = (torch.randn(batch, heads, length, head_dim, generator=gen).to(device, dtype).requires_grad_()
                           for _ in range(3))
                row: dict[str, Any] = {"backend": name, "head_dim": head_dim, "dtype": str(dtype).removeprefix("torch.")}
                try:
                    with sdpa_kernel([backend]):
                        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
                        loss = (out * keep[:, None, :, None]).float().sum()  # the padded rows are out of the loss
                        loss.backward()
                    row.update(out_finite=_finite(out), out_padded_rows_finite=_finite(out[0, :, :pad]),
                               q_grad_finite=_finite(q.grad), k_grad_finite=_finite(k.grad), v_grad_finite=_finite(v.grad))
                except RuntimeError as exc:  # a backend that does not take this input
                    row["error"] = str(exc).splitlines()[0][:160]
                rows.append(row)
    return rows


def model_probe(device: torch.device) -> list[dict[str, Any]]:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    rows = []
    for head_dim in (16, 64):
        for attn in ("sdpa", "eager"):
            torch.manual_seed(0)
            config = Qwen2Config(vocab_size=355, hidden_size=4 * head_dim, num_hidden_layers=2, num_attention_heads=4,
                                 num_key_value_heads=2, intermediate_size=3 * 4 * head_dim, tie_word_embeddings=True,
                                 attn_implementation=attn)
            model = Qwen2ForCausalLM(config).to(device)  # type: ignore[arg-type]  # transformers' `to` is typed for models
            ids = torch.randint(3, 355, (4, 48), device=device)
            mask = torch.ones_like(ids)
            mask[0, :12] = 0  # left padding, as a batch of prompts of uneven length
            mask[1, :5] = 0
            with torch.autocast(device.type, dtype=torch.bfloat16):
                logits = model(input_ids=ids, attention_mask=mask).logits
                loss = torch.nn.functional.cross_entropy(logits[:, :-1].float().reshape(-1, 355), ids[:, 1:].reshape(-1),
                                                         reduction="none")
                loss = (loss * mask[:, 1:].reshape(-1)).sum() / mask[:, 1:].sum()
            loss.backward()
            bad = [n for n, p in model.named_parameters() if p.grad is not None and not torch.isfinite(p.grad).all()]
            rows.append({"head_dim": head_dim, "attn": attn, "loss_finite": _finite(loss), "logits_finite": _finite(logits),
                         "nonfinite_grads": len(bad), "first_nonfinite": bad[:3]})
    return rows


def _backends(device: torch.device) -> dict[str, Any]:
    from torch.nn.attention import SDPBackend

    backends = {"math": SDPBackend.MATH, "efficient": SDPBackend.EFFICIENT_ATTENTION}
    if device.type == "cuda":
        backends.update(cudnn=SDPBackend.CUDNN_ATTENTION, flash=SDPBackend.FLASH_ATTENTION)
    return backends


def _mask_variants(mask: torch.Tensor | None) -> dict[str, torch.Tensor | None]:
    """The dumped mask as it was, with its empty query rows opened to every key (the engine's
    `sdpa_padding_safe`), and as an additive float mask (0 / the dtype's minimum): which of them
    each kernel's backward keeps finite."""
    from workbench.engine.attention import unmask_empty_rows

    if mask is None:
        return {"none": None}
    variants = {"as_dumped": mask, "empty_rows_opened": unmask_empty_rows(mask)}
    if mask.dtype == torch.bool:
        variants["additive_float"] = torch.zeros(mask.shape, dtype=torch.float32).masked_fill(~mask, torch.finfo(torch.float32).min)
    return variants


def replay(dump: str, device: torch.device) -> list[dict[str, Any]]:
    """The dumped call's forward and backward (its own output gradient) under each backend and each
    mask variant: are the output and the input gradients finite?"""
    import contextlib

    from torch.nn.attention import sdpa_kernel

    saved = torch.load(dump, map_location="cpu", weights_only=False)
    mask = saved["attn_mask"]
    dtypes = {saved[n].dtype for n in ("query", "key", "value")}
    # mixed dtypes (the H200's tiny agent: query and key float32 after the rotary embedding, value bfloat16)
    # reach the kernel only under autocast, which casts all three to its lower precision: replay it so
    low = min(dtypes, key=lambda d: torch.finfo(d).bits)
    autocast = (lambda: torch.autocast(device.type, dtype=low)) if len(dtypes) > 1 else contextlib.nullcontext
    empty_rows = None if mask is None or mask.dtype != torch.bool else int((~mask.any(dim=-1)).sum())
    rows = []
    for variant, masked in _mask_variants(mask).items():
        for name, backend in _backends(device).items():
            q, k, v = (saved[n].to(device).requires_grad_() for n in ("query", "key", "value"))
            row: dict[str, Any] = {"replay": dump, "backend": name, "mask_variant": variant, "dumped_on": saved["device"],
                                   "query": list(q.shape), "key": list(k.shape),
                                   "dtype": "/".join(str(t.dtype).removeprefix("torch.") for t in (q, k, v)),
                                   "autocast": str(low).removeprefix("torch.") if len(dtypes) > 1 else None,
                                   "mask": None if mask is None else f"{list(mask.shape)} {str(mask.dtype).removeprefix('torch.')}",
                                   "empty_query_rows": empty_rows, "kwargs": {k: str(v) for k, v in saved["kwargs"].items()}}
            try:
                with sdpa_kernel([backend]), autocast():
                    out = F.scaled_dot_product_attention(q, k, v, None if masked is None else masked.to(device), *saved["args"],
                                                         **saved["kwargs"])
                    out.backward(saved["grad_out"].to(device).to(out.dtype))
                row.update(out_finite=_finite(out), q_grad_finite=_finite(q.grad), k_grad_finite=_finite(k.grad),
                           v_grad_finite=_finite(v.grad))
            except RuntimeError as exc:
                row["error"] = str(exc).splitlines()[0][:160]
            rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--replay", help="a file gpu_scale.py --dump-nonfinite saved: replay that call alone")
    parser.add_argument("--json", help="write the rows here as well")
    args = parser.parse_args()
    device = torch.device(args.device)
    replayed = replay(args.replay, device) if args.replay else []
    raw, model = raw_probe(device), model_probe(device)
    result = {"device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu", "torch": torch.__version__,
              "replay": replayed, "raw": raw, "model": model}
    for row in replayed + raw + model:
        print(json.dumps(row))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
