"""Layout checks for matplotlib figures: no two pieces of text may overlap.

:func:`text_overlaps` renders a figure with the Agg renderer and compares the window
extents of its titles, suptitle, axis labels, visible tick labels, legend texts and
titles, and other text (annotations, figure texts). :func:`checking_saved_figures` runs
that check on every figure saved while it is active, so that the package's plot
functions are checked exactly as they write their PNG files.
"""
from contextlib import contextmanager
from typing import Iterator, List, Tuple

from reobench_mm.analysis.plotting import agg_pyplot


def _tick_labels(axis, kind: str) -> List[Tuple[str, object]]:
    """``(description, Text)`` of the tick labels the axis draws: visible, non-empty,
    and at a tick inside the view interval (ticks outside it keep stale labels that
    are not drawn)."""
    if kind == 'major':
        axis.get_majorticklabels()  # brings the tick objects up to date
        ticks = axis.get_major_ticks()
    else:
        axis.get_minorticklabels()
        ticks = axis.get_minor_ticks()
    low, high = sorted(axis.get_view_interval())
    slack = 1e-9 * max(1.0, abs(high - low))
    found = []
    for tick in ticks:
        loc = tick.get_loc()
        if loc is None or not low - slack <= loc <= high + slack:
            continue
        for label in (tick.label1, tick.label2):
            if label.get_visible() and label.get_text().strip():
                found.append((f'{axis.axis_name} {kind} tick label', label))
    return found


def _legend_texts(legend, where: str) -> List[Tuple[str, object]]:
    if legend is None or not legend.get_visible():
        return []
    found = [(f'{where} legend entry', text) for text in legend.get_texts()]
    title = legend.get_title()
    if title.get_text().strip():
        found.append((f'{where} legend title', title))
    return found


def text_artists(fig) -> List[Tuple[str, object]]:
    """Every visible, non-empty text of ``fig`` as ``(description, Text)``."""
    found: List[Tuple[str, object]] = []
    for name in ('_suptitle', '_supxlabel', '_supylabel'):
        text = getattr(fig, name, None)
        if text is not None:
            found.append((name.strip('_'), text))
    found += [('figure text', text) for text in fig.texts]
    for index, legend in enumerate(fig.legends):
        found += _legend_texts(legend, f'figure legend {index}')
    for index, ax in enumerate(fig.axes):
        if not ax.get_visible():
            continue
        where = f'axes {index}'
        found += [(f'{where} title', ax.title), (f'{where} left title', ax._left_title),
                  (f'{where} right title', ax._right_title)]
        found += [(f'{where} {d}', t) for d, t in (('x label', ax.xaxis.label),
                                                   ('y label', ax.yaxis.label))]
        for axis in (ax.xaxis, ax.yaxis):
            if axis.get_visible():
                found += [(f'{where} {d}', t) for d, t in _tick_labels(axis, 'major')]
                found += [(f'{where} {d}', t) for d, t in _tick_labels(axis, 'minor')]
        found += _legend_texts(ax.get_legend(), where)
        found += [(f'{where} text', text) for text in ax.texts]
    unique, seen = [], set()
    for description, text in found:  # a suptitle is among fig.texts too
        if id(text) not in seen and text.get_visible() and text.get_text().strip():
            seen.add(id(text))
            unique.append((description, text))
    return unique


def text_overlaps(fig, tolerance: float = 0.5) -> List[str]:
    """Pairs of texts of ``fig`` whose rendered bounding boxes overlap by more than
    ``tolerance`` pixels in both directions, described as
    ``"'text a' (where) x 'text b' (where)"``."""
    fig.canvas.draw()  # runs the layout engine, updates ticks and legend positions
    renderer = fig.canvas.get_renderer()
    boxes = []
    for description, text in text_artists(fig):
        boxes.append((f'{text.get_text()!r} ({description})', text.get_window_extent(renderer)))
    problems = []
    for i, (name_a, a) in enumerate(boxes):
        for name_b, b in boxes[i + 1:]:
            width = min(a.x1, b.x1) - max(a.x0, b.x0)
            height = min(a.y1, b.y1) - max(a.y0, b.y0)
            if width > tolerance and height > tolerance:
                problems.append(f'{name_a} x {name_b}')
    return problems


def assert_no_text_overlap(fig, label: str = 'figure') -> None:
    """Fail with the list of overlapping texts of ``fig``, if any."""
    problems = text_overlaps(fig)
    assert not problems, f'{label}: overlapping text:\n  ' + '\n  '.join(problems)


@contextmanager
def checking_saved_figures() -> Iterator[List[str]]:
    """Check every matplotlib figure saved inside the block for overlapping text
    (before it is written); yields the list of descriptions of the figures checked
    (their suptitle or first axes title)."""
    agg_pyplot()
    from matplotlib.figure import Figure
    original = Figure.savefig
    checked: List[str] = []

    def savefig(fig, *args, **kwargs):
        titles = [t for d, t in text_artists(fig) if 'title' in d]
        label = titles[0].get_text() if titles else f'figure {len(checked)}'
        assert_no_text_overlap(fig, label)
        checked.append(label)
        return original(fig, *args, **kwargs)

    Figure.savefig = savefig
    try:
        yield checked
    finally:
        Figure.savefig = original
