"""``alignprobe import SRC --out D.h5``: a foreign hidden-state dump into ours."""

from __future__ import annotations

import click

from alignprobe.cli.options import NUM_LAYERS
from alignprobe.importers import import_source
from alignprobe.importers.registry import system_names
from alignprobe.layer_ids import parse_ids
from alignprobe.safe_paths import input_path, output_file, refuse_overlap


@click.command("import")
@click.argument("source", type=click.Path())
@click.option("--out", "out_path", required=True, type=click.Path(), help="Dump to write (HDF5).")
@click.option("--system", type=click.Choice(system_names()), default=None,
              help="What produced SOURCE [default: detected from the files; modelopt-hf / modelopt-vllm name "
                   "Model-Optimizer's backend where its files do not tell].")
@click.option("--layer-ids", default=None, help="Layer ids the producing run used, in its own numbering: 1,29,57.")
@click.option("--drafter-config", type=click.Path(), default=None,
              help="A drafter config.json holding the ids (eagle_config.eagle_aux_hidden_state_layer_ids).")
@click.option("--num-layers", type=NUM_LAYERS, default=None, help="The target model's decoder layer count N.")
@click.option("--target-config", type=click.Path(), default=None, help="The target model's config.json (for N).")
@click.option("--ids-from", type=click.Path(), default=None,
              help="A dump of the same prompts: take its sample ids where the tokens match.")
@click.option("--force", is_flag=True, help="Replace --out if it exists.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def import_command(source, out_path, system, layer_ids, drafter_config, num_layers, target_config, ids_from, force,
                   quiet) -> None:
    """Import a foreign hidden-state dump (SpecForge, speculators, EAGLE ge_data, Model-Optimizer,
    TensorRT-LLM SaveState, a DeepSpec target cache, a vLLM extract_hidden_states connector folder) into an
    alignprobe dump."""
    refuse_overlap({"--out": output_file(out_path, "--out")},
                   {"SOURCE": input_path(source, "foreign dump"), "--drafter-config": drafter_config,
                    "--target-config": target_config, "--ids-from": ids_from})
    result = import_source(
        source,
        out_path,
        system=system,
        layer_ids=parse_ids(layer_ids) if layer_ids is not None else None,
        config=drafter_config,
        num_layers=num_layers,
        target_config=target_config,
        ids_from=ids_from,
        overwrite=force,
        progress=not quiet,
    )
    click.echo(result.summary())
