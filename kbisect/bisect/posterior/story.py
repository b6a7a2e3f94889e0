"""The whole range as a story: the tps along good..bad as a few level changes on the
commit graph, not one step.

One culprit is the common case, not an assumption. A hypothesis h is a set of up to
three changes (KMAX), each in one class of candidates (posterior.py: commits every tested
revision treats alike); a revision's level is the good level plus the effect of every
change among its ancestors-or-self. So a regression at c10 that c15 fixes, with the real
culprit at c19, is the hypothesis {c10: -15%, c15: +15%, c19: -15%}, and two culprits of
-15% each are {c8, c19}. The model (each change may change the noise too), its priors
and every hypothesis's evidence: stats/changes.py, stats/hypotheses.py (RangeModel is a
Hypotheses). Here: the samples as the model sees them (time, load, the pool's machines
as regressors), and what the hypotheses' posterior says about the range.

What the story says (Story): the changes whose class holds a change with P >= 0.5, each
with its probability, its ratio (tps after / before, 95% interval) and the ratio of its
noise; P(one change); and the kind:

- single: one change, and one change is the more probable story;
- several: two or more changes;
- contradicted: the samples do not support one step (P(one change) < 0.5), but the other
  changes are not located yet;
- undecided: no change holds 0.5.

`settled(confidence)`: every named change holds the confidence and is one commit (or a
group no test can split). The search (search.py) goes on until the story is settled, and
checks a settled single step where it has not looked (`probe`): a long stretch of the
range no test has split, where a fix and a second regression could hide.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from kbisect.bisect.posterior import choice
from kbisect.bisect.posterior.graph import Graph
from kbisect.bisect.posterior.likelihood import Model, loaded, machine_columns
from kbisect.stats import mixture
from kbisect.stats.changes import Design, refit
from kbisect.stats.hypotheses import Hypotheses, hypotheses
from kbisect.stats.mixture import Array
from kbisect.stats.split import regressor_value

MATTERS = 1 / 3  # a change matters from this share of the endpoints' difference on
LEAST = math.log(1 / 0.98)  # and from 2% at least
NAMED = 0.5  # a class is named as a change when it holds one with at least this
ALONE = 0.8  # P(one change) a single step's story needs to be confirmed (exit 0)
WORTH = 0.02  # nats per boot: a story test below this is not worth its boot
LIVE = 1e-3  # hypotheses lighter than this are left out of the choice of revision
PROBE_BOOTS = 8  # samples of one probe, at most


@dataclass(frozen=True)
class Change:
    """One level change: the commits no test has told apart, where it is."""

    members: tuple[str, ...]  # graph order
    p: float  # P(a change among the members)
    ratio: float  # tps after / before
    low: float  # 95% interval of the ratio
    high: float
    noise: float  # sd after / sd before
    count: int = 1  # changes in this group in the most probable hypothesis

    @property
    def commit(self) -> str:
        """The group's newest member: the one a test of the group is made on."""
        return self.members[-1]

    def as_dict(self) -> dict[str, Any]:
        return {"commit": self.commit, **asdict(self), "members": list(self.members)}


@dataclass(frozen=True)
class Story:
    kind: str  # single | several | contradicted | undecided
    changes: tuple[Change, ...]
    p_single: float  # P(exactly one change)
    p_best: float  # P of the most probable hypothesis
    outlier: float  # the fitted outlier weight
    notes: tuple[str, ...] = ()
    against: tuple[str, ...] = ()  # a single step's doubters (search.py _note_doubts)
    unclear: tuple[str, ...] = ()

    def settled(self, confidence: float) -> bool:
        """Every named change holds `confidence`, and the story is several, or single
        with one change holding it too."""
        return self.kind in ("single", "several") and all(c.p >= confidence for c in self.changes)

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "p_single": self.p_single,
            "p_best": self.p_best,
            "outlier": self.outlier,
            "steps": [c.as_dict() for c in self.changes],
            "notes": list(self.notes),
            **{k: list(v) for k, v in (("against", self.against), ("unclear", self.unclear)) if v},
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Story:
        """A story as `as_dict` wrote it (state.json's "story")."""
        keys = ("p", "ratio", "low", "high", "noise", "count")
        changes = tuple(Change(tuple(c["members"]), *(c[k] for k in keys)) for c in d["steps"])
        lists = {k: tuple(d.get(k, ())) for k in ("notes", "against", "unclear")}
        return cls(d["kind"], changes, d["p_single"], d["p_best"], d["outlier"], **lists)


Row = tuple[str, float, float, float] | tuple[str, float, float, float, str]
# a sample as the story sees it: (commit, tps, t, load[, the pool's machine])


@dataclass(frozen=True)
class Data(Design):
    """The samples as the model sees them (stats/changes.py Design), with what the regressors are
    ("t", "load", a machine), the value each is centred on, each sample's revision in the
    graph and the smallest change that matters."""

    names: tuple[str, ...]  # "t", "load": what the regressors are
    centres: tuple[float, ...]  # the value each regressor is centred on
    sites: tuple[int | None, ...]  # each sample's revision in the graph (None: a good one)
    least: float  # the smallest change that matters (log scale)


