#include "json.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace kolo::tools {

JsonValue JsonValue::boolean(bool value) {
  JsonValue v;
  v.kind_ = Kind::kBool;
  v.bool_ = value;
  return v;
}

JsonValue JsonValue::number(double value) {
  JsonValue v;
  v.kind_ = Kind::kNumber;
  v.number_ = value;
  return v;
}

JsonValue JsonValue::string(std::string value) {
  JsonValue v;
  v.kind_ = Kind::kString;
  v.string_ = std::move(value);
  return v;
}

JsonValue JsonValue::array() {
  JsonValue v;
  v.kind_ = Kind::kArray;
  return v;
}

JsonValue JsonValue::object() {
  JsonValue v;
  v.kind_ = Kind::kObject;
  return v;
}

const JsonValue* JsonValue::find(const std::string& key) const {
  for (const auto& [name, value] : members_) {
    if (name == key) return &value;
  }
  return nullptr;
}

std::string JsonValue::get_string(const std::string& key, const std::string& fallback) const {
  const JsonValue* v = find(key);
  return v && v->kind_ == Kind::kString ? v->string_ : fallback;
}

void JsonValue::set(const std::string& key, JsonValue value) {
  for (auto& member : members_) {
    if (member.first == key) {
      member.second = std::move(value);
      return;
    }
  }
  members_.emplace_back(key, std::move(value));
}

namespace {

std::string format_number(double value) {
  if (!std::isfinite(value)) return "null";  // JSON has no inf or nan
  char buffer[32];
  if (value == std::floor(value) && std::fabs(value) < 1e15) {
    std::snprintf(buffer, sizeof buffer, "%.0f", value);
  } else {
    std::snprintf(buffer, sizeof buffer, "%.17g", value);
  }
  return buffer;
}

}  // namespace

std::string JsonValue::to_text() const {
  switch (kind_) {
    case Kind::kNull: return "null";
    case Kind::kBool: return bool_ ? "true" : "false";
    case Kind::kNumber: return format_number(number_);
    case Kind::kString: return string_;
    default: return dump();
  }
}

std::string JsonValue::dump() const {
  switch (kind_) {
    case Kind::kString: return json_quote(string_);
    case Kind::kArray: {
      std::string out = "[";
      for (size_t i = 0; i < items_.size(); ++i) {
        out += (i ? "," : "") + items_[i].dump();
      }
      return out + "]";
    }
    case Kind::kObject: {
      std::string out = "{";
      for (size_t i = 0; i < members_.size(); ++i) {
        out += (i ? "," : "") + json_quote(members_[i].first) + ":" + members_[i].second.dump();
      }
      return out + "}";
    }
    default: return to_text();
  }
}

