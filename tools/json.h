// A small JSON reader and writer for kolo's tools: enough to read
// kolo_build_info_json() and print it back with more members added. Objects keep
// their members in document order. Not a general-purpose library: numbers are
// doubles, and there is no streaming.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace kolo::tools {

class JsonValue {
 public:
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };

  JsonValue() = default;
  static JsonValue boolean(bool value);
  static JsonValue number(double value);
  static JsonValue string(std::string value);
  static JsonValue array();
  static JsonValue object();

  Kind kind() const { return kind_; }
  bool is_object() const { return kind_ == Kind::kObject; }
  bool as_bool() const { return bool_; }
  double as_number() const { return number_; }
  const std::string& as_string() const { return string_; }
  const std::vector<JsonValue>& items() const { return items_; }
  const std::vector<std::pair<std::string, JsonValue>>& members() const { return members_; }

  // The member named key, or nullptr (also when this is not an object).
  const JsonValue* find(const std::string& key) const;
  // The member's string value, or fallback when absent or not a string.
  std::string get_string(const std::string& key, const std::string& fallback = "") const;

  void push_back(JsonValue value) { items_.push_back(std::move(value)); }
  // Sets (replacing) member key of an object.
  void set(const std::string& key, JsonValue value);

  // Scalars as a person reads them: strings unquoted, true/false, numbers short.
  std::string to_text() const;
  // Compact JSON.
  std::string dump() const;

 private:
  friend class JsonParser;
  Kind kind_ = Kind::kNull;
  bool bool_ = false;
  double number_ = 0.0;
  std::string string_;
  std::vector<JsonValue> items_;
  std::vector<std::pair<std::string, JsonValue>> members_;
};

// Parses a whole JSON document. On error returns false and sets *error to what
// went wrong and where (byte offset).
bool parse_json(const std::string& text, JsonValue* out, std::string* error);

// The JSON string literal (quoted, escaped) for text.
std::string json_quote(const std::string& text);

}  // namespace kolo::tools
