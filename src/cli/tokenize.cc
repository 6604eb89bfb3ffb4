// dsinfer tokenize: text or a chat to ids, ids back to text. Needs only the tokenizer files.
#include <cstdio>
#include <string>

#include "cli/flags.h"
#include "cli/model_files.h"
#include "cli/verbs.h"
#include "core/error.h"
#include "core/file.h"
#include "core/json.h"
#include "core/strings.h"
#include "tokenizer/chat/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace dsinfer::cli {

int run_tokenize(int argc, char** argv) {
  Flags flags("dsinfer tokenize --model DIR (--text TEXT | --chat MESSAGES.json | --decode IDS) [flags]",
              "Encodes text (or a chat rendered through the model's template) to token ids, or decodes ids.");
  flags.add_string("model", "DIR", "directory with tokenizer.json (and tokenizer_config.json)", true);
  flags.add_string("text", "TEXT", "text to encode");
  flags.add_string("chat", "FILE", "JSON file with a list of {role, content} messages to render and encode");
  flags.add_bool("add-generation-prompt", "with --chat: end with the assistant's turn opening");
  flags.add_bool("add-special-tokens", "prepend the BOS token as the tokenizer config asks");
  flags.add_string("decode", "IDS", "comma-separated ids to decode");
  flags.add_bool("json", "print {ids, text} as JSON");
  if (!flags.parse(argc, argv)) return 0;
  int modes = flags.has("text") + flags.has("chat") + flags.has("decode");
  DSINFER_CHECK(modes == 1, "give exactly one of --text, --chat and --decode");
  DSINFER_CHECK(!flags.get_bool("add-generation-prompt") || flags.has("chat"), "--add-generation-prompt needs --chat");

  std::string dir = flags.get_string("model");
  tokenizer::Tokenizer tokenizer = tokenizer::Tokenizer::from_dir(dir);
  if (flags.has("decode")) {
    std::vector<int32_t> ids = parse_int_list(flags.get_string("decode"), "--decode");
    for (int32_t id : ids)
      DSINFER_CHECK(id >= 0 && id < tokenizer.vocab_size(), "--decode: id ", id, " is outside the vocabulary of ",
                    tokenizer.vocab_size());
    std::string text = tokenizer.decode(ids);
    if (flags.get_bool("json")) {
      Json out;
      out["text"] = text;
      std::printf("%s\n", out.dump().c_str());
    } else {
      std::printf("%s\n", text.c_str());
    }
    return 0;
  }

  std::string text = flags.get_string("text");
  if (flags.has("chat")) {
    std::string path = flags.get_string("chat");
    Json messages;
    try {
      messages = Json::parse(read_file(path));
    } catch (const Error& error) {
      throw Error(str_cat(path, ": ", error.what()));
    }
    DSINFER_CHECK(messages.is_array(), path, ": expected a JSON list of messages");
    text = load_chat_template(dir).render(messages, flags.get_bool("add-generation-prompt"));
  }
  std::vector<int32_t> ids = tokenizer.encode(text, flags.get_bool("add-special-tokens"));
  if (flags.get_bool("json")) {
    Json out;
    out["ids"] = Json::array();
    for (int32_t id : ids) out["ids"].push_back(id);
    out["text"] = text;
    std::printf("%s\n", out.dump().c_str());
  } else {
    std::vector<std::string> parts;
    for (int32_t id : ids) parts.push_back(std::to_string(id));
    std::printf("%s\n", join(parts, " ").c_str());
  }
  return 0;
}

}  // namespace dsinfer::cli