def data(
    graph: Graph,
    classes: Sequence[tuple[int, frozenset[int]]],
    samples: Sequence[Row],
    model: Model,
) -> Data:
    """samples: (commit, tps, t, load[, machine])."""
    x = np.log(np.array([s[1] for s in samples], dtype=float))
    z = np.zeros((len(samples), len(classes)))
    for j, s in enumerate(samples):
        i = graph.index.get(s[0])
        if i is None:
            continue
        for c, (_, bad) in enumerate(classes):
            if i in bad:
                z[j, c] = 1.0
    cols, precision, names, centres = [], [], [], []
    if model.trend:
        t = np.array([s[2] for s in samples], dtype=float)
        span = float(t.max() - t.min())
        names.append("t")
        centres.append(float(t.mean()))
        cols.append(t - t.mean())
        precision.append((span / model.drift_sd) ** 2 if span > 0 else 1e12)
    load = [s[3] for s in samples]
    if loaded(model, load):
        arr = np.array(load, dtype=float)
        names.append("load")
        centres.append(float(arr.mean()))
        cols.append(arr - arr.mean())
        precision.append(1.0 / model.load_sd**2)
    machine = [str(s[4]) if len(s) > 4 else "" for s in samples]
    for name, values in machine_columns(model, machine):
        arr = np.array(values)
        names.append(name)
        centres.append(float(arr.mean()))
        cols.append(arr - arr.mean())
        precision.append(1.0 / model.machine_sd**2)
    reg = np.stack(cols, axis=1) if cols else np.zeros((len(samples), 0))
    sites = tuple(graph.index.get(s[0]) for s in samples)
    goods = [v for v, i in zip(x, sites, strict=True) if i is None]
    bads = [v for v, i in zip(x, sites, strict=True) if i == graph.n - 1]
    ends = abs(float(np.median(goods)) - float(np.median(bads))) if goods and bads else 0.0
    least = max(MATTERS * ends, LEAST)
    return Data(x, z, reg, tuple(precision), tuple(names), tuple(centres), sites, least)


@dataclass(kw_only=True)
class RangeModel(Hypotheses):
    """The story's model at the samples so far: every hypothesis fitted and weighed."""

    graph: Graph
    classes: Sequence[tuple[int, frozenset[int]]]
    d: Data

    @classmethod
    def build(
        cls,
        graph: Graph,
        classes: Sequence[tuple[int, frozenset[int]]],
        samples: Sequence[Row],
        model: Model,
    ) -> RangeModel:
        m = cls(graph=graph, classes=classes, d=data(graph, classes, samples, model))
        sizes = [mask.bit_count() for mask, _ in classes]
        hyps = hypotheses(sizes, graph.n)
        m.weigh(m.d, m.d.least, hyps)  # the outlier part fitted under the most probable one
        k, row = m.best()
        refit(m.d, m.fits[k], row, m.mix)
        m.weigh(m.d, m.d.least, hyps)
        return m

    # --- what it says -----------------------------------------------------------------

    def story(self) -> Story:
        marg = self.marginals(len(self.classes))
        named = [c for c, p in enumerate(marg) if p >= NAMED]
        order = sorted(named, key=lambda c: self._newest(c))
        changes = []
        for c in order:
            d, sd, noise, count = self.effect(c)
            members = tuple(self.graph.commits[i] for i in self.graph.members(self.classes[c][0]))
            changes.append(
                Change(
                    members,
                    marg[c],
                    math.exp(d),
                    math.exp(d - 1.96 * sd),
                    math.exp(d + 1.96 * sd),
                    math.exp(noise),
                    count,
                )
            )
        single = self.p_single()
        k, row = self.best()
        p_best = float(math.exp(self.log_post[k][row]))
        if not changes:
            kind = "undecided"
        elif len(changes) == 1 and changes[0].count == 1:
            kind = "single" if single >= 0.5 else "contradicted"
        else:
            kind = "several"
        return Story(kind, tuple(changes), single, p_best, self.mix.w, tuple(self._notes()))

    def _newest(self, c: int) -> int:
        return max(self.graph.members(self.classes[c][0]))

    def _notes(self) -> list[str]:
        """A revision that is clearly at the bad level and an ancestor of one clearly at
        the good level: one step cannot explain both. Clearly: its samples' mean is
        nearer one endpoint's level, by more than two standard errors of the noise."""
        g = self.graph
        by_site: dict[int | None, list[float]] = {}
        for j, i in enumerate(self.d.sites):
            by_site.setdefault(i, []).append(float(self.d.x[j]))
        goods, bads = by_site.get(None), by_site.get(g.n - 1)
        if not goods or not bads:
            return []
        k, row = self.best()
        sd = math.exp(float(self.fits[k].s[row, 0]))
        good, bad = float(np.median(goods)), float(np.median(bads))
        mid = 0.5 * (good + bad)

        def looks(i: int) -> str | None:
            v = by_site[i]
            off = (math.fsum(v) / len(v) - mid) * (1 if good > bad else -1)
            if abs(off) < 2 * sd / math.sqrt(len(v)):
                return None
            return "good" if off > 0 else "bad"

        seen = [i for i in by_site if i is not None and i != g.n - 1]
        out = []
        for a, b in itertools.permutations(seen, 2):
            if g.anc[b] >> a & 1 and looks(a) == "bad" and looks(b) == "good":
                out.append(
                    f"{g.commits[a][:12]} is at the bad level and an ancestor of "
                    f"{g.commits[b][:12]}, which is at the good level: one step cannot "
                    "explain both"
                )
        return out[:3]

    # --- where to look next ------------------------------------------------------------

    def predictive(self, commit: str, t: float, load: float) -> list[tuple[float, float, float]]:
        """The next sample of commit as a mixture of normals over the live hypotheses and
        over which of their changes are among its ancestors: (weight, mean, sd)."""
        g = self.graph
        i = g.index.get(commit)
        anc = g.anc[i] if i is not None else 0
        frac = [(anc & mask).bit_count() / mask.bit_count() for mask, _ in self.classes]
        at = self._regressor_row(t, load)
        return self.predictive_parts(frac, at, LIVE)

    def _regressor_row(self, t: float, load: float) -> Array:
        """The regressors' values at (t, load), centred as the samples' are."""
        return np.array(
            [
                regressor_value(n, c, t, load, None) - c
                for n, c in zip(self.d.names, self.d.centres, strict=True)
            ]
        )

    def information(self, commit: str, t: float, load: float) -> float:
        """The expected information (nats) one sample of commit brings about the story."""
        parts = self.predictive(commit, t, load)
        total = math.fsum(w for w, _, _ in parts)
        if total <= 0:
            return 0.0
        parts = [(w / total, m, s) for w, m, s in parts]
        cond = math.fsum(w * 0.5 * math.log(2 * math.pi * math.e * s * s) for w, _, s in parts)
        return max(0.0, choice.entropy(parts) - cond)

    def halves(self) -> list[str]:
        """For every class with a live change, the member that splits it nearest half."""
        marg = self.marginals(len(self.classes))
        out = []
        for c, (mask, _) in enumerate(self.classes):
            if marg[c] < LIVE or mask.bit_count() < 2:
                continue
            out.append(self.graph.commits[middle(self.graph, mask, self.graph.members(mask))])
        return out


