"""`onward regions`: two (or more) embedded endpoints as AWS Regions in one process, the stack deployed in
each, the replicator between their jobs and outbox tables, and its control API over HTTP; prints each
Region's exports and the control URL, then serves until Ctrl-C (docs/local-stack.md, "Two regions on one
machine")."""

from __future__ import annotations

import argparse
import signal
from collections.abc import Callable
from contextlib import ExitStack

from onward.cli.arguments import PORT, StopSignals, interrupt, interruptible

END_OF_REGIONS = "# Ctrl-C stops them."


def cmd_regions(args: argparse.Namespace) -> int:
    from onward_infra.endpoint import EmbeddedEndpoint, end_with_parent
    from onward_infra.replication.control import ControlServer
    from onward_infra.replication.replicator import Replicator, tables_of
    from onward_infra.stack import export_lines

    regions = [region.strip() for region in args.regions.split(",") if region.strip()]
    ports = [int(port) for port in args.ports.split(",")] if args.ports else [0] * len(regions)
    if len(set(regions)) < 2 or len(ports) != len(regions):
        print("onward regions: --regions names at least two different Regions, and --ports one port for each",
              flush=True)
        return 2
    signal.signal(signal.SIGTERM, lambda *_: interrupt())
    interruptible()
    end_with_parent()
    try:
        with ExitStack() as stack:
            endpoints = [stack.enter_context(EmbeddedEndpoint(port=port, region=region,
                                                              stream_shards=args.stream_shards))
                         for region, port in zip(regions, ports, strict=True)]
            # the jobs table's stream on in every Region: the fence reconciler reads it after a failover (issue 39)
            environments = {endpoint.region: endpoint.deploy(jobs_stream=True).environment for endpoint in endpoints}
            replicator = stack.enter_context(Replicator(endpoints, tables_of(environments)))
            replicator.set_lag(args.lag_s)
            control = stack.enter_context(ControlServer(replicator, args.control_port))
            signals = StopSignals()
            for endpoint in endpoints:
                print(f"# Region {endpoint.region}: embedded AWS endpoint on {endpoint.url}")
                for line in export_lines(environments[endpoint.region]):
                    print(line)
            print(f"# replicator: JOBS_TABLE and OUTBOX_TABLE, lag {args.lag_s} s; control: {control.url}")
            print(END_OF_REGIONS, flush=True)
            signals.wait()
    except KeyboardInterrupt:
        pass
    return 0


def add_regions_command(command: Callable[[str, str], argparse.ArgumentParser]) -> None:
    regions = command("regions", "run embedded endpoints as AWS Regions with a replicator between them")
    regions.add_argument("--regions", default="us-east-1,us-west-2", help="the Regions, comma separated")
    regions.add_argument("--ports", default="", help="a port on 127.0.0.1 per Region, comma separated (default: any)")
    regions.add_argument("--control-port", type=PORT, default=0, help="the replicator's control API (0: any port)")
    regions.add_argument("--lag-s", type=float, default=0.0, help="replication lag at start, every direction")
    regions.add_argument("--stream-shards", type=int, default=1, help="open shards of each table's stream")
    regions.set_defaults(run=cmd_regions)
