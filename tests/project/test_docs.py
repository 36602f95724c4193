"""The documentation: README.md and docs/*.md.

- every relative link points to an existing file inside the repository (and, with a
  ``#`` anchor, to an existing heading), and no link goes to ``../shared``;
- the README stays a short tour whose first code block holds exactly the two set-up
  commands;
- every ``tools/`` and ``benchmarks/`` script the pages name exists, and every option a
  documented command line gives is one the script defines;
- the severity tables of docs/corruptions.md equal what docs/gen_corruption_table.py
  builds from the corruption registry.
"""
import importlib.util
import os.path as osp
import re
from glob import glob
from typing import Dict, Iterator, List, Set, Tuple

import pytest

from helpers import PROJECT_ROOT

README = osp.join(PROJECT_ROOT, 'README.md')
DOCS = osp.join(PROJECT_ROOT, 'docs')
PAGES = [README] + sorted(glob(osp.join(DOCS, '*.md')))
PAGE_IDS = [osp.relpath(p, PROJECT_ROOT) for p in PAGES]

FENCE = re.compile(r'^(```|~~~)')
# [text](target) and ![alt](target); the target ends at whitespace or ')'
LINK = re.compile(r'!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)')
SCRIPT = re.compile(r'(?<![\w/>.<-])((?:tools|benchmarks|tests)/[\w./-]+\.(?:py|sh))\b')
OPTION = re.compile(r'(?<![\w-])(--[a-z][\w-]*)')


def _read(path: str) -> str:
    with open(path, encoding='utf-8') as handle:
        return handle.read()


def _split(text: str) -> Tuple[List[str], List[str]]:
    """(lines outside code fences, fenced code blocks as strings)."""
    prose, blocks, block = [], [], None
    for line in text.splitlines():
        if FENCE.match(line.strip()):
            if block is None:
                block = []
            else:
                blocks.append('\n'.join(block))
                block = None
            continue
        if block is None:
            prose.append(line)
        else:
            block.append(line)
    return prose, blocks


def _strip_inline_code(line: str) -> str:
    return re.sub(r'`[^`]*`', '', line)


def _links(path: str) -> Iterator[str]:
    prose, _ = _split(_read(path))
    for line in prose:
        for match in LINK.finditer(_strip_inline_code(line)):
            yield match.group(1)


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation removed (letters, digits,
    '_', '-' and spaces kept), spaces as '-'."""
    text = heading.strip().lower().replace('`', '')
    text = re.sub(r'[^\w\- ]', '', text)
    return text.replace(' ', '-')


def _anchors(path: str) -> Set[str]:
    prose, _ = _split(_read(path))
    anchors: Set[str] = set()
    counts: Dict[str, int] = {}
    for line in prose:
        match = re.match(r'^(#{1,6})\s+(.*?)\s*#*\s*$', line)
        if not match:
            continue
        slug = _slug(match.group(2))
        n = counts.get(slug, 0)
        counts[slug] = n + 1
        anchors.add(slug if n == 0 else f'{slug}-{n}')
    return anchors


def _is_external(target: str) -> bool:
    return re.match(r'^[a-z][a-z0-9+.-]*:', target) is not None  # http:, https:, mailto:


# ----------------------------------------------------------------------------- links
@pytest.mark.parametrize('page', PAGES, ids=PAGE_IDS)
def test_relative_links_resolve_inside_the_repository(page):
    problems = []
    for target in _links(page):
        if '../shared' in target:
            problems.append(f'{target}: links outside the repository (../shared)')
            continue
        if _is_external(target):
            continue
        file_part, _, anchor = target.partition('#')
        resolved = page if not file_part else osp.normpath(
            osp.join(osp.dirname(page), file_part))
        if osp.commonpath([resolved, PROJECT_ROOT]) != PROJECT_ROOT:
            problems.append(f'{target}: points outside the repository')
        elif not osp.exists(resolved):
            problems.append(f'{target}: no such file')
        elif anchor and resolved.endswith('.md') and anchor not in _anchors(resolved):
            problems.append(f'{target}: no heading with anchor #{anchor} in '
                            f'{osp.relpath(resolved, PROJECT_ROOT)}')
    assert not problems, '\n'.join(problems)


@pytest.mark.parametrize('page', PAGES, ids=PAGE_IDS)
def test_no_page_mentions_the_shared_folder(page):
    assert '../shared' not in _read(page)


def test_every_docs_page_is_linked_from_the_index():
    index = osp.join(DOCS, 'README.md')
    linked = {osp.normpath(osp.join(DOCS, t.partition('#')[0])) for t in _links(index)
              if not _is_external(t)}
    pages = {p for p in PAGES if osp.dirname(p) == DOCS and p != index}
    assert pages <= linked, f'not linked from docs/README.md: {sorted(pages - linked)}'


# ----------------------------------------------------------------------------- README
def test_readme_is_a_short_tour():
    lines = _read(README).splitlines()
    assert 150 <= len(lines) <= 260, f'README.md has {len(lines)} lines (150-260 expected)'


def test_readme_first_code_block_holds_exactly_the_two_setup_commands():
    _, blocks = _split(_read(README))
    assert blocks, 'README.md has no code block'
    commands = [line.split('#', 1)[0].strip() for line in blocks[0].splitlines()]
    assert [c for c in commands if c] == ['make demo', 'make test']


# ----------------------------------------------------------------------------- commands
def _code_texts(path: str) -> List[str]:
    """Fenced blocks (continuation lines joined) and inline code spans."""
    prose, blocks = _split(_read(path))
    texts = [block.replace('\\\n', ' ') for block in blocks]
    # inline code spans may run over a line break
    texts += [span.replace('\n', ' ') for span in re.findall(r'`([^`]+)`', '\n'.join(prose))]
    return texts


def _documented_commands(path: str) -> Iterator[Tuple[str, List[str]]]:
    """(script, options) of every documented ``python tools/...`` or ``python
    benchmarks/...`` command line."""
    for text in _code_texts(path):
        for line in text.splitlines():
            line = re.split(r'\s#\s', line)[0]
            match = re.search(r'python\s+((?:tools|benchmarks)/[\w./-]+\.py)(.*)', line)
            if match:
                yield match.group(1), OPTION.findall(match.group(2))


@pytest.mark.parametrize('page', PAGES, ids=PAGE_IDS)
def test_commands_use_the_installed_environment(page):
    """A bare ``python tools/...`` outside the environment fails (no mmengine): every
    documented command of a tool or benchmark runs ``.venv/bin/python``."""
    for text in _code_texts(page):
        for line in text.splitlines():
            for match in re.finditer(r'(\S*)python\s+(?:tools|benchmarks)/', line):
                assert match.group(1).endswith('.venv/bin/'), (page, line)


@pytest.mark.parametrize('page', PAGES, ids=PAGE_IDS)
def test_named_scripts_exist(page):
    names = set(SCRIPT.findall(_read(page)))
    missing = sorted(n for n in names if not osp.isfile(osp.join(PROJECT_ROOT, n)))
    assert not missing, f'{osp.relpath(page, PROJECT_ROOT)} names missing scripts: {missing}'


def _script_options(path: str) -> Set[str]:
    """The option strings a script defines: those of its ``build_parser()`` when it has
    one (flags made from ``RobustnessOptions`` included), else the literals of its
    source."""
    source = _read(path)
    if 'def build_parser(' in source:
        spec = importlib.util.spec_from_file_location(
            'script_' + re.sub(r'\W', '_', osp.relpath(path, PROJECT_ROOT)), path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return {o for action in module.build_parser()._actions for o in action.option_strings}
    return set(re.findall(r"""['"](--[a-z][\w-]*)['"]""", source))


