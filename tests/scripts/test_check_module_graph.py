"""scripts/check_module_graph.py on small made-up repositories: allowed includes
pass, a forbidden include fails with its file and line, and a broken graph block
is reported."""
import contextlib
import io
import os
import shutil
import tempfile
import unittest

import check_module_graph as graph

GRAPH = """\
# Modules

```module-graph
base:
types:              # plain data
model: base types
engine: base types model
server: base engine
server/main.cc: model
```
"""


class RepoTest(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.root)
        self.write("docs/architecture.md", GRAPH)
        self.write("base/check.h", "#pragma once\n#include <cstdint>\n")
        self.write("types/step.h", '#pragma once\n#include "absl/time/time.h"\n')
        self.write("model/executor.h", '#pragma once\n#include "types/step.h"\n')
        self.write("engine/engine.h", '#pragma once\n#include "model/executor.h"\n')
        self.write("server/service.cc", '#include "engine/engine.h"\n#include "loom/v1/api.pb.h"\n')
        self.write("tests/fake.h", "#pragma once\n")

    def write(self, path, text):
        full = os.path.join(self.root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(text)

    def problems(self):
        return graph.check(self.root)

    def test_allowed_includes_pass(self):
        self.assertEqual(self.problems(), [])

    def test_forbidden_include_fails_with_file_and_line(self):
        self.write("server/service.cc", '#include "engine/engine.h"\n#include "model/executor.h"\n')
        problems = self.problems()
        self.assertEqual(len(problems), 1, problems)
        self.assertTrue(problems[0].startswith("server/service.cc:2: server -> model"), problems[0])

    def test_main_exits_non_zero_on_a_forbidden_include(self):
        self.write("model/sampler.h", '#pragma once\n#include "engine/engine.h"\n')
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = graph.main(["--root", self.root])
        self.assertEqual(rc, 1)
        self.assertIn("model/sampler.h:2: model -> engine", out.getvalue())

    def test_file_rule_allows_only_its_files(self):
        self.write("server/main.cc", '#include "model/executor.h"\n')
        self.assertEqual(self.problems(), [])
        self.write("server/other.cc", '#include "model/executor.h"\n')
        self.assertEqual(len(self.problems()), 1)

    def test_transitive_edge_is_not_a_direct_one(self):
        # engine reaches types through model, but may include it only because
        # the graph names it; server names neither.
        self.write("server/service.cc", '#include "types/step.h"\n')
        self.assertIn("server -> types", self.problems()[0])

    def test_module_code_must_not_include_other_top_level_dirs(self):
        self.write("engine/engine.cc", '#include "tests/fake.h"\n')
        self.assertIn("includes tests/", self.problems()[0])

    def test_nested_directories_and_cuda_files_are_scanned(self):
        self.write("base/cuda/ops.cu", '#include "engine/engine.h"\n')
        self.assertIn("base/cuda/ops.cu:1: base -> engine", self.problems()[0])

    def test_cycle_is_reported(self):
        self.write("docs/architecture.md", GRAPH.replace("model: base types", "model: base types engine"))
        self.assertTrue(any("cycle" in p for p in self.problems()), self.problems())

    def test_unknown_dependency_is_reported(self):
        self.write("docs/architecture.md", GRAPH.replace("base:\n", "base: kernels\n"))
        self.assertIn("unknown module(s) kernels", self.problems()[0])

    def test_missing_module_directory_is_reported(self):
        self.write("docs/architecture.md", GRAPH.replace("types:", "types:\ncache:"))
        self.assertIn("module cache has no directory", self.problems()[0])

    def test_missing_or_second_block_is_reported(self):
        self.write("docs/architecture.md", "# Modules\n")
        self.assertIn("exactly one ```module-graph block, found 0", self.problems()[0])
        self.write("docs/architecture.md", GRAPH + GRAPH)
        self.assertIn("found 2", self.problems()[0])


if __name__ == "__main__":
    unittest.main()