def middle(graph: Graph, mask: int, members: Sequence[int]) -> int:
    """The one of members (of the group `mask`) whose ancestors split the group nearest
    half: the test that tells the most about where in the group a change is."""
    size = mask.bit_count()
    return min(members, key=lambda i: (abs(2 * (graph.anc[i] & mask).bit_count() - size), i))


def stretch(
    graph: Graph,
    classes: Sequence[tuple[int, frozenset[int]]],
    change: Change,
    untestable: set[str],
) -> str | None:
    """Where one step has not been checked: the middle of the longest group of commits no
    test has split, if it is longer than the range allows. After the change (the group's
    commits are its descendants) a fix and a second regression can hide and make the
    answer wrong, so the limit is an eighth of the range (at least 2); before it, where
    they would only leave the story incomplete, a quarter (at least 3)."""
    g = graph
    at = g.index[change.commit]
    own = {g.index[c] for c in change.members}
    best: tuple[float, int] | None = None
    for mask, _ in classes:
        size = mask.bit_count()
        members = g.members(mask)
        if size < 2 or own & set(members):
            continue
        after = all(g.anc[i] >> at & 1 for i in members)
        limit = max(2, g.n // 8) if after else max(3, g.n // 4)
        if size > limit and (best is None or size / limit > best[0]):
            best = (size / limit, mask)
    if best is None:
        return None
    mask = best[1]
    testable = [i for i in g.members(mask) if g.commits[i] not in untestable]
    return g.commits[middle(g, mask, testable)] if testable else None


def level_test(
    points: Sequence[tuple[float, float, float]], sd: float, w: float, kappa: float
) -> float:
    """The log likelihood ratio of "at the bad level" against "at the good level" for a
    revision's samples, each point (tps, the good level, the bad level) with the levels on
    the log scale at that sample's time and load, each sample under the likelihood's own
    two-part mixture (weight w on a part kappa times as wide): positive says bad, negative
    good. A clean boot tells the levels apart as the core part does; a boot far from both
    (half speed) tells almost nothing, so one outlier never makes a revision clearly at a
    level."""
    total = 0.0
    for v, good, bad in points:
        x = math.log(v)
        total += mixture.log_density(x - bad, sd, w, kappa) - mixture.log_density(
            x - good, sd, w, kappa
        )
    return total
