"""Show the split a party config describes: its segments, cuts, and every party's step program.

Each party's per-step behaviour is data: the ops it runs per training step and per validation or scoring chunk,
in order. Parties whose configs describe different splits refuse each other before training (the topology
fingerprint in the first message); this command shows what your config says.

Examples:
  vsplit topology show --config parties/bank/party.toml
  vsplit topology show --kind u_shaped --client bank --server cloud
  vsplit topology show --config parties/bank/party.toml --json
  vsplit topology show --config runs/pilots/splitfed-credit/bank_1/party.toml   # a horizontal schedule's stages
"""

from __future__ import annotations

import argparse
import json

NAME = "topology"
HELP = "show a split's segments, cuts and each party's step program"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="topology_action", required=True, metavar="ACTION")
    show = actions.add_parser("show", help="print every party's step program",
                              description="Print the segments, the cuts and every party's step program.",
                              epilog="Example: vsplit topology show --config parties/bank/party.toml")
    show.add_argument("--config", help="a party.toml (its [topology], party role and peers)")
    show.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a config key")
    show.add_argument("--kind", choices=["vertical", "vanilla", "u_shaped"], help="without --config: the kind")
    show.add_argument("--label-party", default="bank", help="without --config, vertical: the label party")
    show.add_argument("--feature-parties", default="partner", help="without --config, vertical: comma-separated")
    show.add_argument("--client", default="client", help="without --config: the vanilla or U-shaped client")
    show.add_argument("--server", default="server", help="without --config: the vanilla or U-shaped server")
    show.add_argument("--width", type=int, default=16, help="without --config: the cut width")
    show.add_argument("--json", action="store_true", help="print the topology and programs as JSON")


def run(args: argparse.Namespace) -> int:
    from vsplit.errors import ConfigError
    from vsplit.topology import Topology, compile_program, describe, format_program

    if args.config:
        from vsplit.config import load_config
        from vsplit.config.topology import topology_of

        config = load_config(args.config, overrides=args.set, check_files=False)
        if config.topology.kind == "horizontal":
            return _show_horizontal(config)
        topology = topology_of(config)
    elif args.kind == "vertical":
        parties = [p for p in args.feature_parties.split(",") if p]
        topology = Topology.vertical(label_party=args.label_party, feature_parties=parties, width=args.width)
    elif args.kind == "vanilla":
        topology = Topology.vanilla(client=args.client, server=args.server, width=args.width)
    elif args.kind == "u_shaped":
        topology = Topology.u_shaped(client=args.client, server=args.server, widths=(args.width, args.width))
    else:
        raise ConfigError("vsplit topology show: give --config PARTY.toml, or --kind vertical|vanilla|u_shaped")
    if args.json:
        programs = {p: {phase: format_program(compile_program(topology, p, phase=phase)) for phase in ("train", "eval")}
                    for p in topology.parties}
        print(json.dumps({**topology.to_dict(), "fingerprint": topology.fingerprint(), "programs": programs},
                         indent=2))
    else:
        print(describe(topology))
    return 0


def _show_horizontal(config: object) -> int:
    """A horizontal config: the replicated pair's step programs and the schedule's stages, in order."""
    from vsplit.config.horizontal import horizontal_of, settings_of
    from vsplit.horizontal.schedule import compile_schedule, format_schedule
    from vsplit.topology import describe

    h, settings = horizontal_of(config), settings_of(config)
    print(f"horizontal: {len(h.clients)} clients ({', '.join(h.clients)}), server {h.server}; each client's pair:")
    print(describe(h.pair(h.clients[0])))
    stages = compile_schedule(settings, clients=h.clients, server=h.server, rows=dict.fromkeys(h.clients, 1))
    print(format_schedule(stages, settings))
    return 0
