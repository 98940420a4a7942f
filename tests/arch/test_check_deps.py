#!/usr/bin/env python3
"""Tests of tests/arch/check_deps.py: the dependency check must be able to fail, and say where.

Each fixture under tests/arch/fixtures/ is a tiny tree with its own layers.txt; the checker runs on
it and its exact findings and exit status are compared with the ones written here. The fixtures
are not sources of the project (tests/arch/layers.txt ignores them) and are never compiled.

Usage: python3 tests/arch/test_check_deps.py [-v]        (ctest: style_deps_selftest)
"""

import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKER = os.path.join(HERE, 'check_deps.py')
FIXTURES = os.path.join(HERE, 'fixtures')


def run(fixture, *extra, layers=None):
    """(exit status, stdout lines) of the checker on a fixture."""
    root = os.path.join(FIXTURES, fixture)
    cmd = [sys.executable, CHECKER, '--root', root, '--layers',
           layers or os.path.join(root, 'layers.txt')] + list(extra)
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=root)
    return p.returncode, p.stdout.splitlines(), p.stderr


class CheckDeps(unittest.TestCase):
    def expect(self, fixture, rc, lines, *extra):
        got_rc, got, err = run(fixture, *extra)
        self.assertEqual(got, lines, err)
        self.assertEqual(got_rc, rc, err)

    def test_clean(self):
        # static inline and macro of a header, extern "C", a function table, a name that a test
        # program also defines (as tests/simcuda does for CUDA's), die() defined three times
        self.expect('clean', 0, [])

    def test_up_include(self):
        # an include alone (one constant used) is a dependency
        self.expect('up_include', 1, [
            'low/low_util.c:3: low -> high is not an arrow of the layers (row low): '
            '#include "high_api.h"',
            'folder cycle: high -> low -> high',
            '  high/high_api.c:2: high -> low: #include "low_api.h"',
            '  low/low_util.c:3: low -> high: #include "high_api.h"',
        ])

    def test_up_call_through_lower_header(self):
        # low.c includes only low.h, which declares a function that high/high.c defines
        self.expect('up_call', 1, [
            'low/low.c:5: low -> high is not an arrow of the layers (row low): '
            'calls high_notify(), defined in high/high.c',
            'low/low.h:4: declares high_notify(), defined in high/high.c: low may not use high',
            'module cycle: high/high -> low/low -> high/high',
            '  high/high.c:1: high/high -> low/low: #include "low.h"',
            '  low/low.c:5: low/low -> high/high: calls high_notify(), defined in high/high.c',
            'folder cycle: high -> low -> high',
            '  high/high.c:1: high -> low: #include "low.h"',
            '  low/low.c:5: low -> high: calls high_notify(), defined in high/high.c',
        ])

    def test_up_declaration(self):
        # low.h declares a function and a variable that high/high.c defines; only app (which may
        # use both) calls them, so no dependency goes up: the declarations alone are the finding.
        # Its own function and a C library one (defined nowhere in the tree) are not.
        self.expect('up_declaration', 1, [
            'low/low.h:5: declares high_run(), defined in high/high.c: low may not use high',
            'low/low.h:6: declares high_table, defined in high/high.c: low may not use high',
        ])

    def test_cycle_behind_shared_header(self):
        # a.c and b.c include only shared.h, which declares both: the calls close the cycle
        self.expect('hidden_cycle', 1, [
            'module cycle: rep/a -> rep/b -> rep/a',
            '  rep/a.c:6: rep/a -> rep/b: calls b_render(), defined in rep/b.c',
            '  rep/b.c:5: rep/b -> rep/a: calls a_write(), defined in rep/a.c',
        ])

    def test_cycle_through_data(self):
        # a variable defined in c.c whose initializer takes the address of d.c's function
        self.expect('data_cycle', 1, [
            'module cycle: rep/c -> rep/d -> rep/c',
            '  rep/c.c:4: rep/c -> rep/d: uses d_count, defined in rep/d.c',
            '  rep/d.c:6: rep/d -> rep/c: uses c_ops, defined in rep/c.c',
        ])

    def test_not_transitive(self):
        # top -> mid -> bottom does not allow top -> bottom, even through mid.h's include
        self.expect('not_transitive', 1, [
            'top/top.c:5: top -> bottom is not an arrow of the layers (row top): '
            'calls bottom_get(), defined in bottom/bottom.c',
        ])

    def test_unknown_folder(self):
        # a folder without a row is reported once; what uses it is not allowed to
        self.expect('unknown_folder', 1, [
            'extra/extra.c: folder extra has no row in layers.txt (place it in the layers)',
            'tool/tool.c:1: tool -> extra is not an arrow of the layers (row tool): '
            '#include "extra.h" (and 1 more in this file)',
        ])

    def test_comments_and_strings_ignored(self):
        # #include and calls in comments, strings and char literals; a prototype; members
        self.expect('ignored_text', 0, [])

    def test_forbidden_word(self):
        # in a string: found; in a comment: not
        self.expect('forbidden_word', 1, ['lib/opener.c:6: mentions fakedev (forbidden in lib)'])

    def test_graph(self):
        self.expect('clean', 0, [
            'app -> core   (2 uses, 1 files)',
            'core -> base   (4 uses, 2 files)',
            'tests/t -> base   (2 uses, 1 files)',
            'tests/t -> core   (2 uses, 1 files)',
        ], '--graph')

    def test_docs_agree(self):
        self.expect('clean', 0, [], '--docs', 'docs.md')

    def test_docs_disagree(self):
        self.expect('clean', 1, [
            'docs_bad.md: no row for app (layers.txt:4 has one)',
            'docs_bad.md:6: core may use app base, but layers.txt:3 says base',
            'docs_bad.md:8: row tools is not in layers.txt',
        ], '--docs', 'docs_bad.md')

    def test_bad_table(self):
        with tempfile.NamedTemporaryFile('w', suffix='.txt', delete=False) as f:
            f.write('lib ->\nlib -> other\nwhat is this\n')
        try:
            rc, out, err = run('clean', layers=f.name)
        finally:
            os.unlink(f.name)
        self.assertEqual(rc, 2)
        self.assertEqual(out, [])
        self.assertIn(':2: second row for lib', err)
        self.assertIn(':3: not a rule: what is this', err)


if __name__ == '__main__':
    unittest.main()
