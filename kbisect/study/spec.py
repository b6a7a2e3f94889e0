"""Study files (`harness/studies/NAME.toml`) and the command line, into one `Study`.

    name = "hugepages-sweep"
    description = "..."
    scenario = "simple-update-2vcpu"
    boots = 3                     # per kernel and cell
    budget_hours = 2.0            # refuse more without --yes
    set = ["guest.thp=never"]     # every cell
    [kernels]
    revs = ["v6.12-debian"]       # or pattern = "v6.*" (version order), or images = [...]
    # or kernels in trees of their own (tarball imports such as debian:7.2, other clones):
    [[kernels.list]]
    tree = "debian:6.1"           # default: [kernels] tree (--tree), else the embedded one
    rev = "debian/6.1.158-1"      # default: the tree's HEAD (named by its tag, if tagged)
    label = "6.1"                 # default: the rev, else the tree's name (a path: its folder)
    [[axes]]                      # a key axis: one override per value
    key = "pgbench.clients"
    values = [4, 16]
    needs.16 = { set = ["..."], append = "..." }   # what a value needs besides its key
    [[axes]]                      # a bundle axis: levels with no single key
    name = "pages"
    levels = [{ label = "1G", set = ["..."], append = "hugepagesz=1G hugepages=1" }]
    [[axes]]                      # PostgreSQL servers built from source (pgaxis.py)
    key = "postgres"
    values = ["debian:17", "debian:17+batch.mbox"]

On the command line, `--kernels`, `--axis` and `--scenario` replace the file's, `--set`
and `--append` add to it, `--boots`, `--budget` and the rest override it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kbisect.core import paths, reading
from kbisect.core.exceptions import UserError
from kbisect.study import axes as axes_mod
from kbisect.study import pgaxis
from kbisect.study.axes import Axis, Level

DEFAULT_BUDGET_H = 4.0
NAMED_TREE = re.compile(r"[a-z][a-z0-9-]*:[^/]+")  # debian:7.2


class StudyFileError(UserError):
    """A study file that is missing a field, has an unknown one or a wrong type."""


@dataclass(frozen=True)
class Listed:
    """One kernel of `[[kernels.list]]`: a revision in a tree of its own."""

    tree: str | None = None  # None: the study's tree
    rev: str | None = None  # None: the tree's HEAD
    label: str | None = None


@dataclass(frozen=True)
class KernelSpec:
    items: tuple[str, ...] = ()  # revisions, tags or image paths, in the order given
    pattern: str | None = None  # a tag glob, resolved in version order
    tree: str | None = None  # the study's tree: of `items`, `pattern`, a Listed without one
    configs: tuple[str, ...] = ()
    base_config: str = "tinyconfig"
    arch: str | None = None
    listed: tuple[Listed, ...] = ()  # `[[kernels.list]]`, in the order given


@dataclass(frozen=True)
class Study:
    name: str
    scenario: str
    kernels: KernelSpec
    axes: tuple[Axis, ...]
    description: str = ""
    sets: tuple[str, ...] = ()
    append: str = ""
    boots: int = 3
    budget_hours: float = DEFAULT_BUDGET_H
    baseline: str | None = None
    retries: int = 1
    seed: int | None = None
    min_effect: float = 0.02
    source: str = "the command line"


def studies_dir() -> Path:
    return paths.harness_dir() / "studies"


def names() -> list[str]:
    return sorted(p.stem for p in studies_dir().glob("*.toml"))


def path_of(name: str) -> Path:
    if paths.names_file(name):
        return Path(name)  # reading.toml says what is wrong with it
    path = studies_dir() / f"{name}.toml"
    if not path.exists():
        raise StudyFileError(f"no study {name!r} (shipped: {', '.join(names()) or 'none'})")
    return path


def _fields(src: str, raw: Any, prefix: str = "") -> reading.Fields:
    return reading.Fields(raw, src, prefix, StudyFileError)


def _listed(src: str, raw: Any) -> Listed:
    f = _fields(src, raw, "kernels.list.")
    listed = Listed(
        f.string("tree", None), f.string("rev", None), f.string("label", None, reading.label)
    )
    f.done()
    if listed.tree is None and listed.rev is None:
        raise StudyFileError(f"{src}: each [[kernels.list]] needs a tree, a rev or both")
    return listed


def _kernels(src: str, raw: Any) -> KernelSpec:
    f = _fields(src, raw, "kernels.")
    images = f.strings("images")
    for image in images:
        if not Path(image).expanduser().exists():
            f.fail("images", f"names no such image {image!r} (a kernel image or build dir)")
    items = f.strings("revs") + images
    pattern = f.string("pattern", None)
    listed = tuple(_listed(src, k) for k in f.items("list", []))
    spec = KernelSpec(
        items,
        pattern,
        f.string("tree", None),
        f.strings("configs"),
        f.string("base_config", "tinyconfig"),
        f.string("arch", None),
        listed,
    )
    f.done()
    if sum(map(bool, (items, pattern, listed))) != 1:
        raise StudyFileError(
            f"{src}: [kernels] needs revs/images, a pattern or a [[kernels.list]] (one of them)"
        )
    return spec


def _need(src: str, key: str, value: str, raw: Any) -> dict[str, Any]:
    f = _fields(src, raw, f"axes.{key}.needs.{value}.")
    need = {"set": f.strings("set", reading.line), "append": f.string("append", "", reading.line)}
    f.done()
    return need


def _key_axis(src: str, f: reading.Fields) -> Axis:
    key = f.string("key")
    axes_mod.check_key(key)
    needs = f.table("needs")
    values = f.items("values")
    if not values or not all(isinstance(v, str | int | float | bool) for v in values):
        f.fail("values", f"must be a non-empty list of values, got {reading.got(values)}")
    if not reading.finite(values):
        f.fail("values", f"must be finite numbers, got {reading.got(values)}")
    for value in values:
        if isinstance(value, str) and (problem := reading.line(value)):
            f.fail("values", f"{problem}, got {reading.got(value)}")
    unused = set(needs.data) - {axes_mod.text(v) for v in values}
    if unused:
        raise StudyFileError(f"{src}: axis {key}: needs for no value: {sorted(unused)}")
    own = {v: _need(src, key, v, raw) for v, raw in needs.data.items()}
    f.done()
    return axes_mod.make(
        key, [axes_mod.key_level(key, v, own.get(axes_mod.text(v))) for v in values]
    )


def _level(src: str, name: str, raw: Any) -> Level:
    f = _fields(src, raw, f"axes.{name}.levels.")
    level = Level(
        f.string("label", rule=reading.label),
        f.strings("set", reading.line),
        f.string("append", "", reading.line),
    )
    f.done()
    return level


def _pg_axis(src: str, f: reading.Fields) -> Axis:
    f.string("key")
    values = f.strings("values", reading.line)
    f.done()
    return pgaxis.axis(values, f"{src}: axis {pgaxis.AXIS}")


def axis_from_file(src: str, raw: Any) -> Axis:
    f = _fields(src, raw, "axes.")
    if f.data.get("key") == pgaxis.AXIS:
        return _pg_axis(src, f)
    if "key" in f.data:
        return _key_axis(src, f)
    if "name" not in f.data or "levels" not in f.data:
        raise StudyFileError(f"{src}: an axis needs key and values, or name and levels")
    name = f.string("name")
    if name == pgaxis.AXIS:
        f.fail("name", f'"{name}" names the PostgreSQL builds\' axis: give key = "{name}"')
    levels = [_level(src, name, lv) for lv in f.items("levels")]
    f.done()
    return axes_mod.make(name, levels)


def from_dict(data: dict[str, Any], src: str) -> Study:
    """A study from a study file's table; StudyFileError naming the field when a key is
    unknown, missing, of the wrong type, not finite or out of range."""
    f = _fields(src, data)
    given = {
        "boots": f.integer("boots", 3, low=1, high=1000),
        "retries": f.integer("retries", 1, low=0, high=100),
        "seed": f.integer("seed", None, low=0),
        "budget_hours": float(f.number("budget_hours", DEFAULT_BUDGET_H)),
        "min_effect": float(f.fraction("min_effect", 0.02)),
    }
    study = Study(
        name=f.string("name", rule=reading.name),
        scenario=f.string("scenario"),
        kernels=_kernels(src, f.value("kernels")),
        axes=tuple(axis_from_file(src, a) for a in f.items("axes", [])),
        description=f.string("description", ""),
        sets=f.strings("set", reading.line),
        append=f.string("append", "", reading.line),
        baseline=f.string("baseline", None),
        source=src,
        **given,
    )
    f.done()
    return study


def load(name: str) -> Study:
    path = path_of(name)
    study = from_dict(reading.toml(path, StudyFileError), path.name)
    if path.parent == studies_dir() and study.name != path.stem:
        raise StudyFileError(f"{path.name}: name must be {path.stem!r}, got {study.name!r}")
    return study


def names_tree(given: str) -> bool:
    """Is `given` a tree's name such as debian:7.2 (not a path, not a revision: a git
    revision with a colon names a file, never a commit)?"""
    return bool(NAMED_TREE.fullmatch(given)) and not Path(given).expanduser().exists()


def kernel_items(option: str) -> tuple[tuple[str, ...], str | None, tuple[Listed, ...]]:
    """`--kernels a,b,c` (revisions, tags, images), `--kernels 'v6.*'` (a tag pattern),
    or a list naming trees, `--kernels debian:6.1,debian:7.2,v6.12-debian` (each tree at
    its HEAD; the other items revisions in the study's tree)."""
    items = tuple(i.strip() for i in option.split(",") if i.strip())
    if not items:
        raise UserError("--kernels: empty list")
    if any(map(names_tree, items)):
        return (), None, tuple(Listed(i) if names_tree(i) else Listed(None, i) for i in items)
    if len(items) == 1 and any(c in items[0] for c in "*?[") and not Path(items[0]).exists():
        return (), items[0], ()
    return items, None, ()


def parse_axis(option: str) -> Axis:
    """`--axis KEY=V1,V2,...`: over a scenario key, `append`, or `postgres` (pgaxis.py)."""
    return pgaxis.parse(option) or axes_mod.parse(option)


@dataclass(frozen=True)
class Given:
    """What the command line says about a study; None (or empty): the file's."""

    kernels: str | None = None  # "a,b,c" or a tag pattern
    scenario: str | None = None
    name: str | None = None
    tree: str | None = None
    configs: tuple[str, ...] = ()
    arch: str | None = None
    base_config: str | None = None
    axes: tuple[str, ...] = ()  # KEY=V1,V2 each
    sets: tuple[str, ...] = ()
    append: str = ""
    boots: int | None = None
    seed: int | None = None
    baseline: str | None = None
    retries: int | None = None
    min_effect: float | None = None
    budget_hours: float | None = None


def apply(study: Study | None, given: Given) -> Study:
    """The study file's study with the command line applied, or one from the line alone:
    kernels, axes and the scenario replace the file's; sets, configs and append add."""
    if study is None:
        if not (given.kernels and given.scenario):
            raise UserError("kbisect study needs a study file, or --kernels and --scenario")
        study = Study(
            name=given.name or "study", scenario=given.scenario, kernels=KernelSpec(), axes=()
        )
    k = study.kernels
    if given.kernels:
        items, pattern, listed = kernel_items(given.kernels)
        k = replace(k, items=items, pattern=pattern, listed=listed)
    k = replace(
        k,
        tree=given.tree or k.tree,
        configs=k.configs + given.configs,
        arch=given.arch or k.arch,
        base_config=given.base_config or k.base_config,
    )
    numbers = {
        key: getattr(given, key)
        for key in ("boots", "seed", "baseline", "retries", "min_effect", "budget_hours")
        if getattr(given, key) is not None
    }
    return replace(
        study,
        scenario=given.scenario or study.scenario,
        kernels=k,
        axes=tuple(map(parse_axis, given.axes)) if given.axes else study.axes,
        sets=study.sets + given.sets,
        append=" ".join(filter(None, [study.append, given.append])),
        **numbers,
    )
