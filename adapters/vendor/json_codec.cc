#include "adapters/vendor/json_codec.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>

#include "absl/base/thread_annotations.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "inspection/v1/vendor_options.pb.h"

namespace inspection::vendor {
namespace {

using ::google::protobuf::Descriptor;
using ::google::protobuf::EnumDescriptor;
using ::google::protobuf::FieldDescriptor;
using ::google::protobuf::ListValue;
using ::google::protobuf::Message;
using ::google::protobuf::Reflection;
using ::google::protobuf::Struct;
using ::google::protobuf::Value;
using ::nlohmann::json;

// Struct/Value nest three proto levels per JSON level (Value, Struct, the fields map's
// entry; a ListValue two), and a caller's protobuf library refuses a message nested deeper
// than 100 levels (its default recursion limit, gRPC's C++ included): a Value 34 JSON
// levels deep already makes the whole answer unreadable to the caller. So JSON turned into
// a Value keeps 24 levels (72 proto levels, the rest left to the message the Value sits
// in); past them a subtree is replaced by null. That also keeps the recursion off the end
// of the stack on a hostile body (nlohmann parses iteratively, so it would accept one).
// Found by fuzz/vendor_codec_fuzzer (fuzz/corpus/vendor_codec/regress-deep-detect-damage).
constexpr int kMaxValueDepth = 24;
// Back to JSON, a Value comes from a message that was parsed already (within the 100
// levels): this bound only guards the recursion.
constexpr int kMaxJsonDepth = 100;

// Doubles that are integers of at most 53 bits are exact in a double, so writing them
// back as JSON integers restores `{"page": 1}` rather than `{"page": 1.0}`.
constexpr double kMaxExactInteger = 9007199254740992.0;  // 2^53

// ---------------------------------------------------------------------------
// Per-descriptor plans, built once and cached for the life of the process.
// ---------------------------------------------------------------------------

// The JSON shape a message takes in the vendor's API.
enum class Shape { kObject, kTuple, kBareList, kStruct, kValue, kListValue };

// How the values of one enum are spelled by the vendor.
struct EnumPlan {
  std::unordered_map<std::string, int> by_string;
  std::unordered_map<int64_t, int> by_number;
  std::optional<int> null_value;
  // Enum number -> its vendor JSON (string, number or null). Unannotated values are absent.
  std::unordered_map<int, json> to_json;
};

struct MessagePlan {
  Shape shape = Shape::kObject;
  // json_name and vendor_alias spellings -> field. Excludes gateway_only and vendor_body fields,
  // `_raw` siblings, map fields and unknown_fields, which never match a vendor key.
  std::unordered_map<std::string, const FieldDescriptor*> by_key;
  // Fields exchanged with the vendor, in field-number order (encode order and the
  // element order of a vendor_tuple).
  std::vector<const FieldDescriptor*> vendor_fields;
  // Indexed by FieldDescriptor::index().
  std::vector<const FieldDescriptor*> raw_sibling;
  std::vector<const EnumPlan*> enum_plan;
  // Plans of message-typed fields, resolved when this plan is built so that a nested
  // message costs no cache lookup (and no lock) while decoding or encoding.
  std::vector<const MessagePlan*> child;
  std::vector<bool> nullable;
  const FieldDescriptor* unknown_fields = nullptr;
  // The single repeated field of a vendor_bare_list message.
  const FieldDescriptor* list_field = nullptr;
};

bool IsStructField(const FieldDescriptor* field) {
  return field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE &&
         field->message_type()->full_name() == "google.protobuf.Struct";
}

bool IsUsableRawSibling(const FieldDescriptor* raw) {
  if (raw == nullptr || raw->is_repeated()) return false;
  switch (raw->cpp_type()) {
    case FieldDescriptor::CPPTYPE_STRING:
      return raw->type() == FieldDescriptor::TYPE_STRING;
    case FieldDescriptor::CPPTYPE_INT32:
    case FieldDescriptor::CPPTYPE_INT64:
      return true;
    default:
      return false;
  }
}

// Thread-safe cache of plans keyed by descriptor. Descriptors must live as long as the
// process (true of the generated pool); plans are never evicted, so returned references
// stay valid. A plan links to the plans of its message fields, built with it under the
// same lock, so one top-level lookup (a shared lock and a hash) serves a whole message.
class PlanCache {
 public:
  static PlanCache& Get() {
    static PlanCache* const cache = new PlanCache();  // Never destroyed: no exit-time races.
    return *cache;
  }

  const MessagePlan& ForMessage(const Descriptor* descriptor) ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::ReaderMutexLock lock(&mu_);
      auto it = messages_.find(descriptor);
      if (it != messages_.end()) return *it->second;
    }
    absl::MutexLock lock(&mu_);
    return *PlanForLocked(descriptor);
  }

