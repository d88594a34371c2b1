#ifndef GATEWAY_STREAMING_EVENT_STREAM_H_
#define GATEWAY_STREAMING_EVENT_STREAM_H_

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include <cstdio>
#include <cstdlib>

#include "absl/synchronization/mutex.h"
#include "gateway/errors/api_error.h"
#include "gateway/logging/log.h"
#include "gateway/streaming/event_hub.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"

namespace inspection::streaming {

// Parses a raw request (the event streams are registered as raw methods, see below).
// False when the bytes are not a `Message`.
template <class Message>
bool ParseRawRequest(const grpc::ByteBuffer& request, Message* out) {
  grpc::ByteBuffer copy(request);  // shares the slices
  return grpc::SerializationTraits<Message>::Deserialize(&copy, out).ok();
}

// A server stream of events from the hub, for a response message with an `Event event`
// field (SubscribeResponse, StreamDamageResultsResponse): keeps one write in
// flight, buffers at most `limits` (events and bytes; the hub ends a live stream with
// RESOURCE_EXHAUSTED beyond that, and pauses a catching-up one), never calls Finish while
// a write is outstanding, and ends every error
// with ErrorInfo.metadata["last_cursor"]: the cursor of the last event written, from
// which the client resumes with no gap and no duplicate. Deletes itself in OnDone.
//
// It writes raw bytes (the method is registered with WithRawCallbackMethod_*): each event
// is serialized once by the hub, and every stream writes the same ref-counted bytes behind
// a header of its own (the tag and length of Response's `event` field), which is exactly
// the encoding of a Response holding that event. The client sees the typed message.
template <class Response>
class EventStreamReactor : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  // True for the event after which the stream is complete (then Finish(OK)).
  using IsFinal = std::function<bool(const v1::Event&)>;

  EventStreamReactor(EventHub* hub, StreamQueueLimits limits, IsFinal is_final = nullptr)
      : hub_(hub),
        limits_(limits),
        is_final_(std::move(is_final)),
        link_(std::make_shared<Link>(this)) {}

  // Who the stream is for, for its "stream opened" and "stream ended" log lines. Set it
  // before Attach(); a stream without it (refused before it started) logs nothing.
  struct LogContext {
    std::string method;  // "/inspection.v1.EventService/Subscribe"
    std::string peer;
    std::string caller;
    std::string account;  // "" = the default account
    std::string trace_id;
  };
  void SetLogContext(LogContext context) {
    absl::MutexLock lock(&mu_);
    log_ = std::move(context);
  }

  // Starts receiving events from the hub.
  void Attach(EventFilter filter, std::string after_cursor, bool from_start) {
    std::string filter_text = DescribeFilter(filter);
    const std::string resume = after_cursor;
    const uint64_t id =
        hub_->Subscribe(link_, std::move(filter), std::move(after_cursor), from_start);
    absl::MutexLock lock(&mu_);
    if (log_.has_value() && id != 0) {
      opened_at_ = std::chrono::steady_clock::now();
      logging::Info("stream opened", {{"method", log_->method},
                                      {"peer", log_->peer},
                                      {"caller", log_->caller},
                                      {"account", AccountLabel(log_->account)},
                                      {"filter", std::move(filter_text)},
                                      {"after_cursor", resume},
                                      {"from_start", from_start},
                                      {"trace_id", log_->trace_id}});
    }
    if (id == 0) {  // the hub is stopping
      EndLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the gateway is shutting down"));
      return;
    }
    subscription_ = id;
    attached_ = true;
    if (finished_) hub_->Unsubscribe(id);
  }

  // The call's context, for AddInitialMetadata(): valid until OnDone, and used only while
  // the reactor is alive (through a Handle, under the link's lock).
  void SetContext(grpc::CallbackServerContext* context) {
    absl::MutexLock lock(&mu_);
    context_ = context;
  }

  // Adds initial metadata to the call if none has gone out yet (no message written, not
  // finished). False when it is too late, or without a context. Asynchronous work must call
  // it through a Handle: gRPC frees the context once the call is done, which a cancelled
  // call can be long before that work ends.
  bool AddInitialMetadata(const std::string& key, const std::string& value) {
    absl::MutexLock lock(&mu_);
    if (context_ == nullptr || metadata_sent_ || finished_ || pending_finish_.has_value()) {
      return false;
    }
    context_->AddInitialMetadata(key, value);
    return true;
  }