@pytest.mark.parametrize('page', PAGES, ids=PAGE_IDS)
def test_documented_options_exist(page):
    problems = []
    for script, options in _documented_commands(page):
        path = osp.join(PROJECT_ROOT, script)
        if not osp.isfile(path):
            continue  # reported by test_named_scripts_exist
        defined = _script_options(path)
        for option in options:
            if option not in defined:
                problems.append(f'{script} has no option {option}')
    assert not problems, '\n'.join(sorted(set(problems)))


def test_loop_options_table_lists_every_option():
    """The options table of docs/robustness_loops.md has one row per field of
    ``RobustnessOptions`` (and ``fp16``, the loop's own), in the fields' order."""
    from reobench_mm.robustness.options import OPTION_NAMES
    text = _read(osp.join(DOCS, 'robustness_loops.md'))
    section = text.split('### Options', 1)[1].split('\n### ', 1)[0]
    rows = re.findall(r'^\| `(\w+)` \|', section, flags=re.M)
    assert rows == list(OPTION_NAMES) + ['fp16']


# ----------------------------------------------------------------------------- tables
def _table_generator():
    spec = importlib.util.spec_from_file_location(
        'gen_corruption_table', osp.join(DOCS, 'gen_corruption_table.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_severity_tables_match_the_registry():
    gen = _table_generator()
    documented = gen.current_block(_read(gen.PAGE))
    assert documented == gen.corruption_tables(), (
        'the severity tables of docs/corruptions.md differ from the corruption registry; '
        'run: python docs/gen_corruption_table.py --write')


def test_severity_tables_cover_every_corruption():
    """The generator's rows are the registry's, value by value."""
    from reobench_corruptions import PROTOCOLS, get_corruption, list_corruptions
    gen = _table_generator()
    for protocol in PROTOCOLS:
        rows = gen.protocol_table(protocol)[2:]
        names = list_corruptions(protocol)
        assert len(rows) == len(names) and names
        for name, row in zip(names, rows):
            cells = [c.strip() for c in row.strip('|').split('|')]
            spec = get_corruption(name, protocol)
            assert cells[0] == f'`{name}`' and cells[1] == spec.category
            assert cells[3:8] == [gen.format_value(v) for v in spec.severities]