 private:
  const MessagePlan* PlanForLocked(const Descriptor* descriptor)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::unique_ptr<MessagePlan>& slot = messages_[descriptor];
    if (slot != nullptr) return slot.get();
    // Registered before it is filled, so a recursive type finds itself. Nobody else can
    // see the half-built plan: readers wait for the lock held through the whole build.
    slot = std::make_unique<MessagePlan>();
    MessagePlan* plan = slot.get();
    FillMessagePlan(descriptor, plan);
    return plan;
  }

  void FillMessagePlan(const Descriptor* descriptor, MessagePlan* plan)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const std::string& name = descriptor->full_name();
    const auto& options = descriptor->options();
    if (name == "google.protobuf.Struct") {
      plan->shape = Shape::kStruct;
    } else if (name == "google.protobuf.Value") {
      plan->shape = Shape::kValue;
    } else if (name == "google.protobuf.ListValue") {
      plan->shape = Shape::kListValue;
    }
    // Well-known types are converted as a whole; their fields need no plan.
    if (plan->shape != Shape::kObject) return;
    if (options.GetExtension(v1::vendor_tuple)) {
      plan->shape = Shape::kTuple;
    } else if (options.GetExtension(v1::vendor_bare_list)) {
      plan->shape = Shape::kBareList;
    }

    const int count = descriptor->field_count();
    plan->raw_sibling.assign(count, nullptr);
    plan->enum_plan.assign(count, nullptr);
    plan->child.assign(count, nullptr);
    plan->nullable.assign(count, false);
    std::vector<bool> is_raw(count, false);

    const FieldDescriptor* unknown = descriptor->FindFieldByName("unknown_fields");
    if (unknown != nullptr && !unknown->is_repeated() && IsStructField(unknown)) {
      plan->unknown_fields = unknown;
    }
    for (int i = 0; i < count; ++i) {
      const FieldDescriptor* field = descriptor->field(i);
      if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        plan->child[i] = PlanForLocked(field->message_type());
        continue;
      }
      if (field->cpp_type() != FieldDescriptor::CPPTYPE_ENUM) continue;
      plan->enum_plan[i] = EnumPlanFor(field->enum_type());
      if (field->is_repeated()) continue;
      const FieldDescriptor* raw = descriptor->FindFieldByName(field->name() + "_raw");
      if (IsUsableRawSibling(raw)) {
        plan->raw_sibling[i] = raw;
        is_raw[raw->index()] = true;
      }
    }

    for (int i = 0; i < count; ++i) {
      const FieldDescriptor* field = descriptor->field(i);
      const auto& field_options = field->options();
      plan->nullable[i] = field_options.GetExtension(v1::vendor_nullable);
      // A vendor_body field holds the whole answer, not a key of it.
      if (field == plan->unknown_fields || is_raw[i] || field->is_map() ||
          field_options.GetExtension(v1::gateway_only) ||
          field_options.GetExtension(v1::vendor_body)) {
        continue;
      }
      plan->vendor_fields.push_back(field);
      plan->by_key.emplace(field->json_name(), field);
    }
    // Aliases after every json_name, so a json_name is never shadowed by an alias.
    for (const FieldDescriptor* field : plan->vendor_fields) {
      const auto& field_options = field->options();
      for (int a = 0; a < field_options.ExtensionSize(v1::vendor_alias); ++a) {
        plan->by_key.emplace(field_options.GetExtension(v1::vendor_alias, a), field);
      }
    }
    std::sort(plan->vendor_fields.begin(), plan->vendor_fields.end(),
              [](const FieldDescriptor* a, const FieldDescriptor* b) {
                return a->number() < b->number();
              });
    if (plan->shape == Shape::kBareList) {
      for (const FieldDescriptor* field : plan->vendor_fields) {
        if (field->is_repeated()) {
          plan->list_field = field;
          break;
        }
      }
    }
  }

  const EnumPlan* EnumPlanFor(const EnumDescriptor* descriptor) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto& slot = enums_[descriptor];
    if (slot != nullptr) return slot.get();
    slot = std::make_unique<EnumPlan>();
    for (int i = 0; i < descriptor->value_count(); ++i) {
      const auto* value = descriptor->value(i);
      const auto& options = value->options();
      const int number = value->number();
      // First declaration wins for both directions, so aliases cannot reorder meaning.
      if (options.HasExtension(v1::vendor_string)) {
        const std::string& spelling = options.GetExtension(v1::vendor_string);
        slot->by_string.emplace(spelling, number);
        slot->to_json.emplace(number, json(spelling));
      }
      if (options.HasExtension(v1::vendor_number)) {
        const int64_t vendor_number = options.GetExtension(v1::vendor_number);
        slot->by_number.emplace(vendor_number, number);
        slot->to_json.emplace(number, json(vendor_number));
      }
      if (options.GetExtension(v1::vendor_null)) {
        if (!slot->null_value.has_value()) slot->null_value = number;
        slot->to_json.emplace(number, json(nullptr));
      }
    }
    return slot.get();
  }

  absl::Mutex mu_;
  std::unordered_map<const Descriptor*, std::unique_ptr<MessagePlan>> messages_
      ABSL_GUARDED_BY(mu_);
  std::unordered_map<const EnumDescriptor*, std::unique_ptr<EnumPlan>> enums_ ABSL_GUARDED_BY(mu_);
};

