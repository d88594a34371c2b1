#!/usr/bin/env python3
"""Paired A/B of the gateway's hop overhead: two builds side by side, rounds alternating.

    .tools/venv/bin/python bench/hop_ab.py BUILD_DIR_A BUILD_DIR_B [--rounds 30]
                                           [--blocks 6] [--calls-per-round 1000]
                                           [--a-flag=... --b-flag=...]

Starts a sandbox and a gateway from each build directory (its inspection-sandbox and
inspection-gateway; the cache off, so every call reaches the sandbox) and measures
hop_latency's overhead, through p50 - bare gRPC p50 - direct REST p50, for A and for B in
alternating rounds (A B, B A, A B, ...), each round bench/run.py's interleaved legs, over
`--blocks` fresh pairs of stacks started in alternating order. The answer is the median of
the per-round differences B - A, with A's and B's own medians and their gateway CPU per
call: the machine's drift, tens of microseconds within minutes on the 2-core development
machine, falls on both sides alike, and so does what one pair of stacks differs by itself.
Run it with the same build twice first: what that A/A run reports is the resolution.

Prints one JSON line. Exits 1 when a gateway call failed.
"""
import argparse
import json
import pathlib
import statistics
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import run  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("build_a")
    parser.add_argument("build_b")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--blocks", type=int, default=6,
                        help="fresh pairs of stacks the rounds are spread over")
    parser.add_argument("--calls-per-round", type=int, default=1000)
    parser.add_argument("--a-flag", action="append", default=[],
                        help="an extra gateway flag for A (repeatable)")
    parser.add_argument("--b-flag", action="append", default=[],
                        help="an extra gateway flag for B (repeatable)")
    args = parser.parse_args()

    cpu, overheads, ok = {"A": 0.0, "B": 0.0}, {"A": [], "B": []}, {"A": 0.0, "B": 0.0}
    sides = {"A": (args.build_a, args.a_flag), "B": (args.build_b, args.b_flag)}
    per_block = max(1, args.rounds // args.blocks)
    with tempfile.TemporaryDirectory(prefix="hop-ab-") as tmp:
        tmp = pathlib.Path(tmp)
        for block in range(args.blocks):
            # Fresh stacks per block, started in alternating order: a pair of stacks differs
            # by itself (an A/A pair of one build by up to ~16 us), and that must not land
            # on one side.
            order = ("A", "B") if block % 2 == 0 else ("B", "A")
            stacks, ok_before = {}, {}
            try:
                for side in order:
                    build, flags = sides[side]
                    workdir = tmp / f"{side}{block}"
                    workdir.mkdir()
                    stacks[side] = run.Stack(pathlib.Path(build).resolve(), workdir,
                                             gateway_flags=["--cache-enabled=false", *flags])
                    ok_before[side] = stacks[side].grpc_ok("GetWebhookConfig")
                for round_index in range(per_block):
                    for side in order if round_index % 2 == 0 else order[::-1]:
                        stack = stacks[side]

                        def around_via(measure, stack=stack, side=side):
                            before = run.cpu_seconds(stack.pid)
                            result = measure()
                            cpu[side] += run.cpu_seconds(stack.pid) - before
                            return result

                        legs = run.interleaved_hop(
                            f"{stack.sandbox_url}/apiV1/eventmanager/configwebhook",
                            f"http://{stack.grpc}/inspection.v1.EventConfigService/"
                            "GetWebhookConfig",
                            f"http://{stack.grpc}/grpc.health.v1.Health/Check", tmp,
                            n=args.calls_per_round, rounds=1, around_via=around_via)
                        overheads[side].append(legs["overhead50"])
                for side, stack in stacks.items():
                    ok[side] += stack.grpc_ok("GetWebhookConfig") - ok_before[side]
            finally:
                for stack in stacks.values():
                    stack.stop()
    calls = args.blocks * per_block * args.calls_per_round

    differences = [b - a for a, b in zip(overheads["A"], overheads["B"])]
    print(json.dumps({
        "overhead_p50_us": {side: statistics.median(values) for side, values in overheads.items()},
        "b_minus_a_us": {"median": statistics.median(differences),
                         "mean": round(statistics.mean(differences), 1)},
        "gateway_cpu_per_call_us": {side: round(cpu[side] * 1e6 / max(ok[side], 1))
                                    for side in cpu},
        "calls": calls, "grpc_ok": ok}))
    return 0 if all(value >= calls for value in ok.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
