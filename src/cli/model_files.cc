#include "cli/model_files.h"

#include "core/error.h"
#include "core/file.h"
#include "core/json.h"

namespace dsinfer::cli {

chat::ChatTemplate load_chat_template(const std::string& dir) {
  std::string path = dir + "/tokenizer_config.json";
  Json config;
  try {
    config = Json::parse(read_file(path));
  } catch (const Error& error) {
    throw Error(str_cat(path, ": ", error.what()));
  }
  return chat::ChatTemplate::from_tokenizer_config(config, path);
}

}  // namespace dsinfer::cli
