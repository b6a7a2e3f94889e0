"""A study's kernels: revisions, tags or prebuilt images, or a tag pattern resolved in
version order (source/rc.py's ordering), or a list of revisions each in a tree of its own
(`[[kernels.list]]`: real releases imported from tarballs, such as debian:6.1 and
debian:7.2, which share no history); each one built once, before any boot.

study.json names each revision's tree (None: the embedded default; a release name such
as debian:7.2 as given; a path made absolute) and the version its Makefile says, which
the report turns into the release tags to bisect between in a git tree that has both.

A revision may carry patches, ` + ` between it and each patch file (a git revision never
holds a space): `debian/7.2.13-1 + kernel-patches/7.2/revert.patch` is that release with
the patch applied (source/patches.py), a kernel of its own beside the release itself.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from kbisect.core import arch as arch_mod
from kbisect.core import progress
from kbisect.core.exceptions import CommandFailed, UserError
from kbisect.kernel import build
from kbisect.source import git, patches, rc, tree
from kbisect.study import store
from kbisect.study.spec import KernelSpec, Listed, names_tree
from kbisect.targets.base import Kernel


class KernelListError(UserError):
    """An empty pattern, a kernel named twice, or kernels of different arches."""


@dataclass(frozen=True)
class Ref:
    """One kernel of a study, as stored in study.json."""

    label: str  # as given: a tag, a revision, an image's path
    rev: str | None = None  # a revision to build (what the bisect line names)
    commit: str | None = None
    image: str | None = None  # a prebuilt image
    arch: str | None = None  # the image's (from its build manifest), if known
    subject: str | None = None
    patches: list[dict[str, Any]] | None = None  # file, subject, sha256 of each, if any
    tree: str | None = None  # a revision's tree (tree_name's form; None: the default)
    version: str | None = None  # a revision's Makefile version, e.g. "6.1.158"

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if self.patches is None:  # a study without patches stores what it always did
            del out["patches"]
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Ref:
        return cls(**{k: d.get(k) for k in cls.__dataclass_fields__})  # type: ignore[arg-type]

    @property
    def short(self) -> str:
        """A name for tables: the tag or revision, else the image's folder or file."""
        if self.rev is not None:
            return self.label
        path = Path(self.label)
        return path.parent.name if path.name in ("bzImage", "Image") else path.name


def pattern_tags(repo: Path, pattern: str) -> list[str]:
    """The version tags matching `pattern`, oldest first; KernelListError when none."""
    tags = rc.ordered([t for t in rc.list_tags(repo) if fnmatch.fnmatchcase(t, pattern)])
    if not tags:
        raise KernelListError(f"--kernels {pattern!r}: no version tag matches in {repo}")
    return tags


def _image(item: str) -> Ref:
    k = Kernel.find(item)
    m = k.manifest or {}
    return Ref(item, None, m.get("commit"), str(k.image), k.arch, m.get("subject"))


PATCHED = " + "


MAKEFILE_VERSION = re.compile(r"^(VERSION|PATCHLEVEL|SUBLEVEL|EXTRAVERSION)\s*=[ \t]*(\S*)", re.M)


def tree_name(given: str | None) -> str | None:
    """How study.json names a tree: None for the embedded default, a release name such
    as debian:7.2 as given, a path made absolute."""
    if given is None or given == "default":
        return None
    if names_tree(given):
        return given
    return str(Path(given).expanduser().resolve())


def makefile_version(text: str) -> str | None:
    """The version a kernel Makefile's head names, as 6.1.158 or 7.3.0-rc7; None if it
    names none (each variable's first assignment counts)."""
    found = dict(reversed(MAKEFILE_VERSION.findall(text)))
    if not (found.get("VERSION") and found.get("PATCHLEVEL")):
        return None
    sub = found.get("SUBLEVEL") or "0"
    return f"{found['VERSION']}.{found['PATCHLEVEL']}.{sub}{found.get('EXTRAVERSION', '')}"


def _version(repo: Path, commit: str) -> str | None:
    try:
        return makefile_version(git.git(repo, "show", f"{commit}:Makefile"))
    except CommandFailed:
        return None


def _head(repo: Path) -> str:
    """The tree's HEAD, named by its first tag if it has one (an import's tag)."""
    tags = git.git(repo, "tag", "--points-at", "HEAD").split()
    return sorted(tags)[0] if tags else "HEAD"


@dataclass(frozen=True)
class _Want:
    label: str
    item: str  # a revision, or an image's path
    tree: str | None  # tree_name's form
    image: bool = False


