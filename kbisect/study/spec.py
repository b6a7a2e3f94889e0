"""Study files (`harness/studies/NAME.toml`) and the command line, into one `Study`.

    name = "hugepages-sweep"
    description = "..."
    scenario = "simple-update-2vcpu"
    boots = 3                     # per kernel and cell
    budget_hours = 2.0            # refuse more without --yes
    set = ["guest.thp=never"]     # every cell
    [kernels]
    revs = ["v6.12-debian"]       # or pattern = "v6.*" (version order), or images = [...]
    [[axes]]                      # a key axis: one override per value
    key = "pgbench.clients"
    values = [4, 16]
    needs.16 = { set = ["..."], append = "..." }   # what a value needs besides its key
    [[axes]]                      # a bundle axis: levels with no single key
    name = "pages"
    levels = [{ label = "1G", set = ["..."], append = "hugepagesz=1G hugepages=1" }]

On the command line, `--kernels`, `--axis` and `--scenario` replace the file's, `--set`
and `--append` add to it, `--boots`, `--budget` and the rest override it.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kbisect.core import paths
from kbisect.core.exceptions import UserError
from kbisect.study import axes as axes_mod
from kbisect.study.axes import Axis, Level

TOP = {
    "name",
    "description",
    "scenario",
    "boots",
    "budget_hours",
    "set",
    "append",
    "kernels",
    "axes",
    "baseline",
    "retries",
    "seed",
    "min_effect",
}
KERNEL_KEYS = {"tree", "revs", "pattern", "images", "configs", "base_config", "arch"}
DEFAULT_BUDGET_H = 4.0


class StudyFileError(UserError):
    """A study file that is missing a field, has an unknown one or a wrong type."""


@dataclass(frozen=True)
class KernelSpec:
    items: tuple[str, ...] = ()  # revisions, tags or image paths, in the order given
    pattern: str | None = None  # a tag glob, resolved in version order
    tree: str | None = None
    configs: tuple[str, ...] = ()
    base_config: str = "tinyconfig"
    arch: str | None = None


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
    path = Path(name) if ("/" in name or name.endswith(".toml")) else studies_dir() / f"{name}.toml"
    if not path.is_file():
        raise StudyFileError(f"no study {name!r} (shipped: {', '.join(names()) or 'none'})")
    return path


def _typed(src: str, data: dict[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    value = data[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise StudyFileError(f"{src}: {key} has the wrong type: {value!r}")
    return value


def _strings(src: str, data: dict[str, Any], key: str) -> tuple[str, ...]:
    value = data.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise StudyFileError(f"{src}: {key} must be a list of strings")
    return tuple(value)


def _kernels(src: str, raw: Any) -> KernelSpec:
    if not isinstance(raw, dict) or (unknown := set(raw) - KERNEL_KEYS):
        bad = "" if isinstance(raw, dict) else " (must be a table)"
        raise StudyFileError(f"{src}: [kernels]{bad} unknown keys: {sorted(unknown or {raw})}")
    items = _strings(src, raw, "revs") + _strings(src, raw, "images")
    pattern = raw.get("pattern")
    if bool(items) == bool(pattern):
        raise StudyFileError(f"{src}: [kernels] needs revs/images or a pattern (one of them)")
    return KernelSpec(
        items,
        pattern,
        raw.get("tree"),
        _strings(src, raw, "configs"),
        str(raw.get("base_config", "tinyconfig")),
        raw.get("arch"),
    )


def _needs(src: str, key: str, raw: Any) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise StudyFileError(f"{src}: axis {key}: needs must be a table of values")
    for value, need in raw.items():
        if not isinstance(need, dict) or set(need) - {"set", "append"}:
            raise StudyFileError(f"{src}: axis {key}: needs.{value} takes set and append only")
    return raw


def axis_from_file(src: str, raw: Any) -> Axis:
    if not isinstance(raw, dict):
        raise StudyFileError(f"{src}: every [[axes]] entry must be a table")
    if "key" in raw:
        key = str(raw["key"])
        axes_mod.check_key(key)
        needs = _needs(src, key, raw.get("needs", {}))
        values = raw.get("values")
        if not isinstance(values, list) or not values:
            raise StudyFileError(f"{src}: axis {key}: values must be a non-empty list")
        unused = set(needs) - {axes_mod.text(v) for v in values}
        if unused:
            raise StudyFileError(f"{src}: axis {key}: needs for no value: {sorted(unused)}")
        levels = [axes_mod.key_level(key, v, needs.get(axes_mod.text(v))) for v in values]
        return axes_mod.make(key, levels)
    name, given = raw.get("name"), raw.get("levels")
    if not isinstance(name, str) or not isinstance(given, list):
        raise StudyFileError(f"{src}: an axis needs key and values, or name and levels")
    out = []
    for lv in given:
        if not isinstance(lv, dict) or "label" not in lv or set(lv) - {"label", "set", "append"}:
            raise StudyFileError(f"{src}: axis {name}: a level is {{label, set, append}}")
        out.append(Level(str(lv["label"]), _strings(src, lv, "set"), str(lv.get("append", ""))))
    return axes_mod.make(name, out)


def from_dict(data: dict[str, Any], src: str) -> Study:
    if unknown := set(data) - TOP:
        raise StudyFileError(f"{src}: unknown keys {sorted(unknown)} (known: {sorted(TOP)})")
    for key in ("name", "scenario", "kernels"):
        if key not in data:
            raise StudyFileError(f"{src}: {key} is missing")
    raw_axes = data.get("axes", [])
    if not isinstance(raw_axes, list):
        raise StudyFileError(f"{src}: axes must be an array of tables ([[axes]])")
    given: dict[str, Any] = {
        k: float(_typed(src, data, k, (int, float)))
        for k in ("budget_hours", "min_effect")
        if k in data
    }
    given.update({k: _typed(src, data, k, int) for k in ("boots", "retries", "seed") if k in data})
    return Study(
        name=_typed(src, data, "name", str),
        scenario=_typed(src, data, "scenario", str),
        kernels=_kernels(src, data["kernels"]),
        axes=tuple(axis_from_file(src, a) for a in raw_axes),
        description=str(data.get("description", "")),
        sets=_strings(src, data, "set"),
        append=str(data.get("append", "")),
        baseline=data.get("baseline"),
        source=src,
        **given,
    )


def load(name: str) -> Study:
    path = path_of(name)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise StudyFileError(f"{path.name}: cannot read: {exc}") from None
    study = from_dict(data, path.name)
    if path.parent == studies_dir() and study.name != path.stem:
        raise StudyFileError(f"{path.name}: name must be {path.stem!r}, got {study.name!r}")
    return study


def kernel_items(option: str) -> tuple[tuple[str, ...], str | None]:
    """`--kernels a,b,c` (revisions, tags, images) or `--kernels 'v6.*'` (a tag pattern)."""
    items = tuple(i.strip() for i in option.split(",") if i.strip())
    if not items:
        raise UserError("--kernels: empty list")
    if len(items) == 1 and any(c in items[0] for c in "*?[") and not Path(items[0]).exists():
        return (), items[0]
    return items, None


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
        items, pattern = kernel_items(given.kernels)
        k = replace(k, items=items, pattern=pattern)
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
        axes=tuple(axes_mod.parse(a) for a in given.axes) if given.axes else study.axes,
        sets=study.sets + given.sets,
        append=" ".join(filter(None, [study.append, given.append])),
        **numbers,
    )