  // Queues a message that is not an event (the first message of StreamDamageResults).
  void Send(const Response& response) {
    grpc::Slice bytes(response.SerializeAsString());
    absl::MutexLock lock(&mu_);
    if (finished_) return;
    queue_.push_back({grpc::ByteBuffer(&bytes, 1), std::string(), false, 0});
    MaybeWriteLocked();
  }

  // The bytes in front of an event's wire bytes that make them a Response: the tag of
  // Response's `event` field (length-delimited) and the length.
  static std::string EventHeader(size_t length) {
    static const uint32_t tag = EventFieldTag();
    uint8_t header[5 + 10];  // a varint32 tag, a varint64 length
    uint8_t* end = google::protobuf::io::CodedOutputStream::WriteVarint32ToArray(tag, header);
    end = google::protobuf::io::CodedOutputStream::WriteVarint64ToArray(length, end);
    return std::string(reinterpret_cast<const char*>(header), end - header);
  }

  // Ends the stream now (pending messages are dropped if a status is not OK). The
  // status gets ErrorInfo with last_cursor unless `as_is` (a status already carrying
  // its details, such as a vendor error).
  void End(const grpc::Status& status, bool as_is = false) {
    absl::MutexLock lock(&mu_);
    EndLocked(status, as_is);
  }

  class Link;

  // A handle that stays valid after the reactor is gone (its calls then do nothing),
  // for asynchronous work that finishes after a possible cancellation.
  class Handle {
   public:
    void Send(const Response& response) const {
      absl::MutexLock lock(&link_->mu_);
      if (link_->reactor_ != nullptr) link_->reactor_->Send(response);
    }
    void Attach(EventFilter filter, std::string after_cursor, bool from_start) const {
      absl::MutexLock lock(&link_->mu_);
      if (link_->reactor_ != nullptr) {
        link_->reactor_->Attach(std::move(filter), std::move(after_cursor), from_start);
      }
    }
    void End(const grpc::Status& status, bool as_is = false) const {
      absl::MutexLock lock(&link_->mu_);
      if (link_->reactor_ != nullptr) link_->reactor_->End(status, as_is);
    }
    bool AddInitialMetadata(const std::string& key, const std::string& value) const {
      absl::MutexLock lock(&link_->mu_);
      return link_->reactor_ != nullptr && link_->reactor_->AddInitialMetadata(key, value);
    }

