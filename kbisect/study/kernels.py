"""A study's kernels: revisions, tags or prebuilt images, or a tag pattern resolved in
version order (source/rc.py's ordering); each one built once, before any boot.

A revision may carry patches, ` + ` between it and each patch file (a git revision never
holds a space): `debian/7.2.13-1 + kernel-patches/7.2/revert.patch` is that release with
the patch applied (source/patches.py), a kernel of its own beside the release itself."""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kbisect.core import arch as arch_mod
from kbisect.core import progress
from kbisect.core.exceptions import UserError
from kbisect.kernel import build
from kbisect.source import git, patches, rc, tree
from kbisect.study.spec import KernelSpec
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


def _revision(repo: Path, item: str) -> Ref:
    """A revision, or a revision + patch files: applied (checked) now, before any build;
    the kernel is the patched commit."""
    rev, *files = (part.strip() for part in item.split(PATCHED))
    commit = git.rev_parse(repo, rev)
    if not files:
        return Ref(item, item, commit, None, None, git.subject(repo, commit))
    given = patches.read_all(files)
    made = patches.apply(repo, commit, given)
    described = patches.describe(repo, commit, given, made)
    return Ref(item, made, made, None, None, git.subject(repo, commit), described)


def resolve(spec: KernelSpec) -> tuple[Path | None, list[Ref]]:
    """(the tree, if any revision needs one; the kernels in the study's order)."""
    needs_tree = spec.pattern is not None or any(not Path(i).exists() for i in spec.items)
    repo = tree.resolve(spec.tree) if needs_tree else None
    items = pattern_tags(repo, spec.pattern) if repo and spec.pattern else list(spec.items)
    refs = []
    for item in items:
        if Path(item).exists():
            refs.append(_image(item))
            continue
        assert repo is not None
        refs.append(_revision(repo, item))
    seen: dict[str, str] = {}
    for ref in refs:
        key = ref.commit if ref.rev else ref.image
        if key in seen:
            raise KernelListError(f"kernels {seen[key]} and {ref.label} are the same kernel")
        seen[str(key)] = ref.label
    return repo, refs


def check_arches(refs: Sequence[Ref], arch: str) -> None:
    """Every kernel must run on the target's arch: one line naming the odd ones out."""
    by_arch: dict[str, list[str]] = {}
    for ref in refs:
        by_arch.setdefault(ref.arch or arch, []).append(ref.short)
    if len(by_arch) > 1 or arch not in by_arch:
        listed = "; ".join(f"{a}: {', '.join(names)}" for a, names in sorted(by_arch.items()))
        raise KernelListError(f"kernels of mixed arches ({listed}); the target runs {arch}")


def build_all(refs: Sequence[Ref], repo: Path | None, spec: KernelSpec, arch: str) -> list[Kernel]:
    """Each kernel once: revisions built (cached per commit), images found."""
    out = []
    for i, ref in enumerate(refs, 1):
        if ref.image is not None:
            out.append(Kernel.find(ref.image))
            continue
        assert repo is not None and ref.commit is not None
        progress.step(f"kernel {i}/{len(refs)}: building {ref.label} ({ref.commit[:12]})")
        req = build.Request(
            tree=repo,
            rev=ref.commit,
            arch=arch_mod.get(arch),
            configs=spec.configs,
            base=spec.base_config,
        )
        result = build.build(req)
        out.append(Kernel(result.image, result.manifest))
    return out
