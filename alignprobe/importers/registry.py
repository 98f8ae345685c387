"""Every foreign layout alignprobe reads, in the order detection tries them."""

from __future__ import annotations

from alignprobe.errors import BadInput
from alignprobe.importers import deepspec, modelopt, specforge, speculators, trtllm, vllm_connector
from alignprobe.importers.layout import Layout

LAYOUTS: tuple[Layout, ...] = (
    vllm_connector.LAYOUT,  # before speculators, which takes any one .safetensors file: not an hs_<idx> one
    speculators.LAYOUT,
    specforge.SPECFORGE_LAYOUT,
    specforge.EAGLE_LAYOUT,
    modelopt.LAYOUT,
    trtllm.LAYOUT,
    deepspec.LAYOUT,
)


def layout_named(name: str) -> Layout:
    for layout in LAYOUTS:
        if layout.name == name:
            return layout
    raise BadInput(f"unknown layout {name!r}: one of {', '.join(layout.name for layout in LAYOUTS)}")


def system_names() -> list[str]:
    """Every --system value an import takes: each layout's name and the backends it names apart."""
    return [name for layout in LAYOUTS for name in (layout.name, *layout.aliases)]
