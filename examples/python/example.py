"""A caller of inspection-gateway in Python, from the generated stubs (make clients):

    PYTHONPATH=../../clients/python python example.py --addr localhost:50051

It creates a self-inspection token with an idempotency key (twice: the second answer is the
first one, replayed), submits damage detection with StreamDamageResults and follows it to
its last event, then subscribes to that inspection's events, disconnects after the first one
and resumes after its cursor without a gap. Every call names the vendor account with
`x-vendor-account` ("default" is the default account). Exit status 0: every step passed.
"""

import argparse
import pathlib
import sys
import time

import grpc

from inspection.v1 import (common_pb2, damage_pb2, damage_pb2_grpc, event_pb2, event_pb2_grpc,
                           token_pb2, token_pb2_grpc)

HERE = pathlib.Path(__file__).resolve().parent


def create_token(tokens, metadata):
    request = token_pb2.CreateTokenRequest(
        options=token_pb2.SelfInspectionOptions(shoot_inspect=True, fast_track=False),
        trade_in=token_pb2.TradeIn(sending_type=common_pb2.SENDING_TYPE_NONE),
        customer=token_pb2.Customer(email="customer@example.com", firstname="Ada",
                                    lastname="Lovelace", phone="+4915112345678",
                                    locale=common_pb2.LOCALE_DE),
        validity=7,
        idempotency_key=f"python-example-{time.time_ns()}")
    first = tokens.CreateToken(request, metadata=metadata, timeout=30)
    again, call = tokens.CreateToken.with_call(request, metadata=metadata, timeout=30)
    if again.token.uid != first.token.uid:
        raise SystemExit(f"a repeated idempotency key created a second token "
                         f"({first.token.uid}, {again.token.uid})")
    if ("idempotency-replayed", "true") not in call.initial_metadata():
        raise SystemExit("the repeat was not a replay")
    print(f"token {first.token.uid}, customer URL {first.customer_url} "
          "(created once, replayed once)")


def follow_damage_results(damage, metadata):
    request = damage_pb2.StreamDamageResultsRequest(
        urls=["https://images.example.com/py-example/front.jpg",
              "https://images.example.com/py-example/rear.jpg"])
    inspection_id, last, cursors = "", None, []
    for message in damage.StreamDamageResults(request, metadata=metadata, timeout=60):
        if message.HasField("submitted"):
            inspection_id = message.submitted.inspection_id
            print(f"submitted: inspection {inspection_id}")
            continue
        last = message.event
        cursors.append(last.cursor)
        print(f"event {last.event_name_raw} ({event_pb2.EventSource.Name(last.source)})")
    if not inspection_id or last is None:
        raise SystemExit("the stream ended without a submission and an event")
    if (last.event_name != common_pb2.EVENT_NAME_CREATE_REPORT and
            last.source != event_pb2.EVENT_SOURCE_RECONCILE):
        raise SystemExit(f"the stream ended on {last.event_name_raw}, not on the report")
    return inspection_id, cursors


def subscribe_and_resume(events, metadata, inspection_id, want):
    """The two connections together carry exactly `want` (the cursors StreamDamageResults
    carried), in order: no gap, no duplicate."""
    first = events.Subscribe(
        event_pb2.SubscribeRequest(inspection_id=inspection_id, from_start=True),
        metadata=metadata, timeout=60)
    received = next(first)
    first.cancel()  # the "disconnect"
    cursor = received.event.cursor
    got = [cursor]
    print(f"first connection: {received.event.event_name_raw} at cursor {cursor}, "
          "then disconnected")
    resumed = events.Subscribe(
        event_pb2.SubscribeRequest(inspection_id=inspection_id, after_cursor=cursor),
        metadata=metadata, timeout=60)
    for message in resumed:
        got.append(message.event.cursor)
        print(f"resumed: {message.event.event_name_raw}")
        if len(got) == len(want):
            resumed.cancel()
            if got != want:
                raise SystemExit(f"resumed events {got}, the stream had {want}")
            return
    raise SystemExit("the resumed stream ended early")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--addr", default="localhost:50051")
    parser.add_argument("--service-config",
                        default=str(HERE.parent.parent / "clients" / "service_config.json"))
    parser.add_argument("--account", default="default")
    args = parser.parse_args()
    service_config = pathlib.Path(args.service_config).read_text()
    metadata = [("x-vendor-account", args.account)]
    with grpc.insecure_channel(args.addr,
                               options=[("grpc.service_config", service_config)]) as channel:
        create_token(token_pb2_grpc.TokenServiceStub(channel), metadata)
        inspection_id, cursors = follow_damage_results(
            damage_pb2_grpc.DamageServiceStub(channel), metadata)
        subscribe_and_resume(event_pb2_grpc.EventServiceStub(channel), metadata, inspection_id,
                             cursors)
    print("python example: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
