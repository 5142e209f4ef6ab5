// "reproduce:" lines are pasted into a shell: each word must come back whole.
#include "scenarios/shell_word.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace rcxl::scenarios {
namespace {

// What bash makes of `word` as one argument (a word is one line: the here
// document passes it to bash as typed).
std::string through_shell(const std::string& word) {
  const std::string command = "bash <<'WORD'\nprintf '%s' " + word + "\nWORD\n";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return "(popen failed)";
  std::string out;
  char buffer[256];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) out.append(buffer, n);
  pclose(pipe);
  return out;
}

TEST(ShellWord, R8_PlainWordsStayAsTheyAre) {
  EXPECT_EQ(shell_word("scenarios/replays/x.json"), "scenarios/replays/x.json");
  EXPECT_EQ(shell_word("/device/channels=8,16"), "/device/channels=8,16");
}

TEST(ShellWord, R8_AnyTextComesBackWholeThroughTheShell) {
  for (const std::string text :
       {"/tmp/repro 7;x/a b.json", "it's", "$(rm -rf x)", "a\"b", "tab\there", "new\nline", "", "*",
        "~user", "a'b'c", "back\\slash", "esc\x1b[31m", "new\nand 'quote' \\"}) {
    const std::string word = shell_word(text);
    EXPECT_NE(word, text) << "needs quoting: " << text;
    // One line, and no raw control byte for the terminal (session-33 review:
    // a newline in a path split the reproduce line).
    EXPECT_EQ(word.find_first_of("\n\t\x1b"), std::string::npos) << word;
    EXPECT_EQ(through_shell(word), text) << word;
  }
}

// A path is pasted as an argument: one that starts with '-' would be read as
// an option ("FILE is required"), so it gets "./" (session-24 review).
TEST(ShellWord, R8_APathThatLooksLikeAnOptionGetsDotSlash) {
  EXPECT_EQ(shell_path("-x.json"), "./-x.json");
  EXPECT_EQ(shell_path("--profiles"), "./--profiles");
  EXPECT_EQ(shell_path("- a.json"), "'./- a.json'");
  EXPECT_EQ(shell_path("/tmp/-x.json"), "/tmp/-x.json");
  EXPECT_EQ(shell_path("a-b.json"), "a-b.json");
}

}  // namespace
}  // namespace rcxl::scenarios
