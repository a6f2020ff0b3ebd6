#pragma once
/// \file
/// A small, strict JSON reader and string escaper: enough for safetensors headers and metadata.
/// Numbers keep their text so 64-bit offsets are read exactly; nesting is limited so hostile
/// input cannot exhaust the stack.

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cohort::detail {

struct JsonMember;

struct JsonValue {
  enum class Kind { null, boolean, number, string, array, object } kind = Kind::null;
  bool boolean = false;
  std::string text; // string contents, or a number's literal text
  std::vector<JsonValue> items;
  // Not vector<pair<string, JsonValue>>: pair needs a complete JsonValue, which Clang (with
  // libstdc++) enforces here; a forward-declared member struct is fine for both compilers.
  std::vector<JsonMember> members; // an object's members, in file order

  /// The first member called `key`, or nullptr.
  const JsonValue* member(std::string_view key) const;
  /// The value as an unsigned 64-bit integer, if it is one.
  std::optional<std::uint64_t> as_u64() const {
    if (kind != Kind::number) return std::nullopt;
    std::uint64_t v = 0;
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || p != text.data() + text.size()) return std::nullopt;
    return v;
  }
};

struct JsonMember {
  std::string key;
  JsonValue value;
};

inline const JsonValue* JsonValue::member(std::string_view key) const {
  for (const JsonMember& m : members)
    if (m.key == key) return &m.value;
  return nullptr;
}

/// Thrown by parse_json with the byte offset of the problem.
struct JsonError {
  std::size_t offset;
  std::string what;
};

class JsonParser {
 public:
  explicit JsonParser(std::string_view s) : s_(s) {}

  JsonValue parse_document() {
    JsonValue v = value(0);
    skip_ws();
    if (i_ != s_.size()) fail("unexpected text after the JSON value");
    return v;
  }

 private:
  static constexpr int max_depth = 32;

  [[noreturn]] void fail(std::string what) const { throw JsonError{i_, std::move(what)}; }
  void skip_ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  bool eat(char c) {
    skip_ws();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail(std::string("expected '") + c + "'");
  }

  JsonValue value(int depth) {
    if (depth > max_depth) fail("nesting deeper than 32 levels");
    skip_ws();
    if (i_ >= s_.size()) fail("unexpected end of input");
    JsonValue v;
    const char c = s_[i_];
    if (c == '{') {
      ++i_;
      v.kind = JsonValue::Kind::object;
      if (eat('}')) return v;
      do {
        skip_ws();
        if (i_ >= s_.size() || s_[i_] != '"') fail("expected a string key");
        std::string key = string();
        expect(':');
        v.members.push_back({std::move(key), value(depth + 1)});
      } while (eat(','));
      expect('}');
    } else if (c == '[') {
      ++i_;
      v.kind = JsonValue::Kind::array;
      if (eat(']')) return v;
      do v.items.push_back(value(depth + 1));
      while (eat(','));
      expect(']');
    } else if (c == '"') {
      v.kind = JsonValue::Kind::string;
      v.text = string();
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      v.kind = JsonValue::Kind::number;
      const std::size_t start = i_;
      if (s_[i_] == '-') ++i_;
      auto digits = [&] {
        const std::size_t d = i_;
        while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
        if (i_ == d) fail("malformed number");
      };
      digits();
      if (i_ < s_.size() && s_[i_] == '.') {
        ++i_;
        digits();
      }
      if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
        ++i_;
        if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
        digits();
      }
      v.text = std::string(s_.substr(start, i_ - start));
    } else if (s_.substr(i_, 4) == "true") {
      i_ += 4;
      v.kind = JsonValue::Kind::boolean;
      v.boolean = true;
    } else if (s_.substr(i_, 5) == "false") {
      i_ += 5;
      v.kind = JsonValue::Kind::boolean;
    } else if (s_.substr(i_, 4) == "null") {
      i_ += 4;
    } else {
      fail("unexpected character");
    }
    return v;
  }

  std::string string() {
    ++i_; // opening quote
    std::string out;
    while (true) {
      if (i_ >= s_.size()) fail("unterminated string");
      const char c = s_[i_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) {
        --i_; // report the offset of the character itself
        fail("control character in string");
      }
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) fail("unterminated escape");
      const char e = s_[i_++];
      switch (e) {
      case '"':
        out += '"';
        break;
      case '\\':
        out += '\\';
        break;
      case '/':
        out += '/';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'u': {
        std::uint32_t cp = hex4();
        if (cp >= 0xD800 && cp < 0xDC00) { // surrogate pair
          if (s_.substr(i_, 2) != "\\u") fail("unpaired surrogate");
          i_ += 2;
          const std::uint32_t lo = hex4();
          if (lo < 0xDC00 || lo >= 0xE000) fail("invalid low surrogate");
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        }
        append_utf8(out, cp);
        break;
      }
      default:
        fail("invalid escape");
      }
    }
  }
  std::uint32_t hex4() {
    if (i_ + 4 > s_.size()) fail("truncated \\u escape");
    std::uint32_t v = 0;
    auto [p, ec] = std::from_chars(s_.data() + i_, s_.data() + i_ + 4, v, 16);
    if (ec != std::errc() || p != s_.data() + i_ + 4) fail("invalid \\u escape");
    i_ += 4;
    return v;
  }
  static void append_utf8(std::string& out, std::uint32_t cp) {
    if (cp < 0x80) {
      out += char(cp);
    } else if (cp < 0x800) {
      out += char(0xC0 | (cp >> 6));
      out += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += char(0xE0 | (cp >> 12));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    } else {
      out += char(0xF0 | (cp >> 18));
      out += char(0x80 | ((cp >> 12) & 0x3F));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    }
  }

  std::string_view s_;
  std::size_t i_ = 0;
};

/// `"text"` with JSON escapes.
inline std::string json_quote(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\r':
      out += "\\r";
      break;
    case '\t':
      out += "\\t";
      break;
    default:
      if (static_cast<unsigned char>(c) < 0x20) {
        static constexpr char hex[] = "0123456789abcdef";
        out += "\\u00";
        out += hex[(c >> 4) & 0xF];
        out += hex[c & 0xF];
      } else {
        out += c;
      }
    }
  }
  return out + "\"";
}

} // namespace cohort::detail
