"""Direct (plain numpy / Python loop) references of the binned calibration errors, shared
by the calibration tests: MCE, the adaptive ECE over whole fine bins with its error
bound, and the exact adaptive ECE that sorts every prediction."""
import math

import numpy as np


def right_closed_bins(values, edges):
    """Bin b holds edges[b] < v <= edges[b + 1]; 0 in the first bin."""
    return np.clip(np.digitize(values, edges, right=True) - 1, 0, len(edges) - 2)


def fine_bins(conf, fine_count):
    """The fine histogram's bin of each confidence: right-closed equal-width bins and
    one more bin (index ``fine_count``) for confidence exactly 1.0."""
    fine = right_closed_bins(conf, np.linspace(0, 1, fine_count + 1))
    return np.where(np.asarray(conf) == 1.0, fine_count, fine)


def reference_mce(conf, correct, num_bins=15):
    """max over the non-empty equal-width bins of |accuracy - mean confidence|."""
    conf, correct = np.asarray(conf, float), np.asarray(correct, float)
    if conf.size == 0:
        return math.nan
    bins = right_closed_bins(conf, np.linspace(0, 1, num_bins + 1))
    gaps = [abs(correct[bins == b].mean() - conf[bins == b].mean())
            for b in range(num_bins) if np.any(bins == b)]
    return max(gaps)


def exact_adaptive_ece(conf, correct, num_bins=15, rng=None):
    """Sort by increasing confidence (ties in input order, or in a random order drawn
    from ``rng``), split with numpy.array_split into ``num_bins`` groups and sum
    |sum conf - sum correct| / n over the groups."""
    conf, correct = np.asarray(conf, float), np.asarray(correct, float)
    if rng is None:
        order = np.argsort(conf, kind='stable')
    else:
        shuffled = rng.permutation(len(conf))
        order = shuffled[np.argsort(conf[shuffled], kind='stable')]
    total = 0.0
    for group in np.array_split(order, num_bins):
        total += abs(conf[group].sum() - correct[group].sum())
    return total / len(conf)


def whole_bin_adaptive_ece(conf, correct, fine_count, num_bins=15):
    """The adaptive ECE over equal-mass groups made of whole fine bins, and its bound,
    by plain loops: each inner array_split cut moves to the nearer edge of the fine bin
    that holds it (the lower edge on a tie).

    Returns (aECE, bound, group counts)."""
    conf, correct = np.asarray(conf, float), np.asarray(correct, float)
    n = len(conf)
    fine = fine_bins(conf, fine_count)
    # non-empty fine bins by increasing confidence: (count, conf, correct, lo, hi)
    present, member = np.unique(fine, return_inverse=True)
    sums = [np.bincount(member, weights=w) for w in (np.ones(n), conf, correct)]
    bins = []
    for f, count, conf_sum, right in zip(present.tolist(), *sums):
        lo, hi = (1.0, 1.0) if f == fine_count else (f / fine_count, (f + 1) / fine_count)
        bins.append((int(count), conf_sum, right, lo, hi))
    edges = [0]
    for b in bins:
        edges.append(edges[-1] + b[0])
    size, extra = divmod(n, num_bins)
    cuts, deltas = [0], [0.0]
    for j in range(1, num_bins):
        target = j * size + min(j, extra)
        if target in edges:
            cuts.append(target)
            deltas.append(0.0)
            continue
        g = max(i for i in range(len(bins)) if edges[i] < target)
        low, high = edges[g], edges[g + 1]
        cut = low if target - low <= high - target else high
        cuts.append(cut)
        moved = abs(target - cut)
        count, _, right, lo, hi = bins[g]
        wrong = count - right
        deltas.append(max(min(moved, wrong) * hi, min(moved, right) * (1 - lo)))
    cuts.append(n)
    deltas.append(0.0)
    total, group_counts, signs = 0.0, [], []
    for j, (start, stop) in enumerate(zip(cuts[:-1], cuts[1:])):
        members = [b for b, left in zip(bins, edges[:-1]) if start <= left < stop]
        group_counts.append(sum(b[0] for b in members))
        gap = sum(b[1] for b in members) - sum(b[2] for b in members)
        total += abs(gap)
        # the sign of the exact group's gap is certain when the cuts cannot flip it
        certain = gap != 0 and abs(gap) >= deltas[j] + deltas[j + 1]
        signs.append((1 if gap > 0 else -1) if certain else 0)
    # a cut between two groups of one certain sign cannot change the sum
    bound = sum(deltas[j] for j in range(1, num_bins)
                if not (signs[j - 1] == signs[j] != 0))
    return total / n, 2 * bound / n, group_counts