def _wants(spec: KernelSpec, repos: dict[str | None, Path]) -> list[_Want]:
    default = tree_name(spec.tree)
    if spec.listed:
        return [_listed(k, default, repos) for k in spec.listed]
    if spec.pattern is not None:
        tags = pattern_tags(trees([default], repos)[default], spec.pattern)
        return [_Want(t, t, default) for t in tags]
    return [_Want(i, i, default, Path(i).exists()) for i in spec.items]


def _listed(k: Listed, default: str | None, repos: dict[str | None, Path]) -> _Want:
    name = tree_name(k.tree) if k.tree is not None else default
    rev = k.rev or _head(trees([name], repos)[name])
    return _Want(k.label or k.rev or _short(str(k.tree)), rev, name)


def _short(given: str) -> str:
    """A listed kernel's default label without a rev: its tree's name, or folder's."""
    return given if names_tree(given) else Path(given).name


def trees(names: Sequence[str | None], repos: dict[str | None, Path]) -> dict[str | None, Path]:
    """Each named tree's repository (tree.resolve), resolved once into `repos`."""
    for name in names:
        if name not in repos:
            repos[name] = tree.resolve(name)
    return repos


def resolve(spec: KernelSpec) -> tuple[dict[str | None, Path], list[Ref]]:
    """(each tree a revision needs, by tree_name; the kernels in the study's order)."""
    repos: dict[str | None, Path] = {}
    refs = []
    for want in _wants(spec, repos):
        if want.image:
            refs.append(_image(want.item))
            continue
        repo = trees([want.tree], repos)[want.tree]
        rev, *files = (part.strip() for part in want.item.split(PATCHED))
        commit = git.rev_parse(repo, rev)
        subject = git.subject(repo, commit)
        version = _version(repo, commit)
        if not files:
            refs.append(
                Ref(
                    want.label,
                    want.item,
                    commit,
                    None,
                    None,
                    subject,
                    tree=want.tree,
                    version=version,
                )
            )
            continue
        # applied (checked) now, before any build; the kernel is the patched commit
        given = patches.read_all(files)
        made = patches.apply(repo, commit, given)
        described = patches.describe(repo, commit, given, made)
        refs.append(
            Ref(
                want.label,
                made,
                made,
                None,
                None,
                subject,
                patches=described,
                tree=want.tree,
                version=version,
            )
        )
    _check_distinct(refs)
    return repos, refs


def _check_distinct(refs: Sequence[Ref]) -> None:
    seen: dict[str, str] = {}
    labels: set[str] = set()
    for ref in refs:
        key = str(ref.commit if ref.rev else ref.image)
        if key in seen:
            raise KernelListError(f"kernels {seen[key]} and {ref.label} are the same kernel")
        if ref.label in labels:
            raise KernelListError(f"two kernels are named {ref.label}: give each a label")
        seen[key] = ref.label
        labels.add(ref.label)


def from_definition(d: Mapping[str, Any]) -> list[Ref]:
    """A stored study's kernels, each revision with its tree (store.kernel_tree)."""
    refs = [Ref.from_dict(k) for k in d["kernels"]]
    return [replace(r, tree=store.kernel_tree(d, i)) if r.rev else r for i, r in enumerate(refs)]


def check_arches(refs: Sequence[Ref], arch: str) -> None:
    """Every kernel must run on the target's arch: one line naming the odd ones out."""
    by_arch: dict[str, list[str]] = {}
    for ref in refs:
        by_arch.setdefault(ref.arch or arch, []).append(ref.short)
    if len(by_arch) > 1 or arch not in by_arch:
        listed = "; ".join(f"{a}: {', '.join(names)}" for a, names in sorted(by_arch.items()))
        raise KernelListError(f"kernels of mixed arches ({listed}); the target runs {arch}")


def build_all(
    refs: Sequence[Ref], repos: Mapping[str | None, Path], spec: KernelSpec, arch: str
) -> list[Kernel]:
    """Each kernel once: revisions built in their trees (cached per commit), images found."""
    out = []
    for i, ref in enumerate(refs, 1):
        if ref.image is not None:
            out.append(Kernel.find(ref.image))
            continue
        assert ref.commit is not None
        progress.step(f"kernel {i}/{len(refs)}: building {ref.label} ({ref.commit[:12]})")
        req = build.Request(
            tree=repos[ref.tree],
            rev=ref.commit,
            arch=arch_mod.get(arch),
            configs=spec.configs,
            base=spec.base_config,
        )
        result = build.build(req)
        out.append(Kernel(result.image, result.manifest))
    return out
