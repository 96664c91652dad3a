// What loomd prints when asked about itself: a short usage for --help and -h
// (the common flags and where the rest are: --helpfull, docs/api.md), and
// --version's version, build, CPU and CUDA support.
#pragma once

#include <string>

namespace loom {

std::string ShortUsage();
std::string VersionText();

// Whether argv asks for the short usage: --help, -help or -h anywhere
// before a bare "--".
bool WantsShortUsage(int argc, char** argv);

// Installs VersionText as absl's --version text and limits absl's --help
// family to loomd's own flags (server/main.cc); call before parsing.
void ConfigureUsage();

}  // namespace loom
