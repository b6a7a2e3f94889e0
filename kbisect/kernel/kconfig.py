"""Kconfig fragments: find them, merge them with the tree's own merge_config.sh, and
verify that `olddefconfig` kept every symbol they set.

Kconfig drops a symbol without a word when its dependencies are not met or when the
tree does not know it (CONFIG_PREEMPT_NONE after 7.0, CONFIG_PREEMPT_LAZY before 6.13).
A benchmark number from such a kernel measures something else than asked, so
`verify()` turns every such change into a `ConfigDropped` build error unless the user
accepted it with `--allow-dropped`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from kbisect.core import paths, reading
from kbisect.core.exceptions import BuildError, UserError
from kbisect.kernel import machinebase

_SET = re.compile(r"(CONFIG_[A-Za-z0-9_]+)=(.*)")
_NOT_SET = re.compile(r"# (CONFIG_[A-Za-z0-9_]+) is not set")
SUFFIX = ".config"


class UnknownFragment(UserError):
    """A `--config NAME` that is neither a fragment in kernel-configs/ nor a file."""


class BadFragment(UserError):
    """A fragment line that is neither `CONFIG_X=value` nor `# CONFIG_X is not set`."""


class ConfigDropped(BuildError):
    """`olddefconfig` changed or dropped a symbol a fragment asked for."""


@dataclass(frozen=True)
class Fragment:
    name: str  # "base/core.config", "preempt-none.config", or the path given
    path: Path
    sha256: str
    settings: dict[str, str] = field(hash=False)  # "CONFIG_X" -> "y" | "n" | '"str"' | ...


def parse(text: str) -> dict[str, str]:
    """`CONFIG_X=y` -> {"CONFIG_X": "y"}; `# CONFIG_X is not set` -> "n"; later lines win.

    Strings keep their quotes as written. Other comments and blank lines are ignored;
    any other line raises BadFragment naming its line number.
    """
    settings: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if m := _SET.fullmatch(line):
            settings[m.group(1)] = m.group(2)
        elif m := _NOT_SET.fullmatch(line):
            settings[m.group(1)] = "n"
        elif line and not line.startswith("#"):
            raise BadFragment(
                f"line {number}: {line!r} is neither CONFIG_NAME=value "
                "nor '# CONFIG_NAME is not set'"
            )
    return settings


def load(path: Path, name: str) -> Fragment:
    """Read one fragment file; a malformed line raises BadFragment naming the file."""
    text = reading.text(path, None, BadFragment)
    try:
        settings = parse(text)
    except BadFragment as exc:
        raise BadFragment(f"{path}: {exc}") from None
    return Fragment(name, path, hashlib.sha256(text.encode()).hexdigest(), settings)


def available(configs_dir: Path | None = None) -> list[str]:
    """The names `--config` accepts: the top-level fragments in kernel-configs/."""
    root = configs_dir or paths.configs_dir()
    return sorted(p.name.removesuffix(SUFFIX) for p in root.glob(f"*{SUFFIX}"))


# Bases that start from nothing: only on these do the trim/ fragments apply (turning
# off what EXPERT off and the base fragments bring in by default). A bigger base was
# chosen with what it has, and may select a symbol trim/ turns off.
MINIMAL_BASES = ("tinyconfig", "allnoconfig")


def resolve(
    names: list[str], arch: str, configs_dir: Path | None = None, base: str = "tinyconfig"
) -> list[Fragment]:
    """All of base/*.config (sorted), then arch/<arch>.config, then on a machine's base
    (target:NAME) machine/*.config, on a minimal base trim/common.config and
    trim/<arch>.config, then each name in order.

    A name is `<name>.config` in `configs_dir` (the `.config` may be given) or the
    path of an existing file.
    """
    root = configs_dir or paths.configs_dir()
    frags = [load(p, f"base/{p.name}") for p in sorted((root / "base").glob(f"*{SUFFIX}"))]
    arch_path = root / "arch" / f"{arch}{SUFFIX}"
    if not arch_path.is_file():
        known = sorted(p.name.removesuffix(SUFFIX) for p in (root / "arch").glob(f"*{SUFFIX}"))
        raise UnknownFragment(
            f"no fragment for arch {arch!r} in {root}/arch (have: {', '.join(known)})"
        )
    frags.append(load(arch_path, f"arch/{arch_path.name}"))
    if machinebase.target_name(base) is not None:  # a machine's own config: kexec on (machine/)
        frags += [load(p, f"machine/{p.name}") for p in sorted((root / "machine").glob("*.config"))]
    if base in MINIMAL_BASES:
        for stem in ("common", arch):
            trim = root / "trim" / f"{stem}{SUFFIX}"
            if trim.is_file():
                frags.append(load(trim, f"trim/{trim.name}"))
    frags.extend(_named(name, root) for name in names)
    return frags


def _named(name: str, root: Path) -> Fragment:
    stem = name.removesuffix(SUFFIX)
    if stem and "/" not in stem and (root / f"{stem}{SUFFIX}").is_file():
        return load(root / f"{stem}{SUFFIX}", f"{stem}{SUFFIX}")
    if Path(name).is_file():
        return load(Path(name), name)
    raise UnknownFragment(
        f"unknown config fragment {name!r}; available: {', '.join(available(root))} "
        "(or the path of a fragment file)"
    )


def merge_command(tree: Path, outdir: Path, fragment_paths: list[Path]) -> list[str]:
    """The tree's own merge_config.sh merging fragments into `<outdir>/.config` (no make).

    merge_config.sh writes temporary files into its working directory: run it with
    cwd=outdir.
    """
    script = tree / "scripts" / "kconfig" / "merge_config.sh"
    base = outdir / ".config"
    return [str(script), "-m", "-O", str(outdir), str(base), *(str(p) for p in fragment_paths)]


def requested(fragments: list[Fragment]) -> dict[str, tuple[str, Fragment]]:
    """Every symbol any fragment sets -> (value, fragment); the last fragment wins."""
    wanted: dict[str, tuple[str, Fragment]] = {}
    for frag in fragments:
        for symbol, value in frag.settings.items():
            wanted[symbol] = (value, frag)
    return wanted


def normalize_symbol(name: str) -> str:
    """`PREEMPT_NONE` or `CONFIG_PREEMPT_NONE` -> `CONFIG_PREEMPT_NONE`."""
    name = name.strip()
    return name if name.startswith("CONFIG_") else f"CONFIG_{name}"


def allowed_symbols(values: Iterable[str]) -> set[str]:
    """`--allow-dropped` values (repeatable, comma separated) -> a set of CONFIG_ names."""
    return {normalize_symbol(v) for value in values for v in value.split(",") if v.strip()}


def verify(final_config_text: str, fragments: list[Fragment], allow_dropped: set[str]) -> list[str]:
    """Check every requested symbol against the final .config ("n" also matches absent).

    Returns one warning per change the user allowed; raises ConfigDropped naming every
    other change, the fragment that asked, what it asked and what it got.
    """
    final = parse(final_config_text)
    allowed = {normalize_symbol(s) for s in allow_dropped}
    problems: list[tuple[str, str]] = []
    warnings: list[str] = []
    for symbol, (value, frag) in requested(fragments).items():
        got = final.get(symbol)
        if value == (got or "n"):
            continue
        change = (
            f"{symbol}={value} requested by {frag.name} became {_describe(got)} after olddefconfig"
        )
        if symbol in allowed:
            warnings.append(f"{change} (allowed by --allow-dropped)")
        else:
            problems.append((symbol, change))
    if problems:
        raise ConfigDropped(_dropped_message(problems))
    return warnings


def _describe(got: str | None) -> str:
    if got is None:
        return "absent (unknown symbol or unmet dependencies)"
    if got == "n":
        return '"not set"'
    return got if got.startswith('"') else f'"{got}"'


def _dropped_message(problems: list[tuple[str, str]]) -> str:
    symbols = " ".join(f"--allow-dropped {symbol}" for symbol, _ in problems)
    return f"{'; '.join(change for _, change in problems)} (use {symbols} to accept)"


def config_hash(text: str) -> str:
    """sha256 over the sorted symbol lines of a .config (comments other than
    "is not set" and blank lines ignored), so a header or order change keeps the hash."""
    lines = {
        line.strip()
        for line in text.splitlines()
        if _SET.fullmatch(line.strip()) or _NOT_SET.fullmatch(line.strip())
    }
    return hashlib.sha256("".join(f"{line}\n" for line in sorted(lines)).encode()).hexdigest()


def fragments_hash(fragments: list[Fragment]) -> str:
    """sha256 over the fragments' contents in order (order matters: later ones win)."""
    return hashlib.sha256("".join(f"{f.sha256}\n" for f in fragments).encode()).hexdigest()