// ---------------------------------------------------------------------------
// Well-known types that may live in a dynamic pool.
// ---------------------------------------------------------------------------

// Runs `fn` on `message` viewed as the generated type T. Messages of the generated pool
// are used in place; a dynamic-pool copy of the type goes through the wire format.
template <typename T, typename Fn>
void WithMutable(Message* message, Fn fn) {
  if (T* typed = google::protobuf::DynamicCastToGenerated<T>(message)) {
    fn(typed);
    return;
  }
  T typed;
  typed.ParseFromString(message->SerializeAsString());
  fn(&typed);
  message->ParseFromString(typed.SerializeAsString());
}

template <typename T, typename Fn>
json WithConst(const Message& message, Fn fn) {
  if (const T* typed = google::protobuf::DynamicCastToGenerated<T>(&message)) {
    return fn(*typed);
  }
  T typed;
  typed.ParseFromString(message.SerializeAsString());
  return fn(typed);
}

// ---------------------------------------------------------------------------
// Value <-> JSON.
// ---------------------------------------------------------------------------

void JsonToValueInto(const json& value, Value* out, int depth);

void JsonToStructInto(const json& object, Struct* out, int depth) {
  auto* fields = out->mutable_fields();
  for (auto it = object.begin(); it != object.end(); ++it) {
    JsonToValueInto(it.value(), &(*fields)[it.key()], depth + 1);
  }
}

void JsonToListInto(const json& array, ListValue* out, int depth) {
  for (const json& element : array) JsonToValueInto(element, out->add_values(), depth + 1);
}

void JsonToValueInto(const json& value, Value* out, int depth) {
  if (depth > kMaxValueDepth) {
    out->set_null_value(google::protobuf::NULL_VALUE);
    return;
  }
  switch (value.type()) {
    case json::value_t::boolean:
      out->set_bool_value(*value.get_ptr<const json::boolean_t*>());
      break;
    case json::value_t::number_integer:
      out->set_number_value(static_cast<double>(*value.get_ptr<const json::number_integer_t*>()));
      break;
    case json::value_t::number_unsigned:
      out->set_number_value(static_cast<double>(*value.get_ptr<const json::number_unsigned_t*>()));
      break;
    case json::value_t::number_float:
      out->set_number_value(*value.get_ptr<const json::number_float_t*>());
      break;
    case json::value_t::string:
      out->set_string_value(*value.get_ptr<const json::string_t*>());
      break;
    case json::value_t::array:
      JsonToListInto(value, out->mutable_list_value(), depth);
      break;
    case json::value_t::object:
      JsonToStructInto(value, out->mutable_struct_value(), depth);
      break;
    default:  // null, discarded, binary: nothing a Value can say better than null.
      out->set_null_value(google::protobuf::NULL_VALUE);
      break;
  }
}

json ValueToJsonAt(const Value& value, int depth);

json StructToJsonAt(const Struct& value, int depth) {
  json out = json::object();
  for (const auto& [key, field] : value.fields()) out[key] = ValueToJsonAt(field, depth + 1);
  return out;
}

json ListToJsonAt(const ListValue& value, int depth) {
  json out = json::array();
  for (const Value& element : value.values()) out.push_back(ValueToJsonAt(element, depth + 1));
  return out;
}

json ValueToJsonAt(const Value& value, int depth) {
  if (depth > kMaxJsonDepth) return nullptr;
  switch (value.kind_case()) {
    case Value::kBoolValue:
      return value.bool_value();
    case Value::kNumberValue: {
      const double number = value.number_value();
      if (std::isfinite(number) && std::trunc(number) == number &&
          std::fabs(number) <= kMaxExactInteger) {
        return static_cast<int64_t>(number);
      }
      return number;
    }
    case Value::kStringValue:
      return value.string_value();
    case Value::kListValue:
      return ListToJsonAt(value.list_value(), depth);
    case Value::kStructValue:
      return StructToJsonAt(value.struct_value(), depth);
    default:  // null_value or no kind set.
      return nullptr;
  }
}

// ---------------------------------------------------------------------------
// JSON numbers into integer fields.
// ---------------------------------------------------------------------------

