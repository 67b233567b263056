"""PyTorch's side of the GPU check's GPT-step benchmark (gpu-check.sh run):
the model of examples/gen_examples.py gpt (token + position embedding,
pre-LayerNorm blocks with causal multi-head attention written out, no SDPA,
as ds does it; tanh-GELU MLP; LM head; cross-entropy) with AdamW, on CUDA,
in f32 with TF32 off (what ds's f32 step computes), under torch.autocast
BF16, and torch.compile'd under autocast. Prints one line per mode:
"torch <mode>: <ms> ms/step", or "torch <mode>: error <why>".

usage: torch_gpt.py --d-model D --heads H --seq T --batch B --vocab V
                    --layers L [--steps N] [--warmup W] [--modes ...]
"""
import argparse
import time


def main():
    ap = argparse.ArgumentParser()
    for name, default in (("d-model", 1024), ("heads", 16), ("seq", 1024),
                          ("batch", 8), ("vocab", 128), ("layers", 1),
                          ("steps", 12), ("warmup", 3)):
        ap.add_argument("--" + name, type=int, default=default)
    ap.add_argument("--modes", default="eager-f32,autocast-bf16,compile-bf16")
    a = ap.parse_args()
    try:
        import torch
        import torch.nn.functional as F
    except ImportError as e:
        print("torch: error no PyTorch (%s)" % e)
        return
    if not torch.cuda.is_available():
        print("torch: error no CUDA device for PyTorch")
        return
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    d, h, t, v, b = a.d_model, a.heads, a.seq, a.vocab, a.batch
    dh = d // h

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
            self.q, self.k, self.v, self.o = (torch.nn.Linear(d, d) for _ in range(4))
            self.fc1, self.fc2 = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)

        def forward(self, x, mask):
            y = self.ln1(x)
            split = lambda z: z.view(b, t, h, dh).transpose(1, 2)
            q, k, vv = split(self.q(y)), split(self.k(y)), split(self.v(y))
            s = (q @ k.transpose(-1, -2)) * (1.0 / dh ** 0.5)
            p = s.masked_fill(mask, float("-inf")).softmax(-1)
            x = x + self.o((p @ vv).transpose(1, 2).reshape(b, t, d))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))

    class GPT(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = torch.nn.Embedding(v, d), torch.nn.Embedding(t, d)
            self.blocks = torch.nn.ModuleList(Block() for _ in range(a.layers))
            self.ln_f = torch.nn.LayerNorm(d)
            self.head = torch.nn.Linear(d, v, bias=False)
            self.register_buffer(
                "mask", torch.triu(torch.ones(t, t, dtype=torch.bool), 1))

        def forward(self, tok, tgt):
            x = self.wte(tok) + self.wpe.weight[None]
            for blk in self.blocks:
                x = blk(x, self.mask)
            logits = self.head(self.ln_f(x))
            return F.cross_entropy(logits.float().view(b * t, v), tgt.view(b * t))

    tok = torch.randint(0, v, (b, t), device="cuda")
    tgt = torch.randint(0, v, (b, t), device="cuda")
    for mode in a.modes.split(","):
        try:
            torch.manual_seed(0)
            model = GPT().cuda()
            opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
            fn = torch.compile(model) if mode.startswith("compile") else model
            bf16 = mode.endswith("bf16")

            def step():
                opt.zero_grad(set_to_none=True)
                with torch.autocast("cuda", torch.bfloat16, enabled=bf16):
                    loss = fn(tok, tgt)
                loss.backward()
                opt.step()

            for _ in range(a.warmup):
                step()
            torch.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(a.steps):
                step()
            torch.cuda.synchronize()
            ms = (time.perf_counter() - start) * 1e3 / a.steps
            print("torch %s: %.3f ms/step" % (mode, ms), flush=True)
            del model, opt, fn
            torch.cuda.empty_cache()
        except Exception as e:  # report and go on with the next mode
            print("torch %s: error %s" % (mode, str(e).splitlines()[0][:120]),
                  flush=True)


if __name__ == "__main__":
    main()
