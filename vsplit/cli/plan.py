"""Plan where to cut a PyTorch model: what crosses each candidate cut, and what it costs.

Example:
    vsplit plan --model tests/plan_models.py:UNet --input-shape 1,3,8,8
    vsplit plan --model vsplit.models.tabular:TabularMLP --model-arg 'cardinalities=[3,5]' --model-arg n_numeric=2 \\
        --input-shape 1,2:int64 --input-shape 1,2 --bandwidth-mbps 100 --rtt-ms 20 --rows 1000000 --json
    vsplit plan --model mypkg.nets:build --input-shape 1,3,64,64 --dtype float16 --max-client-flops 5e8 --plot cuts.png

Prints one row per candidate cut (values and bytes per sample forward and back, client parameters, FLOPs and saved
activations, the distance correlation of the inputs with what crosses, flags R raw input crosses, S a parameter is
shared across the cut, D dominated), the least-traffic cut and the best cut within the client budgets.
``--model`` imports your own module and calls it: run it only on code you trust. The model runs on random inputs
of the given shapes, the first dimension replaced by --batch; see docs/choosing_a_cut.md.
"""

from __future__ import annotations

import argparse
import json

NAME = "plan"
HELP = "where to cut a PyTorch model: traffic, compute and memory of every candidate cut"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, metavar="MODULE:CALLABLE",
                        help="a module (dotted name or .py path) and a callable in it returning the nn.Module")
    parser.add_argument("--model-arg", action="append", default=[], metavar="KEY=VALUE",
                        help="keyword argument of the callable, repeatable; VALUE is read as JSON when it parses")
    parser.add_argument("--input-shape", action="append", required=True, metavar="SHAPE[:DTYPE]",
                        help="one positional input, e.g. 1,3,64,64 or 1,9:int64; repeat for several inputs")
    parser.add_argument("--batch", type=int, default=16,
                        help="rows of random input to plan with (>= 4 gives the privacy proxy; default 16)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    parser.add_argument("--dtype", default=None, help="cost floating crossing tensors as this dtype, e.g. float16")
    parser.add_argument("--granularity", choices=["module", "op"], default="module")
    parser.add_argument("--method", choices=["auto", "export", "record"], default="auto",
                        help="graph capture: torch.export, else recording one forward pass (default auto)")
    parser.add_argument("--bandwidth-mbps", type=float, default=None, help="link bandwidth, megabits per second")
    parser.add_argument("--rtt-ms", type=float, default=20.0, help="link round-trip time (default 20 ms)")
    parser.add_argument("--rows", type=int, default=None, help="training rows per epoch (with --bandwidth-mbps)")
    parser.add_argument("--batch-size", type=int, default=256, help="training batch size for the link costs")
    parser.add_argument("--max-client-flops", type=float, default=None, help="client budget: FLOPs per sample")
    parser.add_argument("--max-client-memory", type=float, default=None,
                        help="client budget: activation bytes kept for backward per sample")
    parser.add_argument("--max-client-params", type=float, default=None, help="client budget: parameters")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument("--plot", default=None, metavar="FILE.png", help="draw values crossing and client FLOPs")


def run(args: argparse.Namespace) -> int:
    from vsplit.errors import ConfigError
    from vsplit.plan.costs import Link
    from vsplit.plan.plan import plan_cuts
    from vsplit.plan.table import describe, render
    from vsplit.plan.user_model import example_inputs, load_model, parse_model_args, parse_shape

    shapes = [parse_shape(text) for text in args.input_shape]
    model = load_model(args.model, parse_model_args(args.model_arg))
    if args.batch < 1:
        raise ConfigError(f"--batch {args.batch}: give at least 1 row")
    link = None
    if args.bandwidth_mbps is not None or args.rows is not None:
        if args.bandwidth_mbps is None or args.rows is None:
            raise ConfigError("link costs need both --bandwidth-mbps and --rows (and optionally --rtt-ms)")
        link = Link(bandwidth_mbps=args.bandwidth_mbps, rtt_ms=args.rtt_ms, rows=args.rows,
                    batch_size=args.batch_size)
    inputs = example_inputs(shapes, batch=args.batch, seed=args.seed)
    plan = plan_cuts(model, inputs, granularity=args.granularity, method=args.method, dtype=args.dtype, link=link)
    budget = {"max_client_flops": args.max_client_flops, "max_client_saved_bytes": args.max_client_memory,
              "max_client_params": args.max_client_params}
    best = plan.best_under(**budget) if any(v is not None for v in budget.values()) else None
    if args.plot:
        from vsplit.plan.plot import draw

        draw(plan, args.plot)
    if args.json:
        out = plan.to_dict()
        out["min_traffic"] = plan.min_traffic().after
        out["best_under_budget"] = best.after if best else None
        out["budget"] = budget
        print(json.dumps(out, indent=1))
        return 0
    print(f"{plan.model}: {len(plan.rows)} candidate cuts, graph by {plan.method} in {plan.capture_seconds:.2f} s"
          + (f" ({plan.note})" if plan.note else ""))
    print(render(plan))
    print("flags: R raw input crosses, S parameter shared across the cut, D dominated by an earlier cut")
    print(describe(plan.min_traffic(), "least traffic"))
    if any(v is not None for v in budget.values()):
        print(describe(best, "best within the client budget"))
    if args.plot:
        print(f"plot: {args.plot}")
    return 0