// The JSON value as an integer in [min, max]: a JSON integer, or a float with an
// integral value (`5.0`). nullopt when it is not a number or out of range.
template <typename T>
std::optional<T> IntegerIn(const json& value) {
  constexpr T kMin = std::numeric_limits<T>::min();
  constexpr T kMax = std::numeric_limits<T>::max();
  if (const auto* i = value.get_ptr<const json::number_integer_t*>()) {
    if constexpr (std::is_signed_v<T>) {
      if (*i < static_cast<int64_t>(kMin) || *i > static_cast<int64_t>(kMax)) return std::nullopt;
    } else {
      if (*i < 0 || static_cast<uint64_t>(*i) > static_cast<uint64_t>(kMax)) return std::nullopt;
    }
    return static_cast<T>(*i);
  }
  if (const auto* u = value.get_ptr<const json::number_unsigned_t*>()) {
    if (*u > static_cast<uint64_t>(kMax)) return std::nullopt;
    return static_cast<T>(*u);
  }
  if (const auto* d = value.get_ptr<const json::number_float_t*>()) {
    // kMax + 1 is a power of two, exact as a double, unlike kMax for 64-bit types.
    const double upper = static_cast<double>(kMax / 2 + 1) * 2.0;
    if (!std::isfinite(*d) || std::trunc(*d) != *d || *d < static_cast<double>(kMin) ||
        *d >= upper) {
      return std::nullopt;
    }
    return static_cast<T>(*d);
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------
// Decoding.
// ---------------------------------------------------------------------------

// How one JSON value fared against its field.
enum class Outcome {
  kOk,           // stored (or null, left as the rules say)
  kMismatch,     // JSON type does not fit: the caller keeps it raw
  kUnknownEnum,  // enum value unknown and no raw sibling held it: the caller keeps it raw
};

class Decoder {
 public:
  explicit Decoder(DecodeReport* report) : report_(report) {}

  // Decodes `value` into `message` according to `plan`. False when the JSON does not have
  // the message's shape; `message` may then be partly filled and must be cleared.
  bool DecodeMessageValue(const json& value, Message* message, const MessagePlan& plan) {
    switch (plan.shape) {
      case Shape::kObject:
        if (!value.is_object()) return false;
        DecodeObject(value, message, plan);
        return true;
      case Shape::kTuple:
        return value.is_array() && DecodeTuple(value, message, plan);
      case Shape::kBareList:
        return value.is_array() && plan.list_field != nullptr &&
               DecodeRepeated(value, message, plan.list_field, plan) == Outcome::kOk;
      case Shape::kStruct:
        if (!value.is_object()) return false;
        WithMutable<Struct>(message, [&](Struct* s) { JsonToStructInto(value, s, depth_); });
        return true;
      case Shape::kValue:
        WithMutable<Value>(message, [&](Value* v) { JsonToValueInto(value, v, depth_); });
        return true;
      case Shape::kListValue:
        if (!value.is_array()) return false;
        WithMutable<ListValue>(message, [&](ListValue* l) { JsonToListInto(value, l, depth_); });
        return true;
    }
    return false;
  }

  // Undoes report entries added since `mark`, for a subtree that is kept raw as a whole.
  struct Mark {
    size_t unknown, mismatch, unknown_enum;
  };
  Mark GetMark() const {
    if (report_ == nullptr) return {0, 0, 0};
    return {report_->unknown_paths.size(), report_->type_mismatch_paths.size(),
            report_->unknown_enum_paths.size()};
  }
  void Rewind(const Mark& mark) {
    if (report_ == nullptr) return;
    report_->unknown_paths.resize(mark.unknown);
    report_->type_mismatch_paths.resize(mark.mismatch);
    report_->unknown_enum_paths.resize(mark.unknown_enum);
  }

 private:
  // Appends `.key` (or `key` at the root) to the path for the lifetime of the scope.
  class PathScope {
   public:
    PathScope(std::string& path, const std::string& key) : path_(path), size_(path.size()) {
      if (!path_.empty()) path_.push_back('.');
      path_.append(key);
    }
    PathScope(std::string& path, size_t index) : path_(path), size_(path.size()) {
      absl::StrAppend(&path_, "[", index, "]");
    }
    ~PathScope() { path_.resize(size_); }

   private:
    std::string& path_;
    size_t size_;
  };

  // Keeps the depth counter in step with recursion into nested messages.
  class DepthScope {
   public:
    explicit DepthScope(int& depth) : depth_(depth) { ++depth_; }
    ~DepthScope() { --depth_; }

   private:
    int& depth_;
  };

  void Report(std::vector<std::string> DecodeReport::*list) {
    if (report_ != nullptr) (report_->*list).push_back(path_);
  }

  static void KeepRaw(Message* message, const MessagePlan& plan, const std::string& key,
                      const json& value) {
    if (plan.unknown_fields == nullptr) return;
    Message* unknown = message->GetReflection()->MutableMessage(message, plan.unknown_fields);
    WithMutable<Struct>(unknown, [&](Struct* s) {
      JsonToValueInto(value, &(*s->mutable_fields())[key], /*depth=*/0);
    });
  }

  void DecodeObject(const json& object, Message* message, const MessagePlan& plan) {
    // Fields already claimed by a key of this object; a second spelling of the same field
    // is kept raw instead of overwriting the first. "First" is nlohmann::json's iteration
    // order, which is sorted (`Dark` before `dark`), not the order of the body.
    absl::InlinedVector<bool, 32> claimed(plan.raw_sibling.size(), false);
    const Reflection* reflection = message->GetReflection();
    for (auto it = object.begin(); it != object.end(); ++it) {
      const std::string& key = it.key();
      const json& value = it.value();
      PathScope path(path_, key);
      auto found = plan.by_key.find(key);
      if (found == plan.by_key.end() || claimed[found->second->index()]) {
        KeepRaw(message, plan, key, value);
        Report(&DecodeReport::unknown_paths);
        continue;
      }
      const FieldDescriptor* field = found->second;
      claimed[field->index()] = true;
      const Mark mark = GetMark();
      const Outcome outcome = field->is_repeated() ? DecodeRepeated(value, message, field, plan)
                                                   : DecodeSingular(value, message, field, plan);
      if (outcome == Outcome::kOk) continue;
      // Nothing half-filled: the whole value is kept raw and reported once.
      Rewind(mark);
      reflection->ClearField(message, field);
      KeepRaw(message, plan, key, value);
      Report(outcome == Outcome::kMismatch ? &DecodeReport::type_mismatch_paths
                                           : &DecodeReport::unknown_enum_paths);
    }
  }

  // A vendor_tuple: one element per vendor field, in field-number order, no more and no
  // less (a shorter array would not encode back to the same JSON).
  bool DecodeTuple(const json& array, Message* message, const MessagePlan& plan) {
    if (array.size() != plan.vendor_fields.size()) return false;
    for (size_t i = 0; i < array.size(); ++i) {
      const FieldDescriptor* field = plan.vendor_fields[i];
      const json& element = array[i];
      PathScope path(path_, i);
      // A null element must come back as null on encoding, which only a field with
      // presence does (an implicit scalar would come back as its default).
      if (element.is_null() && !field->has_presence()) return false;
      const Outcome outcome = field->is_repeated() ? DecodeRepeated(element, message, field, plan)
                                                   : DecodeSingular(element, message, field, plan);
      if (outcome != Outcome::kOk) return false;
    }
    return true;
  }

  Outcome DecodeRepeated(const json& value, Message* message, const FieldDescriptor* field,
                         const MessagePlan& plan) {
    if (value.is_null()) return Outcome::kOk;  // Left empty, like any null.
    if (!value.is_array()) return Outcome::kMismatch;
    const Reflection* reflection = message->GetReflection();
    for (size_t i = 0; i < value.size(); ++i) {
      const json& element = value[i];
      PathScope path(path_, i);
      if (element.is_null()) return Outcome::kMismatch;  // A repeated field holds no null.
      switch (field->cpp_type()) {
        case FieldDescriptor::CPPTYPE_MESSAGE: {
          Message* child = reflection->AddMessage(message, field);
          DepthScope depth(depth_);
          if (depth_ > kMaxJsonDepth ||
              !DecodeMessageValue(element, child, *plan.child[field->index()])) {
            return Outcome::kMismatch;
          }
          break;
        }
        case FieldDescriptor::CPPTYPE_ENUM: {
          if (!element.is_string() && !element.is_number()) return Outcome::kMismatch;
          const std::optional<int> number = LookUpEnum(element, *plan.enum_plan[field->index()]);
          if (!number.has_value()) return Outcome::kUnknownEnum;
          reflection->AddEnumValue(message, field, *number);
          break;
        }
        default:
          if (!StoreScalar(element, message, field, /*add=*/true)) return Outcome::kMismatch;
          break;
      }
    }
    return Outcome::kOk;
  }

  Outcome DecodeSingular(const json& value, Message* message, const FieldDescriptor* field,
                         const MessagePlan& plan) {
    const Reflection* reflection = message->GetReflection();
    switch (field->cpp_type()) {
      case FieldDescriptor::CPPTYPE_MESSAGE: {
        const MessagePlan& child_plan = *plan.child[field->index()];
        if (value.is_null() && child_plan.shape != Shape::kValue) return Outcome::kOk;
        DepthScope depth(depth_);
        if (depth_ > kMaxJsonDepth) return Outcome::kMismatch;
        Message* child = reflection->MutableMessage(message, field);
        return DecodeMessageValue(value, child, child_plan) ? Outcome::kOk : Outcome::kMismatch;
      }
      case FieldDescriptor::CPPTYPE_ENUM:
        return DecodeEnum(value, message, field, plan);
      default:
        if (value.is_null()) return Outcome::kOk;
        return StoreScalar(value, message, field, /*add=*/false) ? Outcome::kOk
                                                                 : Outcome::kMismatch;
    }
  }

  static std::optional<int> LookUpEnum(const json& value, const EnumPlan& enum_plan) {
    if (const auto* text = value.get_ptr<const json::string_t*>()) {
      auto it = enum_plan.by_string.find(*text);
      if (it != enum_plan.by_string.end()) return it->second;
      return std::nullopt;
    }
    if (const std::optional<int64_t> number = IntegerIn<int64_t>(value)) {
      auto it = enum_plan.by_number.find(*number);
      if (it != enum_plan.by_number.end()) return it->second;
    }
    return std::nullopt;
  }

  // Stores the vendor's exact value in the `_raw` sibling when its type can hold it.
  static bool StoreRaw(const json& value, Message* message, const FieldDescriptor* raw) {
    const Reflection* reflection = message->GetReflection();
    switch (raw->cpp_type()) {
      case FieldDescriptor::CPPTYPE_STRING:
        if (const auto* text = value.get_ptr<const json::string_t*>()) {
          reflection->SetString(message, raw, *text);
          return true;
        }
        return false;
      case FieldDescriptor::CPPTYPE_INT32:
        if (const std::optional<int32_t> number = IntegerIn<int32_t>(value)) {
          reflection->SetInt32(message, raw, *number);
          return true;
        }
        return false;
      case FieldDescriptor::CPPTYPE_INT64:
        if (const std::optional<int64_t> number = IntegerIn<int64_t>(value)) {
          reflection->SetInt64(message, raw, *number);
          return true;
        }
        return false;
      default:
        return false;
    }
  }

  Outcome DecodeEnum(const json& value, Message* message, const FieldDescriptor* field,
                     const MessagePlan& plan) {
    const EnumPlan& enum_plan = *plan.enum_plan[field->index()];
    const Reflection* reflection = message->GetReflection();
    if (value.is_null()) {
      if (enum_plan.null_value.has_value()) {
        reflection->SetEnumValue(message, field, *enum_plan.null_value);
      }
      return Outcome::kOk;
    }
    if (!value.is_string() && !value.is_number()) return Outcome::kMismatch;
    const FieldDescriptor* raw = plan.raw_sibling[field->index()];
    const bool raw_held = raw != nullptr && StoreRaw(value, message, raw);
    const std::optional<int> number = LookUpEnum(value, enum_plan);
    if (number.has_value()) {
      reflection->SetEnumValue(message, field, *number);
      return Outcome::kOk;
    }
    if (!raw_held) return Outcome::kUnknownEnum;
    Report(&DecodeReport::unknown_enum_paths);
    return Outcome::kOk;
  }

  // Stores a JSON scalar into a scalar field (set, or add when repeated). False when the
  // JSON type does not fit the field.
  static bool StoreScalar(const json& value, Message* message, const FieldDescriptor* field,
                          bool add) {
    const Reflection* r = message->GetReflection();
    switch (field->cpp_type()) {
      case FieldDescriptor::CPPTYPE_BOOL: {
        const auto* b = value.get_ptr<const json::boolean_t*>();
        if (b == nullptr) return false;
        add ? r->AddBool(message, field, *b) : r->SetBool(message, field, *b);
        return true;
      }
      case FieldDescriptor::CPPTYPE_INT32: {
        const auto n = IntegerIn<int32_t>(value);
        if (!n.has_value()) return false;
        add ? r->AddInt32(message, field, *n) : r->SetInt32(message, field, *n);
        return true;
      }
      case FieldDescriptor::CPPTYPE_INT64: {
        const auto n = IntegerIn<int64_t>(value);
        if (!n.has_value()) return false;
        add ? r->AddInt64(message, field, *n) : r->SetInt64(message, field, *n);
        return true;
      }
      case FieldDescriptor::CPPTYPE_UINT32: {
        const auto n = IntegerIn<uint32_t>(value);
        if (!n.has_value()) return false;
        add ? r->AddUInt32(message, field, *n) : r->SetUInt32(message, field, *n);
        return true;
      }
      case FieldDescriptor::CPPTYPE_UINT64: {
        const auto n = IntegerIn<uint64_t>(value);
        if (!n.has_value()) return false;
        add ? r->AddUInt64(message, field, *n) : r->SetUInt64(message, field, *n);
        return true;
      }
      case FieldDescriptor::CPPTYPE_DOUBLE:
      case FieldDescriptor::CPPTYPE_FLOAT: {
        if (!value.is_number()) return false;
        double d = 0;
        if (const auto* f = value.get_ptr<const json::number_float_t*>()) {
          d = *f;
        } else if (const auto* i = value.get_ptr<const json::number_integer_t*>()) {
          d = static_cast<double>(*i);
        } else if (const auto* u = value.get_ptr<const json::number_unsigned_t*>()) {
          d = static_cast<double>(*u);
        }
        if (field->cpp_type() == FieldDescriptor::CPPTYPE_DOUBLE) {
          add ? r->AddDouble(message, field, d) : r->SetDouble(message, field, d);
        } else {
          const float f = static_cast<float>(d);
          add ? r->AddFloat(message, field, f) : r->SetFloat(message, field, f);
        }
        return true;
      }
      case FieldDescriptor::CPPTYPE_STRING: {
        const auto* s = value.get_ptr<const json::string_t*>();
        if (s == nullptr) return false;
        add ? r->AddString(message, field, *s) : r->SetString(message, field, *s);
        return true;
      }
      default:
        return false;
    }
  }

  DecodeReport* report_;
  std::string path_;
  int depth_ = 0;
};

// ---------------------------------------------------------------------------
// Encoding.
// ---------------------------------------------------------------------------

json EncodeWithPlan(const Message& message, const MessagePlan& plan);

json ScalarToJson(const Message& message, const FieldDescriptor* field, int index) {
  const Reflection* r = message.GetReflection();
  const bool repeated = index >= 0;
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_BOOL:
      return repeated ? r->GetRepeatedBool(message, field, index) : r->GetBool(message, field);
    case FieldDescriptor::CPPTYPE_INT32:
      return repeated ? r->GetRepeatedInt32(message, field, index) : r->GetInt32(message, field);
    case FieldDescriptor::CPPTYPE_INT64:
      return repeated ? r->GetRepeatedInt64(message, field, index) : r->GetInt64(message, field);
    case FieldDescriptor::CPPTYPE_UINT32:
      return repeated ? r->GetRepeatedUInt32(message, field, index) : r->GetUInt32(message, field);
    case FieldDescriptor::CPPTYPE_UINT64:
      return repeated ? r->GetRepeatedUInt64(message, field, index) : r->GetUInt64(message, field);
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return repeated ? r->GetRepeatedDouble(message, field, index) : r->GetDouble(message, field);
    case FieldDescriptor::CPPTYPE_FLOAT:
      return static_cast<double>(repeated ? r->GetRepeatedFloat(message, field, index)
                                          : r->GetFloat(message, field));
    case FieldDescriptor::CPPTYPE_STRING:
      return repeated ? r->GetRepeatedString(message, field, index) : r->GetString(message, field);
    default:
      return nullptr;
  }
}

// The vendor spelling of enum number `number`, or nullopt when it has none.
std::optional<json> EnumToJson(const EnumPlan& enum_plan, int number) {
  auto it = enum_plan.to_json.find(number);
  if (it == enum_plan.to_json.end()) return std::nullopt;
  return it->second;
}

// One field's JSON. nullopt when the field is to be left out. `filler` is set when the
// JSON only stands for "not set" (a vendor_nullable null), so that a value kept raw in
// unknown_fields under the same key may take its place.
std::optional<json> EncodeField(const Message& message, const FieldDescriptor* field,
                                const MessagePlan& plan, bool in_tuple, bool* filler) {
  const Reflection* r = message.GetReflection();
  *filler = false;
  const bool nullable = plan.nullable[field->index()] || in_tuple;
  auto unset = [&]() -> std::optional<json> {
    if (!nullable) return std::nullopt;
    *filler = true;
    return json(nullptr);
  };

  if (field->is_repeated()) {
    const int size = r->FieldSize(message, field);
    if (size == 0 && !in_tuple) return unset();
    json array = json::array();
    for (int i = 0; i < size; ++i) {
      switch (field->cpp_type()) {
        case FieldDescriptor::CPPTYPE_MESSAGE:
          array.push_back(EncodeWithPlan(r->GetRepeatedMessage(message, field, i),
                                         *plan.child[field->index()]));
          break;
        case FieldDescriptor::CPPTYPE_ENUM: {
          // An element must take its slot; an unmapped value has no better spelling.
          std::optional<json> spelled = EnumToJson(*plan.enum_plan[field->index()],
                                                   r->GetRepeatedEnumValue(message, field, i));
          array.push_back(spelled.has_value() ? *std::move(spelled) : json(nullptr));
          break;
        }
        default:
          array.push_back(ScalarToJson(message, field, i));
          break;
      }
    }
    return array;
  }

  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_MESSAGE:
      if (!r->HasField(message, field)) return unset();
      return EncodeWithPlan(r->GetMessage(message, field), *plan.child[field->index()]);
    case FieldDescriptor::CPPTYPE_ENUM: {
      if (const FieldDescriptor* raw = plan.raw_sibling[field->index()];
          raw != nullptr && r->HasField(message, raw)) {
        return ScalarToJson(message, raw, -1);
      }
      const int number = r->GetEnumValue(message, field);
      std::optional<json> spelled = EnumToJson(*plan.enum_plan[field->index()], number);
      if (!spelled.has_value()) return unset();
      // The default value spelled as null (an unset gender) also only means "not set".
      *filler = number == 0 && spelled->is_null();
      return spelled;
    }
    default:
      // In a tuple an implicit-presence scalar takes its slot even at its default.
      if (r->HasField(message, field) || (in_tuple && !field->has_presence())) {
        return ScalarToJson(message, field, -1);
      }
      return unset();
  }
}