std::string json_quote(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buffer[8];
          std::snprintf(buffer, sizeof buffer, "\\u%04x", c);
          out += buffer;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

// Recursive descent over the grammar of RFC 8259. Depth is bounded so that a
// hostile document cannot overflow the stack.
class JsonParser {
 public:
  explicit JsonParser(const std::string& text) : text_(text) {}

  bool parse_document(JsonValue* out, std::string* error) {
    bool ok = parse_value(out, 0);
    if (ok) {
      skip_space();
      ok = pos_ == text_.size() || fail("trailing text");
    }
    if (!ok) *error = error_ + " at byte " + std::to_string(pos_);
    return ok;
  }

 private:
  static constexpr int kMaxDepth = 64;

  bool fail(const char* what) {
    if (error_.empty()) error_ = what;
    return false;
  }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  bool consume(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool literal(const char* word) {
    const std::string w(word);
    if (text_.compare(pos_, w.size(), w) != 0) return fail("invalid literal");
    pos_ += w.size();
    return true;
  }

  bool parse_value(JsonValue* out, int depth) {
    if (depth > kMaxDepth) return fail("nesting too deep");
    skip_space();
    if (pos_ >= text_.size()) return fail("unexpected end");
    const char c = text_[pos_];
    if (c == '{') return parse_object(out, depth);
    if (c == '[') return parse_array(out, depth);
    if (c == '"') {
      out->kind_ = JsonValue::Kind::kString;
      return parse_string(&out->string_);
    }
    if (c == 't' || c == 'f') {
      *out = JsonValue::boolean(c == 't');
      return literal(c == 't' ? "true" : "false");
    }
    if (c == 'n') {
      *out = JsonValue();
      return literal("null");
    }
    return parse_number(out);
  }

  bool parse_number(JsonValue* out) {
    const char* begin = text_.c_str() + pos_;
    char* end = nullptr;
    const double value = std::strtod(begin, &end);
    if (end == begin) return fail("expected a value");
    pos_ += static_cast<size_t>(end - begin);
    *out = JsonValue::number(value);
    return true;
  }

  bool parse_object(JsonValue* out, int depth) {
    *out = JsonValue::object();
    ++pos_;  // '{'
    if (consume('}')) return true;
    do {
      std::string key;
      skip_space();
      if (pos_ >= text_.size() || text_[pos_] != '"') return fail("expected a key");
      if (!parse_string(&key)) return false;
      if (!consume(':')) return fail("expected ':'");
      JsonValue value;
      if (!parse_value(&value, depth + 1)) return false;
      out->members_.emplace_back(std::move(key), std::move(value));
    } while (consume(','));
    return consume('}') || fail("expected ',' or '}'");
  }

  bool parse_array(JsonValue* out, int depth) {
    *out = JsonValue::array();
    ++pos_;  // '['
    if (consume(']')) return true;
    do {
      JsonValue value;
      if (!parse_value(&value, depth + 1)) return false;
      out->items_.push_back(std::move(value));
    } while (consume(','));
    return consume(']') || fail("expected ',' or ']'");
  }

  bool parse_hex4(unsigned* code) {
    if (pos_ + 4 > text_.size()) return fail("short \\u escape");
    *code = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = text_[pos_++];
      const int digit = (h >= '0' && h <= '9')   ? h - '0'
                        : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                        : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                                 : -1;
      if (digit < 0) return fail("bad \\u escape");
      *code = *code * 16 + static_cast<unsigned>(digit);
    }
    return true;
  }

  static void append_utf8(unsigned code, std::string* out) {
    if (code < 0x80) {
      *out += static_cast<char>(code);
    } else if (code < 0x800) {
      *out += static_cast<char>(0xC0 | (code >> 6));
      *out += static_cast<char>(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
      *out += static_cast<char>(0xE0 | (code >> 12));
      *out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      *out += static_cast<char>(0x80 | (code & 0x3F));
    } else {
      *out += static_cast<char>(0xF0 | (code >> 18));
      *out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
      *out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      *out += static_cast<char>(0x80 | (code & 0x3F));
    }
  }

  bool parse_escape(std::string* out) {
    if (pos_ >= text_.size()) return fail("unterminated escape");
    const char e = text_[pos_++];
    switch (e) {
      case '"': case '\\': case '/': *out += e; return true;
      case 'b': *out += '\b'; return true;
      case 'f': *out += '\f'; return true;
      case 'n': *out += '\n'; return true;
      case 'r': *out += '\r'; return true;
      case 't': *out += '\t'; return true;
      case 'u': break;
      default: return fail("bad escape");
    }
    unsigned code = 0;
    if (!parse_hex4(&code)) return false;
    if (code >= 0xD800 && code < 0xDC00 && text_.compare(pos_, 2, "\\u") == 0) {
      pos_ += 2;
      unsigned low = 0;
      if (!parse_hex4(&low)) return false;
      code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
    }
    append_utf8(code, out);
    return true;
  }

  bool parse_string(std::string* out) {
    ++pos_;  // opening quote
    while (pos_ < text_.size()) {
      const char c = text_[pos_++];
      if (c == '"') return true;
      if (c == '\\') {
        if (!parse_escape(out)) return false;
      } else {
        *out += c;
      }
    }
    return fail("unterminated string");
  }

  const std::string& text_;
  size_t pos_ = 0;
  std::string error_;
};

bool parse_json(const std::string& text, JsonValue* out, std::string* error) {
  JsonParser parser(text);
  return parser.parse_document(out, error);
}

}  // namespace kolo::tools
