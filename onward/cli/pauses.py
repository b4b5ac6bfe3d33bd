"""`onward pause`, `onward resume`, `onward pauses`, `onward drain`: an operator's pause of a tenant, a type of
every tenant or one tenant's type, its resume, what is paused, and the platform's drain switch (onward.store.pauses;
docs/flow-control.md). Written to the deployment's jobs table directly, as `onward tenant set` writes settings:
every worker process sees a change within FLOW_CACHE_MS."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable

from onward.bootstrap import Deployment
from onward.domain.pauses import FlowSwitches, Pause
from onward.store.pauses import FLOW_CACHE_MS, TooManyPauses

SEEN_WITHIN = f"every worker process sees it within {FLOW_CACHE_MS / 1000:g} s"

AddCommand = Callable[[str, str], argparse.ArgumentParser]


def add_pause_commands(command: AddCommand) -> None:
    for name, help_text in (("pause", "pause a tenant, a type of every tenant, or one tenant's type: nothing new "
                                      f"of it starts, running attempts finish, waiting jobs keep their place "
                                      f"({SEEN_WITHIN})"),
                            ("resume", "lift a pause, named as it was paused: its jobs start again in their order")):
        parser = command(name, help_text)
        parser.add_argument("--tenant", metavar="TENANT", help="the tenant (alone: every job of it)")
        parser.add_argument("--type", metavar="TYPE", dest="job_type",
                            help="the job type (alone: of every tenant)")
        parser.set_defaults(run=cmd_pause if name == "pause" else cmd_resume)
    listing = command("pauses", "list the pauses in force and the drain switch")
    listing.add_argument("--json", action="store_true", help='print one JSON object: {"pauses": [...], "draining"}')
    listing.set_defaults(run=cmd_pauses)
    drain = command("drain", f"the platform's drain switch for maintenance: on, no claim starts a job anywhere "
                             f"(running attempts finish; workers keep polling); off, back to work ({SEEN_WITHIN})")
    drain.add_argument("switch", choices=("on", "off", "status"), help="turn it on or off, or say how it is")
    drain.set_defaults(run=cmd_drain)


def _pause_of(args: argparse.Namespace) -> Pause | None:
    try:
        return Pause(args.tenant, args.job_type)
    except ValueError as error:
        print(f"onward {args.command}: {error} (--tenant, --type)", file=sys.stderr)
        return None


def cmd_pause(args: argparse.Namespace) -> int:
    pause = _pause_of(args)
    if pause is None:
        return 2
    try:
        added = Deployment.from_environment().job_store.flow.pause(pause)
    except TooManyPauses as error:
        print(f"onward pause: {error}", file=sys.stderr)
        return 1
    print(f"{pause.describe()}{'' if added else ' (it already was)'}; {SEEN_WITHIN}")
    return 0


def cmd_resume(args: argparse.Namespace) -> int:
    pause = _pause_of(args)
    if pause is None:
        return 2
    lifted, released = Deployment.from_environment().job_store.flow.resume_and_release(
        pause, progress=lambda count: print(f"  {count} held jobs put back in their queues", flush=True))
    named = pause.describe().replace(" is paused", "")
    if released.released:
        print(f"{released.released} held jobs of {named} put back with their due times")
    if not lifted:
        print(f"onward resume: no such pause in force ({named})", file=sys.stderr)
        return 1 if not released.released else 0
    print(f"resumed: {named}; {SEEN_WITHIN}")
    return 0


def pauses_report(switches: FlowSwitches) -> dict[str, object]:
    """What `onward pauses --json` prints (GET /ops/pauses's shape)."""
    return {"pauses": [{"tenant": pause.tenant_id, "type": pause.job_type}
                       for pause in sorted(switches.pauses, key=lambda pause: pause.sides)],
            "draining": switches.draining}


def pauses_text(switches: FlowSwitches) -> str:
    lines = [f"drain switch: {'ON (no job starts anywhere)' if switches.draining else 'off'}"]
    lines += [f"  {pause.describe()}" for pause in sorted(switches.pauses, key=lambda pause: pause.sides)]
    return "\n".join(lines if switches.pauses else [*lines, "  nothing paused"])


def cmd_pauses(args: argparse.Namespace) -> int:
    switches = Deployment.from_environment().job_store.flow.current()
    print(json.dumps(pauses_report(switches)) if args.json else pauses_text(switches))
    return 0


def cmd_drain(args: argparse.Namespace) -> int:
    flow = Deployment.from_environment().job_store.flow
    if args.switch != "status":
        changed = flow.set_draining(args.switch == "on")
        print(f"drain switch {args.switch}{'' if changed else ' (it already was)'}; {SEEN_WITHIN}")
        return 0
    print(f"drain switch {'on' if flow.current().draining else 'off'}")
    return 0