json EncodeWithPlan(const Message& message, const MessagePlan& plan) {
  switch (plan.shape) {
    case Shape::kStruct:
      return WithConst<Struct>(message, [](const Struct& s) { return StructToJson(s); });
    case Shape::kValue:
      return WithConst<Value>(message, [](const Value& v) { return ValueToJson(v); });
    case Shape::kListValue:
      return WithConst<ListValue>(message, [](const ListValue& l) { return ListToJsonAt(l, 0); });
    case Shape::kTuple: {
      json array = json::array();
      bool filler = false;
      for (const FieldDescriptor* field : plan.vendor_fields) {
        std::optional<json> element = EncodeField(message, field, plan, /*in_tuple=*/true, &filler);
        array.push_back(element.has_value() ? *std::move(element) : json(nullptr));
      }
      return array;
    }
    case Shape::kBareList: {
      if (plan.list_field == nullptr) return json::array();
      bool filler = false;
      std::optional<json> list =
          EncodeField(message, plan.list_field, plan, /*in_tuple=*/true, &filler);
      return list.has_value() && list->is_array() ? *std::move(list) : json::array();
    }
    case Shape::kObject:
      break;
  }

  json object = json::object();
  // Keys holding a filler null; a raw value kept under the same key replaces it.
  std::vector<std::string> filler_keys;
  for (const FieldDescriptor* field : plan.vendor_fields) {
    bool filler = false;
    std::optional<json> encoded = EncodeField(message, field, plan, /*in_tuple=*/false, &filler);
    if (!encoded.has_value()) continue;
    object[field->json_name()] = *std::move(encoded);
    if (filler) filler_keys.push_back(field->json_name());
  }
  if (plan.unknown_fields != nullptr &&
      message.GetReflection()->HasField(message, plan.unknown_fields)) {
    json unknown =
        WithConst<Struct>(message.GetReflection()->GetMessage(message, plan.unknown_fields),
                          [](const Struct& s) { return StructToJson(s); });
    for (auto it = unknown.begin(); it != unknown.end(); ++it) {
      auto existing = object.find(it.key());
      if (existing == object.end()) {
        object[it.key()] = std::move(it.value());
      } else if (std::find(filler_keys.begin(), filler_keys.end(), it.key()) != filler_keys.end()) {
        *existing = std::move(it.value());
      }
    }
  }
  return object;
}

}  // namespace

