// A caller of inspection-gateway in Go, from the generated module (clients/go):
//
//	go run . -addr localhost:50051 -service-config ../../clients/service_config.json
//
// It creates a self-inspection token with an idempotency key (twice: the second answer is
// the first one, replayed), submits damage detection with StreamDamageResults and follows it
// to its last event, then subscribes to that inspection's events, disconnects after the first
// one and resumes after its cursor without a gap. Every call names the vendor account with
// `x-vendor-account` ("default" is the default account). Exit status 0: every step passed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	inspectionv1 "github.com/inspection-gateway/inspection-gateway/clients/go/inspection/v1"
)

func main() {
	addr := flag.String("addr", "localhost:50051", "the gateway's gRPC address")
	serviceConfig := flag.String("service-config", "../../clients/service_config.json",
		"the gRPC service config to load (retries of the idempotent RPCs)")
	account := flag.String("account", "default", "vendor account (metadata x-vendor-account)")
	flag.Parse()

	config, err := os.ReadFile(*serviceConfig)
	if err != nil {
		log.Fatalf("service config: %v", err)
	}
	conn, err := grpc.NewClient(*addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(string(config)))
	if err != nil {
		log.Fatalf("dial %s: %v", *addr, err)
	}
	defer conn.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "x-vendor-account", *account)

	if err := createToken(ctx, inspectionv1.NewTokenServiceClient(conn)); err != nil {
		log.Fatalf("CreateToken: %v", err)
	}
	inspectionID, streamed, err := followDamageResults(ctx, inspectionv1.NewDamageServiceClient(conn))
	if err != nil {
		log.Fatalf("StreamDamageResults: %v", err)
	}
	if err := subscribeAndResume(ctx, inspectionv1.NewEventServiceClient(conn), inspectionID, streamed); err != nil {
		log.Fatalf("Subscribe: %v", err)
	}
	fmt.Println("go example: ok")
}

// createToken creates a token with an idempotency key, then repeats the call: the gateway
// replays the first outcome (metadata idempotency-replayed), so no second token exists.
func createToken(ctx context.Context, tokens inspectionv1.TokenServiceClient) error {
	request := &inspectionv1.CreateTokenRequest{
		Options: &inspectionv1.SelfInspectionOptions{ShootInspect: proto.Bool(true), FastTrack: proto.Bool(false)},
		TradeIn: &inspectionv1.TradeIn{SendingType: inspectionv1.SendingType_SENDING_TYPE_NONE},
		Customer: &inspectionv1.Customer{
			Email: "customer@example.com", Firstname: "Ada", Lastname: "Lovelace",
			Phone: "+4915112345678", Locale: inspectionv1.Locale_LOCALE_DE,
		},
		Validity:       7,
		IdempotencyKey: fmt.Sprintf("go-example-%d", time.Now().UnixNano()),
	}
	first, err := tokens.CreateToken(ctx, request)
	if err != nil {
		return err
	}
	var header metadata.MD
	again, err := tokens.CreateToken(ctx, request, grpc.Header(&header))
	if err != nil {
		return err
	}
	if again.GetToken().GetUid() != first.GetToken().GetUid() {
		return fmt.Errorf("a repeated idempotency key created a second token (%s, %s)",
			first.GetToken().GetUid(), again.GetToken().GetUid())
	}
	if got := header.Get("idempotency-replayed"); len(got) != 1 || got[0] != "true" {
		return fmt.Errorf("the repeat was not a replay (idempotency-replayed %v)", got)
	}
	fmt.Printf("token %s, customer URL %s (created once, replayed once)\n",
		first.GetToken().GetUid(), first.GetCustomerUrl())
	return nil
}

// followDamageResults submits damage detection and reads the stream to its end: first the
// submission, then the inspection's events, the last being createReport (or the report the
// gateway recovered by polling, Event.source RECONCILE). Returns the inspection id and the
// cursors of the events, in order.
func followDamageResults(ctx context.Context, damage inspectionv1.DamageServiceClient) (string, []string, error) {
	stream, err := damage.StreamDamageResults(ctx, &inspectionv1.StreamDamageResultsRequest{
		Urls: []string{"https://images.example.com/go-example/front.jpg",
			"https://images.example.com/go-example/rear.jpg"},
	})
	if err != nil {
		return "", nil, err
	}
	inspectionID := ""
	var cursors []string
	var last *inspectionv1.Event
	for {
		message, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", nil, err
		}
		if submitted := message.GetSubmitted(); submitted != nil {
			inspectionID = submitted.GetInspectionId()
			fmt.Printf("submitted: inspection %s\n", inspectionID)
			continue
		}
		last = message.GetEvent()
		cursors = append(cursors, last.GetCursor())
		fmt.Printf("event %s (%s)\n", last.GetEventNameRaw(), last.GetSource())
	}
	if inspectionID == "" || last == nil {
		return "", nil, fmt.Errorf("the stream ended without a submission and an event")
	}
	if last.GetEventName() != inspectionv1.EventName_EVENT_NAME_CREATE_REPORT &&
		last.GetSource() != inspectionv1.EventSource_EVENT_SOURCE_RECONCILE {
		return "", nil, fmt.Errorf("the stream ended on %s, not on the report", last.GetEventNameRaw())
	}
	return inspectionID, cursors, nil
}

// subscribeAndResume reads the inspection's stored events from the start, disconnects after
// the first, and resumes after its cursor: the two connections together carry exactly the
// events StreamDamageResults carried (`want`, their cursors), in order: no gap, no duplicate.
func subscribeAndResume(ctx context.Context, events inspectionv1.EventServiceClient, inspectionID string, want []string) error {
	first, cancelFirst := context.WithCancel(ctx)
	stream, err := events.Subscribe(first, &inspectionv1.SubscribeRequest{
		InspectionId: inspectionID, FromStart: true,
	})
	if err != nil {
		cancelFirst()
		return err
	}
	received, err := stream.Recv()
	cancelFirst() // the "disconnect"
	if err != nil {
		return err
	}
	cursor := received.GetEvent().GetCursor()
	got := []string{cursor}
	fmt.Printf("first connection: %s at cursor %s, then disconnected\n",
		received.GetEvent().GetEventNameRaw(), cursor)

	resumed, err := events.Subscribe(ctx, &inspectionv1.SubscribeRequest{
		InspectionId: inspectionID, AfterCursor: cursor,
	})
	if err != nil {
		return err
	}
	for {
		message, err := resumed.Recv()
		if err != nil {
			return err
		}
		event := message.GetEvent()
		got = append(got, event.GetCursor())
		fmt.Printf("resumed: %s\n", event.GetEventNameRaw())
		if len(got) == len(want) {
			if strings.Join(got, ",") != strings.Join(want, ",") {
				return fmt.Errorf("resumed events %v, the stream had %v", got, want)
			}
			return nil
		}
	}
}