   private:
    friend class EventStreamReactor;
    explicit Handle(std::shared_ptr<Link> link) : link_(std::move(link)) {}
    std::shared_ptr<Link> link_;
  };
  Handle handle() { return Handle(link_); }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) {
      // The client is gone. Finish is still owed: gRPC runs OnDone (and frees the call)
      // only after it. A finish already pending behind this write is the one to send; going
      // through EndLocked would see it pending and return without finishing.
      grpc::Status status = pending_finish_.value_or(
          grpc::Status(grpc::StatusCode::CANCELLED, "the client went away"));
      pending_finish_.reset();
      if (!finished_) FinishLocked(status);
      return;
    }
    const Item& written = queue_.front();
    if (!written.cursor.empty()) {
      last_cursor_ = written.cursor;
      ++events_sent_;
    }
    const bool was_final = written.final;
    PopFrontLocked();
    if (was_final) {
      EndLocked(grpc::Status::OK);
      return;
    }
    if (pending_finish_.has_value()) {
      grpc::Status status = *pending_finish_;
      pending_finish_.reset();
      FinishLocked(status);
      return;
    }
    MaybeWriteLocked();
    hub_->Wake();  // room again: a catching-up subscription continues
  }

  // Keeps `guard` (a per-caller stream slot) until the stream is done.
  void HoldUntilDone(std::shared_ptr<void> guard) { guard_ = std::move(guard); }

  void OnCancel() override { End(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled")); }

  void OnDone() override {
    link_->Detach();
    {
      absl::MutexLock lock(&mu_);
      if (attached_) hub_->Unsubscribe(subscription_);
    }
    delete this;
  }

 private:
  std::shared_ptr<void> guard_;
  struct Item {
    grpc::ByteBuffer message;
    std::string cursor;  // of the event it carries; empty for other messages
    bool final = false;
    size_t bytes = 0;  // counted against limits_.max_bytes
  };

 public:
  // What the hub holds: outlives the reactor, forwards until the reactor is done.
  class Link : public EventSink {
   public:
    friend class Handle;
    explicit Link(EventStreamReactor* reactor) : reactor_(reactor) {}
    void Detach() {
      absl::MutexLock lock(&mu_);
      reactor_ = nullptr;
    }
    size_t Room() const override {
      absl::MutexLock lock(&mu_);
      return reactor_ == nullptr ? 0 : reactor_->Room();
    }
    bool Deliver(std::shared_ptr<const EncodedEvent> event) override {
      absl::MutexLock lock(&mu_);
      return reactor_ != nullptr && reactor_->DeliverEvent(*event);
    }
    void End(const grpc::Status& status) override {
      absl::MutexLock lock(&mu_);
      if (reactor_ != nullptr) reactor_->End(status);
    }

    mutable absl::Mutex mu_;
    EventStreamReactor* reactor_ ABSL_GUARDED_BY(mu_);
  };

 private:
  size_t Room() const {
    absl::MutexLock lock(&mu_);
    if (finished_ || pending_finish_.has_value()) return 0;
    // The byte bound counts the messages waiting behind the write in flight: one event
    // larger than the bound is still sent, and does not end a stream that keeps reading.
    const size_t in_flight = writing_ && !queue_.empty() ? queue_.front().bytes : 0;
    const size_t waiting = queue_.size() - (writing_ && !queue_.empty() ? 1 : 0);
    if (waiting > 0 && queued_bytes_ - in_flight >= limits_.max_bytes) return 0;
    return queue_.size() >= limits_.max_events ? 0 : limits_.max_events - queue_.size();
  }

  // The field number of Response's `event` field as a wire tag; a Response without a
  // singular `Event event` field is a programming error, caught on the first stream.
  static uint32_t EventFieldTag() {
    const google::protobuf::FieldDescriptor* field =
        Response::descriptor()->FindFieldByName("event");
    if (field == nullptr || field->is_repeated() ||
        field->message_type() != v1::Event::descriptor()) {
      std::fprintf(stderr, "EventStreamReactor: %s has no `Event event` field\n",
                   Response::descriptor()->full_name().c_str());
      std::abort();
    }
    return google::protobuf::internal::WireFormatLite::MakeTag(
        field->number(), google::protobuf::internal::WireFormatLite::WIRETYPE_LENGTH_DELIMITED);
  }

  bool DeliverEvent(const EncodedEvent& event) {
    // Two slices: this stream's header (a few bytes), then the shared event bytes (a
    // reference, not a copy).
    const grpc::Slice slices[2] = {grpc::Slice(EventHeader(event.wire.size())), event.wire};
    absl::MutexLock lock(&mu_);
    if (finished_ || pending_finish_.has_value()) return false;
    Item item{grpc::ByteBuffer(slices, 2), event.event.cursor(),
              is_final_ && is_final_(event.event), event.bytes};
    queued_bytes_ += item.bytes;
    queue_.push_back(std::move(item));
    MaybeWriteLocked();
    return true;
  }

  void PopFrontLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    queued_bytes_ -= queue_.front().bytes;
    queue_.pop_front();
  }
  void PopBackLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    queued_bytes_ -= queue_.back().bytes;
    queue_.pop_back();
  }

  void MaybeWriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || queue_.empty() || finished_) return;
    writing_ = true;
    metadata_sent_ = true;  // the first write carries the initial metadata
    this->StartWrite(&queue_.front().message);
  }

  void EndLocked(const grpc::Status& status, bool as_is = false)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_ || pending_finish_.has_value()) return;
    as_is_ = as_is;
    if (!status.ok()) {
      // Drop what was not written: the client resumes after last_cursor_.
      while (queue_.size() > (writing_ ? 1u : 0u)) PopBackLocked();
    }
    if (writing_) {
      pending_finish_ = status;  // Finish once the write in flight completes
      return;
    }
    if (status.ok() && !queue_.empty()) {
      pending_finish_ = status;  // flush first
      MaybeWriteLocked();
      return;
    }
    FinishLocked(status);
  }

  static std::string AccountLabel(const std::string& account) {
    return account.empty() ? "default" : account;
  }

  // "names=a,b inspection_id=x token_uid=y"; "all" for no condition (the account is
  // logged on its own).
  static std::string DescribeFilter(const EventFilter& filter) {
    std::string out;
    auto add = [&out](std::string_view key, std::string_view value) {
      if (value.empty()) return;
      if (!out.empty()) out += ' ';
      out.append(key).append("=").append(value.substr(0, 128));
    };
    std::string names;
    for (const std::string& name : filter.names) {
      if (names.size() > 256) break;
      if (!names.empty()) names += ',';
      names += name;
    }
    add("names", names);
    add("inspection_id", filter.inspection_id);
    add("token_uid", filter.token_uid);
    return out.empty() ? "all" : out;
  }

  // The "stream ended" line: why (`reason`: completed, cancelled, or the ErrorInfo reason
  // the client gets), how many events it carried, where it stopped.
  void LogEndLocked(const grpc::Status& status, std::string_view reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!log_.has_value() || !opened_at_.has_value()) return;
    logging::Info("stream ended",
                  {{"method", log_->method},
                   {"peer", log_->peer},
                   {"account", AccountLabel(log_->account)},
                   {"grpc_code", static_cast<int>(status.error_code())},
                   {"reason", reason},
                   {"events_sent", events_sent_},
                   {"last_cursor", last_cursor_},
                   {"duration_ms", std::chrono::duration<double, std::milli>(
                                       std::chrono::steady_clock::now() - *opened_at_)
                                       .count()},
                   {"trace_id", log_->trace_id}});
  }

  void FinishLocked(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    finished_ = true;
    metadata_sent_ = true;
    if (status.ok() || as_is_ || status.error_code() == grpc::StatusCode::CANCELLED) {
      LogEndLocked(status, status.ok()                                          ? "completed"
                           : status.error_code() == grpc::StatusCode::CANCELLED ? "cancelled"
                                                                                : "error");
      this->Finish(status);
      return;
    }
    errors::ApiError error;
    error.code = static_cast<absl::StatusCode>(status.error_code());
    error.message = status.error_message();
    switch (status.error_code()) {
      case grpc::StatusCode::RESOURCE_EXHAUSTED:
        error.reason = std::string(errors::kReasonSubscriberTooSlow);
        break;
      case grpc::StatusCode::OUT_OF_RANGE:
        error.reason = std::string(errors::kReasonCursorExpired);
        break;
      case grpc::StatusCode::UNAVAILABLE:
        error.reason = std::string(errors::kReasonStreamInterrupted);
        error.retry_delay = std::chrono::milliseconds(0);
        break;
      default:
        error.reason = std::string(errors::kReasonStreamEnded);
        break;
    }
    error.metadata["last_cursor"] = last_cursor_;
    LogEndLocked(status, error.reason);
    this->Finish(error.ToGrpcStatus());
  }

  EventHub* const hub_;
  const StreamQueueLimits limits_;
  const IsFinal is_final_;
  const std::shared_ptr<Link> link_;

  mutable absl::Mutex mu_;
  std::deque<Item> queue_ ABSL_GUARDED_BY(mu_);
  size_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool metadata_sent_ ABSL_GUARDED_BY(mu_) = false;
  grpc::CallbackServerContext* context_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::optional<grpc::Status> pending_finish_ ABSL_GUARDED_BY(mu_);
  std::string last_cursor_ ABSL_GUARDED_BY(mu_);
  uint64_t subscription_ ABSL_GUARDED_BY(mu_) = 0;
  bool attached_ ABSL_GUARDED_BY(mu_) = false;
  bool as_is_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<LogContext> log_ ABSL_GUARDED_BY(mu_);
  std::optional<std::chrono::steady_clock::time_point> opened_at_ ABSL_GUARDED_BY(mu_);
  uint64_t events_sent_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace inspection::streaming

#endif  // GATEWAY_STREAMING_EVENT_STREAM_H_