absl::Status DecodeMessage(const nlohmann::json& json, google::protobuf::Message* message,
                           DecodeReport* report) {
  message->Clear();
  const Descriptor* descriptor = message->GetDescriptor();
  const MessagePlan& plan = PlanCache::Get().ForMessage(descriptor);
  const char* expected = nullptr;
  switch (plan.shape) {
    case Shape::kObject:
    case Shape::kStruct:
      if (!json.is_object()) expected = "object";
      break;
    case Shape::kTuple:
    case Shape::kBareList:
    case Shape::kListValue:
      if (!json.is_array()) expected = "array";
      break;
    case Shape::kValue:
      break;
  }
  if (expected != nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(descriptor->full_name(), ": expected a JSON ",
                                                   expected, ", got ", json.type_name()));
  }
  Decoder decoder(report);
  const Decoder::Mark mark = decoder.GetMark();
  if (!decoder.DecodeMessageValue(json, message, plan)) {
    // Only an array-shaped message gets here: its elements do not fit and, at the top,
    // there is no unknown_fields to keep them in.
    decoder.Rewind(mark);
    message->Clear();
    return absl::InvalidArgumentError(absl::StrCat(descriptor->full_name(), ": the JSON array (",
                                                   json.size(),
                                                   " elements) does not fit the message's fields"));
  }
  return absl::OkStatus();
}

nlohmann::json EncodeMessage(const google::protobuf::Message& message) {
  return EncodeWithPlan(message, PlanCache::Get().ForMessage(message.GetDescriptor()));
}

google::protobuf::Value JsonToValue(const nlohmann::json& json) {
  Value value;
  JsonToValueInto(json, &value, /*depth=*/0);
  return value;
}

nlohmann::json ValueToJson(const google::protobuf::Value& value) {
  return ValueToJsonAt(value, /*depth=*/0);
}

google::protobuf::Struct JsonToStruct(const nlohmann::json& object) {
  Struct value;
  if (object.is_object()) JsonToStructInto(object, &value, /*depth=*/0);
  return value;
}

nlohmann::json StructToJson(const google::protobuf::Struct& value) {
  return StructToJsonAt(value, /*depth=*/0);
}

}  // namespace inspection::vendor
