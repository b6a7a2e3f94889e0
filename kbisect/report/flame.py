"""A flame graph as one self-contained SVG, from folded stacks ("a;b;c count" lines).

Each frame is a rectangle whose width is proportional to the samples under it, stacked
on its caller (the root at the bottom), children left to right by name; a label when it
fits, a <title> tooltip always. The output depends only on the stacks: colours come from
a hash of the frame's name, never from randomness.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from xml.sax.saxutils import escape

WIDTH = 1200.0  # px, of the frames' area
FRAME_H = 16  # px per stack level
PAD = 10  # px around the frames
TITLE_H = 30  # px above them
CHAR_W = 7.0  # px per character of the 12 px monospace labels
MIN_WIDTH = 0.1  # px: narrower frames (and their children) are not drawn


@dataclass
class Node:
    name: str
    count: int = 0
    children: dict[str, Node] = field(default_factory=dict)


def parse(text: str) -> dict[str, int]:
    """Folded lines -> {stack: count}; a malformed line is skipped."""
    stacks: dict[str, int] = {}
    for line in text.splitlines():
        stack, _, count = line.rstrip().rpartition(" ")
        if stack and count.isdigit():
            stacks[stack] = stacks.get(stack, 0) + int(count)
    return stacks


def tree(stacks: dict[str, int]) -> Node:
    root = Node("all")
    for stack, count in stacks.items():
        root.count += count
        node = root
        for frame in stack.split(";"):
            node = node.children.setdefault(frame, Node(frame))
            node.count += count
    return root


def _depth(node: Node) -> int:
    return 1 + max((_depth(c) for c in node.children.values()), default=0)


def colour(name: str) -> str:
    """A warm colour from the name (stable across runs and machines)."""
    digest = hashlib.sha256(name.encode()).digest()
    return f"rgb({205 + digest[0] % 50},{digest[1] % 200},{digest[2] % 55})"


def _frame(node: Node, x: float, y: float, width: float, total: int) -> list[str]:
    share = 100.0 * node.count / total if total else 0.0
    tip = escape(f"{node.name} ({node.count} samples, {share:.2f}%)")
    out = [
        "<g>",
        f"<title>{tip}</title>",
        f'<rect x="{x:.2f}" y="{y:.1f}" width="{width:.2f}" height="{FRAME_H - 1}" '
        f'fill="{colour(node.name)}" rx="2" ry="2"/>',
    ]
    chars = int((width - 6) // CHAR_W)
    if chars >= 3:
        label = node.name if len(node.name) <= chars else node.name[: chars - 2] + ".."
        out.append(f'<text x="{x + 3:.2f}" y="{y + FRAME_H - 4:.1f}">{escape(label)}</text>')
    out.append("</g>")
    return out


def _draw(node: Node, x: float, level: int, base_y: float, scale: float, total: int) -> list[str]:
    width = node.count * scale
    if width < MIN_WIDTH:
        return []
    out = _frame(node, x, base_y - level * FRAME_H, width, total)
    for name in sorted(node.children):
        child = node.children[name]
        out += _draw(child, x, level + 1, base_y, scale, total)
        x += child.count * scale
    return out


def render(stacks: dict[str, int], title: str) -> str:
    """The SVG document of these stacks."""
    root = tree(stacks)
    depth = _depth(root)
    height = TITLE_H + depth * FRAME_H + 2 * PAD
    total_w = WIDTH + 2 * PAD
    scale = WIDTH / root.count if root.count else 0.0
    base_y = TITLE_H + PAD + (depth - 1) * FRAME_H
    body = _draw(root, PAD, 0, base_y, scale, root.count) if root.count else []
    head = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{total_w:.0f}" height="{height}" '
        f'viewBox="0 0 {total_w:.0f} {height}" font-family="monospace" font-size="12">',
        f'<rect x="0" y="0" width="{total_w:.0f}" height="{height}" fill="#fdfdf5"/>',
        f'<text x="{total_w / 2:.0f}" y="20" text-anchor="middle" font-size="15">'
        f"{escape(title)}</text>",
    ]
    empty = [] if root.count else [f'<text x="{PAD}" y="{base_y}">no samples</text>']
    return "\n".join([*head, *body, *empty, "</svg>"]) + "\n"
